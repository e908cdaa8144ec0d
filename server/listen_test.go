package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/sandbox/remote"
	"github.com/hutchsandbox/hutch/server"
)

// The test binary is also the local tier's helper.
func TestMain(m *testing.M) {
	helper.Main()
	os.Exit(m.Run())
}

var bg = context.Background()

const token = "the-servers-token-0123456789"

// fixture is a listening server on loopback whose sessions are local
// sandboxes, counting what it opened and closed.
type fixture struct {
	url            string
	addr           string
	opened, closed atomic.Int32
	roots          sync.Map // session root → true
	stop           func()
}

type countingSandbox struct {
	sandbox.Sandbox
	f *fixture
}

func (c countingSandbox) Close() error {
	c.f.closed.Add(1)
	return c.Sandbox.Close()
}

func serve(t *testing.T, cfg server.Config) *fixture {
	t.Helper()
	return serveOn(t, "127.0.0.1:0", cfg)
}

func serveOn(t *testing.T, addr string, cfg server.Config) *fixture {
	t.Helper()
	return serveWith(t, addr, cfg, true)
}

// serveWith is serveOn, with the test's token when withToken.
func serveWith(t *testing.T, addr string, cfg server.Config, withToken bool) *fixture {
	t.Helper()
	f := &fixture{}
	if cfg.Token == "" && withToken {
		cfg.Token = token
	}
	cfg.Open = func(ctx context.Context, n policy.Narrowing) (sandbox.Sandbox, server.Served, error) {
		if !n.IsZero() {
			// The local tier has no policy to narrow: as a real server
			// refuses it, with the reason.
			base := policy.Default()
			if _, err := base.Narrow(n); err != nil {
				return nil, server.Served{}, err
			}
		}
		dir := t.TempDir()
		sb, err := local.New(ctx, local.Options{Dir: dir})
		if err != nil {
			return nil, server.Served{}, err
		}
		f.opened.Add(1)
		f.roots.Store(sb.Root(), true)
		return countingSandbox{sb, f}, server.Served{Tier: "local"}, nil
	}
	ln, err := server.ListenAddr(addr, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	f.url = "http://" + f.addr
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, ln, cfg) }()
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(f.stop)
	return f
}

func (f *fixture) connect(t *testing.T, s remote.Server) *remote.Sandbox {
	t.Helper()
	if s.URL == "" {
		s.URL = f.url
	}
	if s.Token == "" && s.TLS == nil {
		s.Token = token
	}
	sb, err := remote.New(bg, s, remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// raw sends one request by hand and returns the answer's status and body.
func raw(t *testing.T, f *fixture, method, path string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, f.url+path, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", server.Upgrade)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(b))
}

// Every request that is not the server's own client is refused before
// anything starts: no session is opened for it.
func TestServeRefusesBeforeStarting(t *testing.T) {
	f := serve(t, server.Config{})
	narrow := func(n policy.Narrowing) string {
		b, _ := json.Marshal(n)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	for _, c := range []struct {
		name string
		hdr  map[string]string
		path string
		code int
		says string
	}{
		{"no token", nil, server.SessionsPath, 401, "Authorization: Bearer"},
		{"a wrong token", map[string]string{"Authorization": "Bearer wrong"}, server.SessionsPath, 401, "token"},
		{"another server's token", map[string]string{"Authorization": "Bearer another-servers-token-0123456789"}, server.SessionsPath, 401, "token"},
		{"the token in another scheme", map[string]string{"Authorization": "Basic " + token}, server.SessionsPath, 401, "token"},
		{"a web page", map[string]string{"Authorization": "Bearer " + token, "Origin": "https://evil.example"}, server.SessionsPath, 403, "web pages"},
		{"a rebound name", map[string]string{"Authorization": "Bearer " + token, "Host": "evil.example"}, server.SessionsPath, 403, "loopback"},
		{"a wider write", map[string]string{"Authorization": "Bearer " + token, server.HeaderNarrow: narrow(policy.Narrowing{Write: []string{"/etc"}})}, server.SessionsPath, 403, "write /etc"},
		{"all network", map[string]string{"Authorization": "Bearer " + token, server.HeaderNarrow: narrow(policy.Narrowing{Network: policy.NetworkAll})}, server.SessionsPath, 403, "network all"},
		{"a malformed narrowing", map[string]string{"Authorization": "Bearer " + token, server.HeaderNarrow: "%%%"}, server.SessionsPath, 400, "base64url"},
		{"an unknown narrowing field", map[string]string{"Authorization": "Bearer " + token, server.HeaderNarrow: base64.RawURLEncoding.EncodeToString([]byte(`{"widen":true}`))}, server.SessionsPath, 400, "unknown field"},
		{"a guessed session", map[string]string{"Authorization": "Bearer " + token}, server.SessionsPath + "/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 404, "no session"},
		{"no upgrade", map[string]string{"Authorization": "Bearer " + token, "Upgrade": "websocket"}, server.SessionsPath, 426, server.Upgrade},
		{"another path", map[string]string{"Authorization": "Bearer " + token}, "/admin", 404, "open a session"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body := raw(t, f, http.MethodGet, c.path, c.hdr)
			if code != c.code || !strings.Contains(body, c.says) || strings.Contains(body, "\n") {
				t.Errorf("answer %d %q, want %d naming %q on one line", code, body, c.code, c.says)
			}
		})
	}
	if n := f.opened.Load(); n != 0 {
		t.Errorf("%d sessions opened for refused requests", n)
	}
}

// The client learns why a session was refused.
func TestServeRefusalReachesTheClient(t *testing.T) {
	f := serve(t, server.Config{})
	_, err := remote.New(bg, remote.Server{URL: f.url, Token: token, Narrow: policy.Narrowing{Write: []string{"/etc"}}}, remote.Options{})
	if !errors.Is(err, remote.ErrRefused) || !strings.Contains(err.Error(), "write /etc") {
		t.Fatalf("New with a wider policy: %v", err)
	}
	_, err = remote.New(bg, remote.Server{URL: f.url, Token: "wrong-token-0123456789abc"}, remote.Options{})
	if !errors.Is(err, remote.ErrRefused) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("New with a wrong token: %v", err)
	}
}

// A flood of sessions stops at MaxSessions; nothing is opened past it,
// and a closed session frees its place.
func TestServeBoundsSessions(t *testing.T) {
	f := serve(t, server.Config{MaxSessions: 2})
	a := f.connect(t, remote.Server{})
	f.connect(t, remote.Server{})
	_, err := remote.New(bg, remote.Server{URL: f.url, Token: token}, remote.Options{})
	if !errors.Is(err, remote.ErrRefused) || !strings.Contains(err.Error(), "at most 2 sessions") {
		t.Fatalf("a third session: %v", err)
	}
	if n := f.opened.Load(); n != 2 {
		t.Fatalf("%d sessions opened, want 2", n)
	}
	a.Close()
	f.connect(t, remote.Server{})
}

// A session belongs to one connection at a time: another client that
// learns its id cannot attach while it is attached.
func TestServeSessionIsAttachedOnce(t *testing.T) {
	f := serve(t, server.Config{})
	conn, id := upgradeRaw(t, f, server.SessionsPath)
	defer conn.Close()
	code, body := raw(t, f, http.MethodGet, server.SessionsPath+"/"+id, map[string]string{"Authorization": "Bearer " + token})
	if code != http.StatusConflict {
		t.Fatalf("a second attach: %d %q, want 409", code, body)
	}
	code, _ = raw(t, f, http.MethodGet, server.SessionsPath+"/"+id, map[string]string{"Authorization": "Bearer wrong"})
	if code != http.StatusUnauthorized {
		t.Fatalf("an attach with a wrong token: %d, want 401", code)
	}
}

// upgradeRaw opens a session by hand and returns its connection (the
// server's hello unread) and id.
func upgradeRaw(t *testing.T, f *fixture, path string) (net.Conn, string) {
	t.Helper()
	conn, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", path, f.addr, token, server.Upgrade)
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	return conn, res.Header.Get(server.HeaderSession)
}

// A frame larger than the protocol allows ends the connection without
// the server reading (or allocating) it; the session survives for a
// reattach.
func TestServeRefusesOversizedFrames(t *testing.T) {
	f := serve(t, server.Config{})
	conn, _ := upgradeRaw(t, f, server.SessionsPath)
	defer conn.Close()
	var hdr [13]byte // type, id, length: a request frame of 1 GiB
	hdr[0] = 1
	binary.BigEndian.PutUint64(hdr[1:9], 1)
	binary.BigEndian.PutUint32(hdr[9:13], 1<<30)
	if _, err := conn.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("the server did not end the connection: %v", err)
	}
}

// A client that sends its request head slowly is cut off at the head
// timeout, before any session.
func TestServeCutsSlowClients(t *testing.T) {
	f := serve(t, server.Config{HeaderTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n", server.SessionsPath, f.addr)
	begin := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("the server kept a slow client past 10 s: %v", err)
	}
	if time.Since(begin) > 5*time.Second || f.opened.Load() != 0 {
		t.Fatalf("cut after %v, %d sessions", time.Since(begin), f.opened.Load())
	}
}

// A client that lost its connection reattaches to its session on its next
// call, files and all; one that never comes back is reaped after the idle
// window.
func TestServeReattachesAndReaps(t *testing.T) {
	f := serve(t, server.Config{IdleTimeout: 2 * time.Second})
	p := newProxy(t, f.addr)
	sb := f.connect(t, remote.Server{URL: "http://" + p.addr})
	sb2, err := remote.New(bg, remote.Server{URL: "http://" + p.addr, Token: token}, remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Write(bg, "kept.txt", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	p.cut() // both clients lose their connections
	// The first comes back; its next call may see the loss, the one after reattaches.
	var got []byte
	for i := 0; i < 3; i++ {
		got, err = sb.Read(bg, "kept.txt")
		if err == nil {
			break
		}
		if errors.Is(err, remote.ErrGone) {
			t.Fatalf("Read after a lost connection: %v, want a reattach", err)
		}
	}
	if string(got) != "kept" {
		t.Fatalf("after the reattach: %q %v", got, err)
	}
	// The second never does: the server closes its session.
	for deadline := time.Now().Add(10 * time.Second); f.closed.Load() < 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned session was not closed after its idle window")
		}
	}
	if _, err := sb2.Read(bg, "x"); !errors.Is(err, remote.ErrGone) {
		t.Errorf("the reaped session's client: %v, want ErrGone", err)
	}
	if f.closed.Load() != 1 {
		t.Errorf("%d sessions closed, want 1 (the one that came back stays)", f.closed.Load())
	}
}

// A restarted server has none of its old sessions: the client's next call
// is ErrGone, never a hang.
func TestServeRestartEndsSessions(t *testing.T) {
	f := serve(t, server.Config{})
	sb := f.connect(t, remote.Server{})
	if _, err := sb.Stat(bg, "."); err != nil {
		t.Fatal(err)
	}
	f.stop()
	if f.closed.Load() != 1 {
		t.Fatalf("stopping the server closed %d sessions, want 1", f.closed.Load())
	}
	serveOn(t, f.addr, server.Config{})
	var err error
	for i := 0; i < 3 && !errors.Is(err, remote.ErrGone); i++ {
		_, err = sb.Stat(bg, ".")
	}
	if !errors.Is(err, remote.ErrGone) || !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("a call after the restart: %v, want ErrGone", err)
	}
}

// The network cut in the middle of a write, or of a tree's copy in (which
// the server unpacks as it comes), leaves no torn file: each file there
// has its old content or the whole new one, and the call fails.
func TestServeCutMidWriteLeavesNoTornFile(t *testing.T) {
	big := bytes.Repeat([]byte("n"), 32<<20)
	tree := t.TempDir()
	for i := range 32 {
		if err := os.WriteFile(fmt.Sprintf("%s/f%02d.bin", tree, i), big[:1<<20], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		write func(sb *remote.Sandbox) error
		files []string
	}{
		{"write", func(sb *remote.Sandbox) error { return sb.Write(bg, "f.bin", big) }, []string{"f.bin"}},
		{"copy in", func(sb *remote.Sandbox) error { _, err := sb.CopyIn(bg, tree, "."); return err }, []string{"f00.bin", "f15.bin", "f31.bin"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := serve(t, server.Config{})
			p := newProxy(t, f.addr)
			sb := f.connect(t, remote.Server{URL: "http://" + p.addr})
			for _, name := range c.files {
				if err := sb.Write(bg, name, []byte("old")); err != nil {
					t.Fatal(err)
				}
			}
			p.cutAfter(4 << 20)
			if err := c.write(sb); err == nil {
				t.Fatal("a transfer of 32 MiB through a link cut after 4 MiB worked")
			}
			var root string
			f.roots.Range(func(k, _ any) bool { root = k.(string); return false })
			ents, err := os.ReadDir(root)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				got, err := os.ReadFile(root + "/" + e.Name())
				if err != nil || string(got) != "old" && !bytes.Equal(got, big[:len(got)]) || len(got) != 3 && len(got) != 1<<20 && len(got) != len(big) {
					t.Errorf("after the cut %s is %d bytes (%v): torn", e.Name(), len(got), err)
				}
			}
		})
	}
}

// proxy forwards TCP connections to a server and can cut them.
type proxy struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
	limit atomic.Int64 // bytes client→server before a cut; 0 none
}

func newProxy(t *testing.T, to string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &proxy{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() {
				var n int64
				buf := make([]byte, 32<<10)
				for {
					k, err := c.Read(buf)
					if lim := p.limit.Load(); lim > 0 && n+int64(k) > lim {
						p.cut()
						return
					}
					n += int64(k)
					if k > 0 {
						if _, werr := s.Write(buf[:k]); werr != nil {
							return
						}
					}
					if err != nil {
						s.Close()
						return
					}
				}
			}()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) cutAfter(n int64) { p.limit.Store(n) }
