package mcpserver_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/mcpserver"
)

// When ServeHTTP's context ends, the command a running shell call started
// is killed before ServeHTTP returns (serveHTTP's cleanup checks it returns
// within 10 s).
func TestServeHTTPStopEndsCalls(t *testing.T) {
	marker := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000)
	pid := 0
	t.Cleanup(func() { // runs after serveHTTP's: ServeHTTP has returned
		if pid != 0 && testenv.Alive(pid) {
			t.Errorf("the shell call's command (pid %d) outlived ServeHTTP", pid)
		}
	})
	token, _ := mcpserver.NewToken()
	url, _ := serveHTTP(t, config.Settings{Tier: "local", Root: t.TempDir(), Mode: "auto"}, "127.0.0.1:0", token)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(bg, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = cs.CallTool(bg, &mcp.CallToolParams{Name: "shell", Arguments: map[string]any{"command": "sleep " + marker, "timeout": 600}})
	}()
	for deadline := time.Now().Add(10 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		pid = testenv.FindProcess(marker)
	}
	if pid == 0 {
		t.Fatal("the shell call's command never started")
	}
}
