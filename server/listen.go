package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/bearer"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// The session protocol over HTTP/1.1: a client opens a session with
//
//	GET /v1/sessions             Upgrade: hutch-stream/3, Authorization: Bearer TOKEN,
//	                             Hutch-Narrow: base64url(JSON policy.Narrowing), optional
//
// and reattaches to one (after a lost connection) with GET
// /v1/sessions/ID and the same headers but Hutch-Narrow; the answer is
// "101 Switching Protocols" with Hutch-Session: ID, and the connection
// then carries the helper stream. DELETE /v1/sessions/ID closes a session.
//
// HTTP/1.1 Upgrade rather than WebSocket or HTTP/2: the stream is already
// framed and flow-controlled, so WebSocket's framing and HTTP/2's streams
// would only wrap frames in frames; Upgrade is in the standard library on
// both ends, is authenticated and answered before anything switches, and
// passes the TLS terminators and Kubernetes' API proxy that pass
// WebSocket.
const (
	// Upgrade is the protocol token of the Upgrade header.
	Upgrade = "hutch-stream/3"
	// SessionsPath is where sessions are opened.
	SessionsPath = "/v1/sessions"
	// HeaderSession carries the session id in a 101 answer.
	HeaderSession = "Hutch-Session"
	// HeaderNarrow carries a new session's narrowing.
	HeaderNarrow = "Hutch-Narrow"
)

// Defaults of Config.
const (
	DefaultMaxSessions   = 16
	DefaultIdleTimeout   = 5 * time.Minute
	defaultHeaderTimeout = 10 * time.Second
	maxHeaderBytes       = 64 << 10
)

// Opener makes a new session's sandbox, narrowed as the client asked (the
// zero Narrowing when it asked nothing). It must refuse a narrowing it
// cannot honour with an error matching policy.ErrWiden (or ErrConfig for
// a malformed one), and never widen.
type Opener func(ctx context.Context, n policy.Narrowing) (sandbox.Sandbox, Served, error)

// Config is a listening server's.
type Config struct {
	// Open makes each session's sandbox.
	Open Opener
	// Token is the bearer token every request must carry; "" only with
	// TLS that verifies client certificates (mutual TLS).
	Token string
	// TLS, when set, serves TLS (ListenAddr wraps the listener).
	TLS *tls.Config
	// MaxSessions bounds the sessions at once (0: DefaultMaxSessions);
	// IdleTimeout closes a session that has no connection for that long
	// (0: DefaultIdleTimeout).
	MaxSessions int
	IdleTimeout time.Duration
	// HeaderTimeout bounds how long a request head may take to arrive
	// (0: 10 s): a slow-loris client holds a connection no longer.
	HeaderTimeout time.Duration
	// Log receives a line per session opened, closed or refused.
	Log io.Writer
}

// ErrInsecure: an address other machines can reach, without TLS.
var ErrInsecure = errors.New("refusing to serve in clear text on an address other machines can reach")

// ListenAddr listens on addr (host:port; a bare ":port" binds
// 127.0.0.1). An address that is not loopback needs cfg.TLS unless
// insecure is set (the token and every file then cross the network in
// clear text). Only cfg.TLS is read here; Serve checks the rest.
func ListenAddr(addr string, cfg Config, insecure bool) (net.Listener, error) {
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && cfg.TLS == nil && !insecure {
		ln.Close()
		return nil, fmt.Errorf("%w: %s: give --tls-cert and --tls-key, bind 127.0.0.1, or say --insecure", ErrInsecure, addr)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	return ln, nil
}

func (cfg Config) check() error {
	switch {
	case cfg.Open == nil:
		return fmt.Errorf("%w: server: no Opener", sandbox.ErrConfig)
	case cfg.Token == "" && (cfg.TLS == nil || cfg.TLS.ClientAuth != tls.RequireAndVerifyClientCert):
		return fmt.Errorf("%w: server: no token: give a token file, or TLS with client certificates (--tls-client-ca)", sandbox.ErrConfig)
	case cfg.Token != "" && bearer.Check(cfg.Token) != "":
		return fmt.Errorf("%w: server: %s", sandbox.ErrConfig, bearer.Check(cfg.Token))
	}
	return nil
}

// Serve answers sessions on ln until ctx ends; then it closes every
// session (their commands are stopped, their sandboxes closed) and
// returns nil once they have ended.
func Serve(ctx context.Context, ln net.Listener, cfg Config) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = defaultHeaderTimeout
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	h := &hub{cfg: cfg, ctx: ctx, sessions: map[string]*session{}, check: bearer.NewChecker(cfg.Token), loopback: isLoopback(ln.Addr())}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: cfg.HeaderTimeout, MaxHeaderBytes: maxHeaderBytes, IdleTimeout: time.Minute,
		ErrorLog: log.New(cfg.Log, "hutch: serve: ", 0)} // failed TLS handshakes, for the operator
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	err := srv.Serve(ln)
	h.closeAll()
	if ctx.Err() != nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// hub holds a server's sessions.
type hub struct {
	cfg      Config
	ctx      context.Context
	check    bearer.Checker
	loopback bool

	mu       sync.Mutex
	sessions map[string]*session
	opening  int // sessions being opened, counted against MaxSessions
	wg       sync.WaitGroup
}

// session is one client's sandbox, attached to at most one connection.
type session struct {
	id     string
	sb     sandbox.Sandbox
	served Served
	// attached is closed... guarded by hub.mu:
	attached bool
	idle     *time.Timer
	detach   context.CancelFunc // ends the attached connection's stream
}

func refuse(w http.ResponseWriter, code int, format string, args ...any) {
	http.Error(w, "hutch serve: "+fmt.Sprintf(format, args...), code)
}

func (h *hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// A browser's request (an Origin header) never opens a session, and
	// on loopback a Host naming another machine is a rebinding attack.
	if r.Header.Get("Origin") != "" {
		refuse(w, http.StatusForbidden, "requests from web pages are refused")
		return
	}
	if h.loopback && !loopbackHost(r.Host) {
		refuse(w, http.StatusForbidden, "Host %q is not this machine's loopback address", r.Host)
		return
	}
	if h.cfg.Token != "" && !h.check.Allows(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hutch"`)
		refuse(w, http.StatusUnauthorized, "this server needs the header \"Authorization: Bearer TOKEN\" with the token it was started with")
		return
	}
	id, hasID := strings.CutPrefix(r.URL.Path, SessionsPath+"/")
	switch {
	case r.URL.Path == SessionsPath && r.Method == http.MethodGet:
		h.open(w, r)
	case hasID && r.Method == http.MethodGet:
		h.reattach(w, r, id)
	case hasID && r.Method == http.MethodDelete:
		if !h.end(id) {
			refuse(w, http.StatusNotFound, "no session %q", id)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		refuse(w, http.StatusNotFound, "%s %s: open a session with GET %s and Upgrade: %s", r.Method, r.URL.Path, SessionsPath, Upgrade)
	}
}

func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// upgrading checks that r asks for the stream.
func upgrading(w http.ResponseWriter, r *http.Request) bool {
	if !headerHas(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), Upgrade) {
		w.Header().Set("Upgrade", Upgrade)
		refuse(w, http.StatusUpgradeRequired, "want Connection: Upgrade and Upgrade: %s (is the client the same hutch version?)", Upgrade)
		return false
	}
	return true
}

func headerHas(hd http.Header, name, token string) bool {
	for _, v := range hd.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func (h *hub) open(w http.ResponseWriter, r *http.Request) {
	if !upgrading(w, r) {
		return
	}
	var n policy.Narrowing
	if raw := r.Header.Get(HeaderNarrow); raw != "" {
		b, err := base64.RawURLEncoding.DecodeString(raw)
		if err == nil {
			dec := json.NewDecoder(strings.NewReader(string(b)))
			dec.DisallowUnknownFields()
			err = dec.Decode(&n)
		}
		if err != nil {
			refuse(w, http.StatusBadRequest, "%s is not base64url of a JSON narrowing: %v", HeaderNarrow, err)
			return
		}
	}
	h.mu.Lock()
	if len(h.sessions)+h.opening >= h.cfg.MaxSessions {
		h.mu.Unlock()
		refuse(w, http.StatusServiceUnavailable, "at most %d sessions at once: close one, or wait for an idle one to end", h.cfg.MaxSessions)
		fmt.Fprintf(h.cfg.Log, "hutch: serve: refused a session from %s: at most %d\n", r.RemoteAddr, h.cfg.MaxSessions)
		return
	}
	h.opening++
	h.mu.Unlock()
	sb, served, err := h.cfg.Open(r.Context(), n)
	h.mu.Lock()
	h.opening--
	h.mu.Unlock()
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, policy.ErrWiden):
			code = http.StatusForbidden
		case errors.Is(err, sandbox.ErrConfig) || errors.Is(err, policy.ErrConfig):
			code = http.StatusBadRequest
		}
		refuse(w, code, "%v", err)
		fmt.Fprintf(h.cfg.Log, "hutch: serve: refused a session from %s: %v\n", r.RemoteAddr, err)
		return
	}
	s := &session{id: newID(), sb: sb, served: served}
	h.mu.Lock()
	h.sessions[s.id] = s
	h.mu.Unlock()
	fmt.Fprintf(h.cfg.Log, "hutch: serve: session %s… opened for %s\n", s.id[:8], r.RemoteAddr)
	h.attach(w, s)
}

func (h *hub) reattach(w http.ResponseWriter, r *http.Request, id string) {
	if !upgrading(w, r) {
		return
	}
	h.mu.Lock()
	s := h.sessions[id]
	switch {
	case s == nil:
		h.mu.Unlock()
		refuse(w, http.StatusNotFound, "no session %q on this server: it was closed, it idled out, or the server restarted", id)
		return
	case s.attached:
		h.mu.Unlock()
		refuse(w, http.StatusConflict, "session %q is attached to another connection", id)
		return
	}
	h.mu.Unlock()
	h.attach(w, s)
}

// attach switches w's connection to s's stream and serves it until the
// connection ends; s then waits IdleTimeout for a reattach.
func (h *hub) attach(w http.ResponseWriter, s *session) {
	h.mu.Lock()
	if s.attached || h.sessions[s.id] != s {
		h.mu.Unlock()
		refuse(w, http.StatusConflict, "session %q is attached to another connection", s.id)
		return
	}
	s.attached = true
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	ctx, cancel := context.WithCancel(h.ctx)
	s.detach = cancel
	h.wg.Add(1)
	h.mu.Unlock()
	defer h.wg.Done()
	defer h.detached(s)
	defer cancel()
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		refuse(w, http.StatusInternalServerError, "cannot switch protocols: %v", err)
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{}) // the head's deadline does not bind the stream
	fmt.Fprintf(buf, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n%s: %s\r\n\r\n", Upgrade, HeaderSession, s.id)
	if err := buf.Flush(); err != nil {
		return
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	err = ServeStream(ctx, io.MultiReader(bufReader(buf.Reader), conn), conn, s.sb, s.served)
	if err != nil {
		fmt.Fprintf(h.cfg.Log, "hutch: serve: session %s…: %v\n", s.id[:8], err)
	}
}

// bufReader is what the server buffered past the request head.
func bufReader(r *bufio.Reader) io.Reader { return io.LimitReader(r, int64(r.Buffered())) }

// detached marks s free for a reattach, and closes it after IdleTimeout
// without one.
func (h *hub) detached(s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.attached = false
	if h.sessions[s.id] != s {
		return
	}
	s.idle = time.AfterFunc(h.cfg.IdleTimeout, func() {
		h.mu.Lock()
		idle := !s.attached && h.sessions[s.id] == s
		h.mu.Unlock()
		if idle && h.end(s.id) {
			fmt.Fprintf(h.cfg.Log, "hutch: serve: session %s… closed after %v without a connection\n", s.id[:8], h.cfg.IdleTimeout)
		}
	})
}

// end closes session id: its connection, its commands, its sandbox.
func (h *hub) end(id string) bool {
	h.mu.Lock()
	s := h.sessions[id]
	delete(h.sessions, id)
	if s != nil {
		if s.idle != nil {
			s.idle.Stop()
		}
		if s.detach != nil {
			s.detach()
		}
	}
	h.mu.Unlock()
	if s == nil {
		return false
	}
	_ = s.sb.Close()
	return true
}

// closeAll ends every session and waits for their streams.
func (h *hub) closeAll() {
	h.mu.Lock()
	ids := make([]string, 0, len(h.sessions))
	for id := range h.sessions {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		h.end(id)
	}
	h.wg.Wait()
}

// newID is a session id: 32 random bytes, base64url, never guessed.
func newID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
