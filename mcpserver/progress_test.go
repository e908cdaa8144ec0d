package mcpserver_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/mcpserver"
)

// A call whose request carries a progressToken gets notifications/progress
// with that token while it runs: when the tool reports (a shell's output),
// at most one per gap, and at least one per interval when it reports
// nothing; progress rises with each and each has a message. A call without
// a token gets none, and none follows a call's response.
func TestProgressNotifications(t *testing.T) {
	mcpserver.SetProgressTimes(t, 300*time.Millisecond, 100*time.Millisecond)
	cases := []struct {
		name    string
		token   any
		command string
		min     int // notifications at least
		max     int
	}{
		{"output as it comes", "tok-1", "for i in $(seq 1 20); do echo line $i; sleep 0.05; done", 4, 14},
		{"a silent command, by the interval", 42, "sleep 1.5", 3, 7},
		{"no token, no notifications", nil, "for i in 1 2 3 4 5; do echo $i; sleep 0.1; done; sleep 0.7", 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []*mcp.ProgressNotificationParams
			s, _ := shellSettings(t)
			cs := connect(t, s, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				got = append(got, r.Params)
				mu.Unlock()
			}})
			p := &mcp.CallToolParams{Name: "shell", Arguments: map[string]any{"command": c.command}}
			if c.token != nil {
				p.SetProgressToken(c.token)
			}
			res, err := cs.CallTool(bg, p)
			if err != nil || res.IsError {
				t.Fatalf("call: %v %v", err, res)
			}
			mu.Lock()
			n := len(got)
			mu.Unlock()
			time.Sleep(700 * time.Millisecond) // nothing may follow the response
			mu.Lock()
			defer mu.Unlock()
			if len(got) != n {
				t.Errorf("%d notifications after the response", len(got)-n)
			}
			if n < c.min || n > c.max {
				t.Errorf("%d notifications, want %d to %d", n, c.min, c.max)
			}
			for i, g := range got {
				want := c.token
				if f, ok := want.(int); ok {
					want = float64(f)
				}
				if g.ProgressToken != want {
					t.Errorf("notification %d: token %v, want %v", i, g.ProgressToken, want)
				}
				if g.Progress != float64(i+1) || strings.TrimSpace(g.Message) == "" {
					t.Errorf("notification %d: progress %v, message %q", i, g.Progress, g.Message)
				}
			}
			if c.name == "output as it comes" && n > 0 && !strings.Contains(got[n-1].Message, "bytes of output") {
				t.Errorf("last message %q does not say how much output there is", got[n-1].Message)
			}
		})
	}
}
