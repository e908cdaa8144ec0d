package remote

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/server"
)

// Server is a Dialer for `hutch serve --listen`: each Dial opens a new
// session on the server at URL (http://host:port or https://host:port)
// with the bearer token, narrowed as Narrow asks (the server refuses any
// widening, and New then fails with its reason). A session whose
// connection is lost is reattached on the next call, within the server's
// idle window; a session the server no longer has (closed, idled out, the
// server restarted) is ErrGone.
type Server struct {
	URL   string
	Token string
	// Narrow is what this session asks of the server's policy: fewer
	// paths, no network, lower limits (see policy.Narrowing).
	Narrow policy.Narrowing
	// TLS configures https (nil: the system's roots); a client
	// certificate goes here for mutual TLS.
	TLS *tls.Config
}

// ErrRefused: the server answered, and refused (wrong token, a widening,
// too many sessions); the error carries its one-line reason.
var ErrRefused = errors.New("hutch serve refused")

type refusedError struct {
	status int
	msg    string
}

func (e *refusedError) Error() string        { return ErrRefused.Error() + ": " + e.msg }
func (e *refusedError) Is(target error) bool { return target == ErrRefused }

// unknownSession reports a refusal because the server has no such
// session.
func unknownSession(err error) bool {
	var re *refusedError
	return errors.As(err, &re) && re.status == http.StatusNotFound
}

// dialTimeout bounds connecting and the server's answer to the upgrade.
const dialTimeout = 30 * time.Second

// String names the server (never the token).
func (s Server) String() string { return s.URL }

// Dial opens a new session.
func (s Server) Dial(ctx context.Context) (io.ReadWriteCloser, error) {
	hdr := http.Header{}
	if !s.Narrow.IsZero() {
		b, err := json.Marshal(s.Narrow)
		if err != nil {
			return nil, err
		}
		hdr.Set(server.HeaderNarrow, base64.RawURLEncoding.EncodeToString(b))
	}
	return s.upgrade(ctx, http.MethodGet, server.SessionsPath, hdr)
}

// upgrade sends one request on a new connection; a 101 answer turns the
// connection into the session's stream.
func (s Server) upgrade(ctx context.Context, method, path string, hdr http.Header) (*httpStream, error) {
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: remote: server URL %q: want http://HOST:PORT or https://HOST:PORT", sandbox.ErrConfig, s.URL)
	}
	if s.Token == "" && s.TLS == nil {
		return nil, fmt.Errorf("%w: remote: no token for %s: give the server's token (--token-file)", sandbox.ErrConfig, s.URL)
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	var conn net.Conn
	if u.Scheme == "https" {
		cfg := s.TLS
		if cfg == nil {
			cfg = &tls.Config{}
		}
		conn, err = (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", host)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", host)
	}
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	req := &http.Request{Method: method, URL: &url.URL{Path: path}, Host: u.Host, Header: hdr, ProtoMajor: 1, ProtoMinor: 1}
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", server.Upgrade)
	br := bufio.NewReader(conn)
	if err = req.Write(conn); err == nil {
		var res *http.Response
		if res, err = http.ReadResponse(br, req); err == nil {
			if res.StatusCode == http.StatusSwitchingProtocols {
				return &httpStream{Conn: conn, r: br, srv: s, id: res.Header.Get(server.HeaderSession)}, nil
			}
			body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
			conn.Close()
			if method == http.MethodDelete && res.StatusCode == http.StatusNoContent {
				return nil, nil
			}
			return nil, &refusedError{status: res.StatusCode, msg: fmt.Sprintf("%s (%s)", strings.TrimSpace(string(body)), res.Status)}
		}
	}
	conn.Close()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("no answer from %s within %v", s.URL, dialTimeout)
	}
	if err == nil {
		err = errors.New("the connection ended before an answer")
	}
	return nil, err
}

// httpStream is a session's connection.
type httpStream struct {
	net.Conn
	r   *bufio.Reader
	srv Server
	id  string
}

func (h *httpStream) Read(p []byte) (int, error) { return h.r.Read(p) }

// reattachWait bounds how long a reattach waits for the server to notice
// that the lost connection is gone (until then the session is attached
// to it, and the server refuses a second attach).
const reattachWait = 5 * time.Second

// reattach opens a new connection to the same session.
func (h *httpStream) reattach(ctx context.Context) (io.ReadWriteCloser, error) {
	deadline := time.Now().Add(reattachWait)
	for {
		st, err := h.srv.upgrade(ctx, http.MethodGet, server.SessionsPath+"/"+h.id, http.Header{})
		var re *refusedError
		if err == nil {
			return st, nil
		}
		if !errors.As(err, &re) || re.status != http.StatusConflict || time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, err
		}
	}
}

// end asks the server to close the session.
func (h *httpStream) end(ctx context.Context) {
	// A session the server no longer has is ended too: nothing to report.
	_, _ = h.srv.upgrade(ctx, http.MethodDelete, server.SessionsPath+"/"+h.id, http.Header{})
}

// reattacher is a stream whose session outlives its connection.
type reattacher interface {
	reattach(ctx context.Context) (io.ReadWriteCloser, error)
	end(ctx context.Context)
}
