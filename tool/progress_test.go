package tool_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/tool"
)

// The shell reports its output as progress while it runs, to the
// ProgressFunc of the call's context, and the count only grows.
func TestShellReportsProgressAsOutputArrives(t *testing.T) {
	sb, _ := localSB(t)
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	var mu sync.Mutex
	var reports []string
	ctx := tool.WithProgress(bg, func(msg string) {
		mu.Lock()
		reports = append(reports, msg)
		mu.Unlock()
	})
	raw, _ := json.Marshal(map[string]any{"command": "for i in 1 2 3; do echo line$i; sleep 0.1; done"})
	out, err := ts.Call(ctx, "shell", raw)
	if err != nil || out.IsError {
		t.Fatalf("shell: %+v, %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) < 3 || !strings.Contains(reports[len(reports)-1], "18 bytes of output") {
		t.Errorf("progress reports %q: want one per line, the last counting all 18 bytes", reports)
	}
	// Without a ProgressFunc nothing is reported, and the call works.
	if out := call(t, ts, "shell", map[string]any{"command": "echo quiet"}); out.IsError {
		t.Errorf("shell without progress: %+v", out)
	}
}
