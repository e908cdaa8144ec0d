package mcpserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/mcpserver"
	"github.com/hutchsandbox/hutch/sandbox"
)

// countingSandbox counts Supports calls: tool.New (so mcpserver.New)
// makes one per toolset it builds.
type countingSandbox struct {
	sandbox.Sandbox
	n *atomic.Int64
}

func (c countingSandbox) Supports(cp sandbox.Capability) bool {
	c.n.Add(1)
	return c.Sandbox.Supports(cp)
}

// Found by review 15a (performance; fixed): Handler's getServer callback builds a whole new
// server and toolset (mcpserver.New) every time the SDK calls it, and
// the SDK's StreamableHTTPHandler.ServeHTTP calls it on every request
// (for the protocol-version check), not only for a new session. Every
// tools/call, ping, GET and DELETE of an existing session therefore
// builds and throws away a server: measured here 570 µs of a 960 µs ping
// round trip. With the session cap being added to Handler (open.add in
// getServer), each of those throwaway servers is also kept in
// open.servers until the next new session prunes it: 2000 pings in one
// session kept about 11.8 MB. Right behaviour: build once per session (for example build
// a server in getServer only for a POST without Mcp-Session-Id, and
// return a cached template server otherwise).
func TestReview15aNoServerPerRequest(t *testing.T) {
	cfg, closeAll, err := mcpserver.Open(bg, mcpserver.Settings{Tier: "local", Root: t.TempDir(), Mode: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	var n atomic.Int64
	cfg.Tools.Sandbox = countingSandbox{cfg.Tools.Sandbox, &n}
	h, err := mcpserver.Handler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(bg, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	before := n.Load()
	for range 20 {
		if err := cs.Ping(bg, nil); err != nil {
			t.Fatal(err)
		}
	}
	if d := n.Load() - before; d > 0 {
		t.Errorf("20 pings in one session built %d toolsets; want none after the session began", d)
	}
}

// Found by review 15a (fixed): a client that declared elicitation for URL mode only (the
// MCP 2025-11-25 capability {"elicitation":{"url":{}}}) cannot answer
// hutch's form question. Asker only checks that Elicitation is non-nil,
// so the call goes on to ask, the SDK refuses ("client does not support
// \"form\" elicitation") and the agent gets a JSON-RPC error instead of
// the denial result the README promises ("A client without elicitation
// gets a denial saying so"); the audit log then holds an "asking" line
// and no decision. The same protocol error (and unclosed audit) follows
// any elicitation the client answers with an error. Right behaviour:
// in Asker, treat Elicitation.Form == nil && Elicitation.URL != nil as
// "cannot ask" (the SDK's own rule), and turn a failed elicitation into
// a denial result.
func TestReview15aURLOnlyElicitationIsDenied(t *testing.T) {
	dir := t.TempDir()
	token, _ := mcpserver.NewToken()
	url, _ := serveHTTP(t, mcpserver.Settings{Tier: "local", Root: dir, Mode: "ask"}, "127.0.0.1:0", token)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
	})
	cs, err := client.Connect(bg, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "shell", Arguments: map[string]any{"command": "touch ran"}})
	if err != nil {
		t.Fatalf("want a denial result, got a protocol error: %v", err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !res.IsError || !strings.Contains(text, "cannot ask") {
		t.Errorf("want a denial saying the client cannot ask, got %v %q", res.IsError, text)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the command ran")
	}
}
