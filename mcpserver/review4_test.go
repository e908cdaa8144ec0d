package mcpserver_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/mcpserver"
)

// TestReview4TokenFileOfAnotherUser: a token file that another user owns
// is that user's to read and rewrite whatever its mode, so "neither group
// nor others can read or write" does not hold. A user who can create the
// path first (a shared directory such as /tmp, or a symbolic link to a
// file of theirs) plants a token they know, and hutch serves every tool
// to them. Needs root (to give the file away).
func TestReview4TokenFileOfAnotherUser(t *testing.T) {
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
		tok, _, err := mcpserver.HTTPToken(mcpserver.Settings{HTTP: ":0", HTTPTokenFile: p})
		if err == nil || !isConfig(err) {
			t.Errorf("%s: a token file owned by uid 65534 was accepted (token %q), want a config error", filepath.Base(p), tok)
		}
	}
}

// TestReview4NoTokenWithoutHTTP: over stdio there is no token, yet
// HTTPToken makes one and its note ("clients send the header
// Authorization: Bearer ...") is printed by `hutch mcp` on every stdio
// start.
func TestReview4NoTokenWithoutHTTP(t *testing.T) {
	tok, note, err := mcpserver.HTTPToken(mcpserver.Settings{Tier: "virtual"})
	if err != nil || tok != "" || note != "" {
		t.Errorf("stdio: got token %q, note %q, %v; want none", tok, note, err)
	}
}

// TestReview4EveryRequestNeedsTheToken (an attack that holds): no method,
// path or header form reaches the handler without the exact token.
func TestReview4EveryRequestNeedsTheToken(t *testing.T) {
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
