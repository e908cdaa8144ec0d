package mcpserver_test

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/mcpserver"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

// A session's background processes end with the session: a client that
// ends its HTTP session (DELETE) leaves nothing running.
func TestBackgroundProcessesEndWithHTTPSession(t *testing.T) {
	s, _ := shellSettings(t)
	h, err := mcpserver.Handler(mcpserver.OpenForTest(t, s))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(bg, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("1000.%09d", time.Now().UnixNano()%1_000_000_000)
	res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "shell", Arguments: map[string]any{"command": "sleep " + marker + " & sleep " + marker, "background": true}})
	if err != nil || res.IsError {
		t.Fatalf("background start: %+v, %v", res, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(sandboxtest.Processes(marker)) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(sandboxtest.Processes(marker)); n < 2 {
		t.Fatalf("%d processes running, want the shell's two sleeps", n)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if left := sandboxtest.Survivors(marker, 10*time.Second); len(left) > 0 {
		t.Errorf("left running after the session ended: %v", left)
	}
}
