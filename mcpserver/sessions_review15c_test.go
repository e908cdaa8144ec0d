package mcpserver_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/mcpserver"
)

// Review 15c: over --http every initialize made a session (a server and a
// toolset) that was kept until the client deleted it: the SDK's
// SessionTimeout was left at zero ("idle sessions are never closed") and
// nothing capped their number. A client holding the token grew the server
// without bound: 5000 and 10000 initialize requests left "hutch mcp
// --http" at 246 MB and 471 MB RSS, kept after they stopped. Sessions now
// close after SessionIdle without a request, and at most MaxSessions are
// open: the next is refused with a line saying why, until one ends.
func TestReview15cHTTPSessionsAreCapped(t *testing.T) {
	cfg, closeAll, err := mcpserver.Open(bg, mcpserver.Settings{Tier: "local", Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeAll)
	h, err := mcpserver.Handler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	do := func(method, session string) (int, string, string) {
		code, id, body, err := rawHTTP(srv, method, session)
		if err != nil {
			t.Fatal(err)
		}
		return code, id, body
	}
	var first string
	for i := range mcpserver.MaxSessions {
		code, id, body := do("POST", "")
		if code != 200 || id == "" {
			t.Fatalf("initialize %d of %d: %d %.200s", i+1, mcpserver.MaxSessions, code, body)
		}
		if i == 0 {
			first = id
		}
	}
	code, _, body := do("POST", "")
	want := fmt.Sprintf("%d MCP sessions are open", mcpserver.MaxSessions)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, want) || strings.Count(strings.TrimSpace(body), "\n") != 0 {
		t.Fatalf("initialize beyond the cap: %d %q; want 503 and one line with %q", code, body, want)
	}
	if code, _, body := do("DELETE", first); code/100 != 2 {
		t.Fatalf("DELETE a session: %d %.200s", code, body)
	}
	if code, id, body := do("POST", ""); code != 200 || id == "" {
		t.Fatalf("initialize after one session ended: %d %.200s", code, body)
	}
}

// rawHTTP sends one bare request to an MCP HTTP endpoint: a POST of
// initMsg without a session (a new one), or method for session. It
// returns the status, the Mcp-Session-Id header and the body; safe in any
// goroutine (it reports, never fails the test).
func rawHTTP(srv *httptest.Server, method, session string) (int, string, string, error) {
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader(initMsg)
	}
	req, err := http.NewRequest(method, srv.URL, body)
	if err != nil {
		return 0, "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b), err
}
