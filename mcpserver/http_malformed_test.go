package mcpserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/mcpserver"
)

// Over HTTP a malformed POST body gets 400 with the reason (the SDK's
// check), and the session it was sent in goes on.
func TestHTTPMalformedBody(t *testing.T) {
	token, _ := mcpserver.NewToken()
	url, _ := serveHTTP(t, config.Settings{Tier: "virtual"}, "127.0.0.1:0", token)
	post := func(session, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, _ := post("", initMsg)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %s", resp.Status)
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":2,"method":`, `{garbage`, `{"foo":1}`, `[]`, `123`, `"hello"`,
		`{"jsonrpc":"1.0","id":2,"method":"ping"}`, `{"jsonrpc":"2.0","id":{},"method":"ping"}`,
	} {
		if resp, text := post(session, body); resp.StatusCode != http.StatusBadRequest || strings.TrimSpace(text) == "" {
			t.Errorf("%s: %s %q, want 400 with the reason", body, resp.Status, text)
		}
		if resp, text := post(session, `{"jsonrpc":"2.0","id":3,"method":"ping"}`); resp.StatusCode != http.StatusOK || !strings.Contains(text, `"id":3,"result":{}`) {
			t.Fatalf("ping after %s: %s %q", body, resp.Status, text)
		}
	}
}
