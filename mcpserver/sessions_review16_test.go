package mcpserver_test

import (
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hutchsandbox/hutch/mcpserver"
)

// Review 16: Handler checks open.count() < MaxSessions and then adds the
// new session's server, but the check and the add are not one step, and
// the session only appears in the server (what count looks at) once the
// SDK has connected it; count also forgets every server that has no
// session yet. Initializations that arrive together all pass the check:
// with 32 clients initializing at once, 257 to 287 sessions end up open
// (none ended) although MaxSessions is 256. Each attempt below uses a
// fresh Handler; a race shows in almost every attempt on a 2-CPU host.
func TestReview16ConcurrentInitializeBreaksSessionCap(t *testing.T) {
	cfg, closeAll, err := mcpserver.Open(bg, mcpserver.Settings{Tier: "virtual"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeAll)
	attempt := func() int64 {
		h, err := mcpserver.Handler(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h) // 127.0.0.1
		defer srv.Close()
		initialize := func() (int, string) {
			code, id, _, err := rawHTTP(srv, "POST", "")
			if err != nil {
				t.Error(err)
			}
			return code, id
		}
		var opened atomic.Int64
		var wg sync.WaitGroup
		next := make(chan struct{})
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range next {
					if code, id := initialize(); code == 200 && id != "" {
						opened.Add(1)
					}
				}
			}()
		}
		for range 2 * mcpserver.MaxSessions {
			next <- struct{}{}
		}
		close(next)
		wg.Wait()
		// Then one at a time until refused: each success past the cap is
		// a session the count missed.
		for range mcpserver.MaxSessions {
			if code, id := initialize(); code != 200 || id == "" {
				break
			}
			opened.Add(1)
		}
		return opened.Load()
	}
	for range 5 {
		if n := attempt(); n > mcpserver.MaxSessions {
			t.Fatalf("%d sessions open (none ended), cap %d", n, mcpserver.MaxSessions)
		}
	}
}
