package mcpserver_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/mcpserver"
)

// A session runs at most MaxCallsInFlight tool calls at once (review 15c:
// 100 concurrent output floods took the server to 2.5 GB); the next waits
// for one to end, then runs.
func TestCallsInFlightAreBounded(t *testing.T) {
	dir := t.TempDir()
	cs := connect(t, config.Settings{Tier: "local", Root: dir, Mode: "auto"}, nil)
	n := mcpserver.MaxCallsInFlight + 1
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := fmt.Sprintf("touch started-%d; while [ ! -e release ]; do sleep 0.02; done", i)
			if _, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "shell", Arguments: map[string]any{"command": cmd, "timeout": 60}}); err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		}()
	}
	started := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, "started-*"))
		return len(m)
	}
	deadline := time.Now().Add(30 * time.Second)
	for started() < mcpserver.MaxCallsInFlight && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // room for a call beyond the bound to start, if it could
	if got := started(); got != mcpserver.MaxCallsInFlight {
		t.Errorf("%d calls running at once, want %d", got, mcpserver.MaxCallsInFlight)
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := started(); got != n {
		t.Errorf("%d of %d calls ran once the first ended", got, n)
	}
}
