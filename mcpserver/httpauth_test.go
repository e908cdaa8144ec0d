package mcpserver_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/mcpserver"
)

// bearer adds "Authorization: Bearer token" to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// serveHTTP runs mcpserver.ServeHTTP on addr (a real listener) and returns
// the URL it printed; the server stops at the end of the test, and must
// then return nil.
func serveHTTP(t *testing.T, s config.Settings, addr, token string) (url string, log func() string) {
	t.Helper()
	cfg := mcpserver.OpenForTest(t, s)
	ctx, cancel := context.WithCancel(bg)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- mcpserver.ServeHTTP(ctx, cfg, addr, token, pw); pw.Close() }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeHTTP after cancel: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ServeHTTP did not return after its context ended")
		}
	})
	var lines []string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if u, ok := strings.CutPrefix(sc.Text(), "hutch: serving MCP on "); ok {
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return u, func() string { return strings.Join(lines, "\n") }
		}
	}
	t.Fatalf("ServeHTTP printed no address: %q (%v)", lines, <-done)
	return "", nil
}

// The streamable HTTP transport with a token, through a real listener and
// the SDK's client: a bare ":port" binds loopback only; a client with the
// token calls tools, one without cannot even connect.
func TestHTTP(t *testing.T) {
	token, _ := mcpserver.NewToken()
	url, _ := serveHTTP(t, config.Settings{Tier: "local", Root: t.TempDir(), Mode: "auto"}, ":0", token)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("a bare :port served on %s, want 127.0.0.1", url)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(bg, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, text := callTool(t, cs, "shell", map[string]any{"command": "echo over http"})
	if res.IsError || !strings.Contains(text, "over http") {
		t.Errorf("shell over HTTP: %q", text)
	}
	for name, tr := range map[string]http.RoundTripper{"no token": http.DefaultTransport, "wrong token": bearer{token + "x"}} {
		cs, err := client.Connect(bg, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1}, nil)
		if err == nil {
			cs.Close()
			t.Errorf("%s: connected", name)
		}
	}
}

// Every way of not presenting the token is refused with 401 and a reason;
// the scheme is case-insensitive. Requests through a loopback address with
// a foreign Host (DNS rebinding) and cross-site browser requests are
// refused even with the token.
func TestHTTPRefusals(t *testing.T) {
	cfg := mcpserver.OpenForTest(t, config.Settings{Tier: "local", Root: t.TempDir(), Mode: "auto"})
	h, err := mcpserver.Handler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const token = "0123456789abcdef-token"
	srv := httptest.NewServer(mcpserver.RequireToken(h, token))
	defer srv.Close()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, c := range []struct {
		name   string
		path   string
		header map[string]string
		want   int
	}{
		{"no header", "/", nil, 401},
		{"empty bearer", "/", map[string]string{"Authorization": "Bearer "}, 401},
		{"wrong token", "/", map[string]string{"Authorization": "Bearer " + token[:len(token)-1] + "X"}, 401},
		{"token prefix", "/", map[string]string{"Authorization": "Bearer " + token[:8]}, 401},
		{"token plus more", "/", map[string]string{"Authorization": "Bearer " + token + "0"}, 401},
		{"basic scheme", "/", map[string]string{"Authorization": "Basic " + token}, 401},
		{"no scheme", "/", map[string]string{"Authorization": token}, 401},
		{"token in the query", "/?access_token=" + token, nil, 401},
		{"token", "/", map[string]string{"Authorization": "Bearer " + token}, 200},
		{"lower-case scheme", "/", map[string]string{"Authorization": "bearer " + token}, 200},
		{"DNS rebinding", "/", map[string]string{"Authorization": "Bearer " + token, "Host": "evil.example:80"}, 403},
		{"cross-site browser request", "/", map[string]string{"Authorization": "Bearer " + token, "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+c.path, strings.NewReader(initialize))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range c.header {
				if k == "Host" {
					req.Host = v
				} else {
					req.Header[k] = []string{v}
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.want, body)
			}
			if c.want == 401 && (resp.Header.Get("WWW-Authenticate") == "" || !strings.Contains(string(body), "Authorization: Bearer")) {
				t.Errorf("a refusal should say what to send: %q %q", resp.Header.Get("WWW-Authenticate"), body)
			}
		})
	}
}

// Which token --http gets, and every bad token file refused with a reason.
func TestHTTPToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := "s3cret-token-of-enough-length"
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		a       mcpserver.HTTPAuth
		wantErr string
	}{
		{"token file without --http", mcpserver.HTTPAuth{TokenFile: "f"}, "apply to --http"},
		{"no-auth without --http", mcpserver.HTTPAuth{NoAuth: true}, "apply to --http"},
		{"both", mcpserver.HTTPAuth{Addr: ":0", NoAuth: true, TokenFile: "f"}, "contradict"},
		{"open to others", mcpserver.HTTPAuth{Addr: ":0", TokenFile: write("open", good, 0o644)}, "chmod 600"},
		{"group-writable", mcpserver.HTTPAuth{Addr: ":0", TokenFile: write("gw", good, 0o620)}, "chmod 600"},
		{"short", mcpserver.HTTPAuth{Addr: ":0", TokenFile: write("short", "abc\n", 0o600)}, "characters"},
		{"empty", mcpserver.HTTPAuth{Addr: ":0", TokenFile: write("empty", "", 0o600)}, "characters"},
		{"space inside", mcpserver.HTTPAuth{Addr: ":0", TokenFile: write("space", "s3cret token of enough length", 0o600)}, "printable ASCII"},
		{"NUL inside", mcpserver.HTTPAuth{Addr: ":0", TokenFile: write("nul", "s3cret-token\x00of-enough-length", 0o600)}, "printable ASCII"},
		{"non-ASCII", mcpserver.HTTPAuth{Addr: ":0", TokenFile: write("utf8", "s3cret-tökén-of-enough-length", 0o600)}, "printable ASCII"},
		{"huge", mcpserver.HTTPAuth{Addr: ":0", TokenFile: write("huge", strings.Repeat("x", 1<<20), 0o600)}, "characters"},
		{"a directory", mcpserver.HTTPAuth{Addr: ":0", TokenFile: dir}, "not a regular file"},
		{"a FIFO", mcpserver.HTTPAuth{Addr: ":0", TokenFile: fifo}, "not a regular file"},
		{"a dangling symlink is not followed to create a file", mcpserver.HTTPAuth{Addr: ":0", TokenFile: dangling}, "file exists"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := mcpserver.HTTPToken(c.a)
			if err == nil || !isConfig(err) || !strings.Contains(err.Error(), c.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("want a one-line config error about %q, got %v", c.wantErr, err)
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(dir, "elsewhere")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a token was written through a dangling symlink: %v", err)
	}

	t.Run("valid file", func(t *testing.T) {
		tok, note, err := mcpserver.HTTPToken(mcpserver.HTTPAuth{Addr: ":0", TokenFile: write("good", "\n"+good+"\n", 0o600)})
		if err != nil || tok != good || strings.Contains(note, good) {
			t.Errorf("got %q, note %q, %v", tok, note, err)
		}
	})
	t.Run("missing file gets a new token, mode 0600, reused next time", func(t *testing.T) {
		p := filepath.Join(dir, "new")
		tok, note, err := mcpserver.HTTPToken(mcpserver.HTTPAuth{Addr: ":0", TokenFile: p})
		if err != nil || len(tok) < 32 || !strings.Contains(note, "wrote a new token") || strings.Contains(note, tok) {
			t.Fatalf("got %q, note %q, %v", tok, note, err)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("token file: %v %v", fi.Mode(), err)
		}
		again, _, err := mcpserver.HTTPToken(mcpserver.HTTPAuth{Addr: ":0", TokenFile: p})
		if err != nil || again != tok {
			t.Errorf("second start read %q (%v), want the written %q", again, err, tok)
		}
	})
	t.Run("no file: a fresh token each start, shown in the note", func(t *testing.T) {
		a, note, err := mcpserver.HTTPToken(mcpserver.HTTPAuth{Addr: ":0"})
		b, _, _ := mcpserver.HTTPToken(mcpserver.HTTPAuth{Addr: ":0"})
		if err != nil || a == b || len(a) < 32 || !strings.Contains(note, a) {
			t.Errorf("got %q %q, note %q, %v", a, b, note, err)
		}
	})
	t.Run("no auth, said out loud", func(t *testing.T) {
		tok, note, err := mcpserver.HTTPToken(mcpserver.HTTPAuth{Addr: ":0", NoAuth: true})
		if err != nil || tok != "" || !strings.Contains(note, "anyone") {
			t.Errorf("got %q, note %q, %v", tok, note, err)
		}
	})
}

// An address other machines can reach is served (the operator asked for
// it) with a warning that nothing is encrypted.
func TestHTTPWarnsBeyondLoopback(t *testing.T) {
	token, _ := mcpserver.NewToken()
	_, log := serveHTTP(t, config.Settings{}, "0.0.0.0:0", token)
	if !strings.Contains(log(), "clear text") {
		t.Errorf("no warning for 0.0.0.0: %q", log())
	}
	_, log = serveHTTP(t, config.Settings{}, "127.0.0.1:0", token)
	if strings.Contains(log(), "clear text") {
		t.Errorf("a warning for loopback: %q", log())
	}
}

// FuzzRequireToken: a request passes if and only if its Authorization
// header is the Bearer scheme (any case) and exactly the token, give or
// take surrounding spaces.
func FuzzRequireToken(f *testing.F) {
	const token = "0123456789abcdef-token"
	for _, s := range []string{"", "Bearer " + token, "bearer " + token, "Bearer  " + token, "Bearer " + token + " ", "Basic " + token, token, "Bearer\t" + token} {
		f.Add(s)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := mcpserver.RequireToken(ok, token)
	f.Fuzz(func(t *testing.T, header string) {
		req := httptest.NewRequest("POST", "/", nil)
		req.Header["Authorization"] = []string{header}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		scheme, rest, _ := strings.Cut(header, " ")
		want := strings.EqualFold(scheme, "bearer") && strings.TrimSpace(rest) == token
		if got := w.Code == 200; got != want {
			t.Errorf("header %q: passed %v, want %v", header, got, want)
		}
	})
}

// A token file another user owns is refused: it is theirs to read and
// rewrite whatever its mode, so a user who creates the path first (in
// /tmp, or as a symbolic link to a file of theirs) would plant a token they
// know. Needs root (to give the file away). Origin: review 4.
func TestTokenFileOfAnotherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "needs root to give a file away (CI runs as root)")
	}
	dir := t.TempDir()
	planted := filepath.Join(dir, "planted")
	if err := os.WriteFile(planted, []byte("attacker-knows-this-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(planted, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(planted, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{planted, link} {
		tok, _, err := mcpserver.HTTPToken(mcpserver.HTTPAuth{Addr: ":0", TokenFile: p})
		if err == nil || !isConfig(err) {
			t.Errorf("%s: a token file owned by uid 65534 was accepted (token %q), want a config error", filepath.Base(p), tok)
		}
	}
}

// Over stdio there is no token: HTTPToken makes none and gives no note.
// Origin: review 4.
func TestNoTokenWithoutHTTP(t *testing.T) {
	tok, note, err := mcpserver.HTTPToken(mcpserver.HTTPAuth{})
	if err != nil || tok != "" || note != "" {
		t.Errorf("stdio: got token %q, note %q, %v; want none", tok, note, err)
	}
}

// No method, path or header form reaches the handler without the exact
// token. Origin: review 4.
func TestEveryRequestNeedsTheToken(t *testing.T) {
	const token = "0123456789abcdef-token"
	reached := false
	h := mcpserver.RequireToken(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }), token)
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, method := range []string{"GET", "POST", "DELETE", "OPTIONS", "PUT", "HEAD", "PATCH", "TRACE"} {
		for _, path := range []string{"/", "/mcp", "//", "/..%2f", "/?token=" + token, "/*"} {
			for _, auth := range [][]string{nil, {""}, {"Bearer"}, {"Bearer "}, {"Bearer\t" + token}, {"Bearer" + token},
				{"Bearer " + token + "\x00"}, {"Bearer wrong", "Bearer " + token}, {"Token " + token}, {"Bearer " + strings.ToUpper(token)}} {
				req, _ := http.NewRequest(method, srv.URL+path, nil)
				if auth != nil {
					req.Header["Authorization"] = auth
				}
				reached = false
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue // the client refuses to send it
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if reached || resp.StatusCode != 401 {
					t.Errorf("%s %s %q: status %d, reached %v", method, path, auth, resp.StatusCode, reached)
				}
			}
		}
	}
}
