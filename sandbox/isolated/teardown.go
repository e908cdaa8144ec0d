package isolated

import (
	"context"
	"sync"
)

// The end of a one-shot's teardown runs after Run has returned: the
// sandbox's PID 1 exits once its namespace is empty, and its control
// groups can go only then. The command has ended, and everything it
// started is killed, before Run returns; the rest need not hold the
// caller up. Drain waits for it.

// teardowns counts the teardowns still running in the background.
var teardowns struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

// inBackground runs f, the end of a sandbox's teardown, on a goroutine
// of its own, counted until it returns.
func inBackground(f func()) {
	teardowns.mu.Lock()
	if teardowns.n == 0 {
		teardowns.idle = make(chan struct{})
	}
	teardowns.n++
	teardowns.mu.Unlock()
	go func() {
		defer func() {
			teardowns.mu.Lock()
			if teardowns.n--; teardowns.n == 0 {
				close(teardowns.idle)
			}
			teardowns.mu.Unlock()
		}()
		f()
	}()
}

// Drain waits until no sandbox that Run returned from is still being
// torn down: every such sandbox's PID 1 (or init) has exited and its
// control groups are removed. Then it removes the groups made ahead for
// a next one-shot (see spare.go). A program about to exit calls it after
// its last Run, so that no empty group is left behind (a later sandbox
// made below the same group would remove it, as it does a killed
// hutch's). It returns ctx's error if ctx ends first; the teardowns then
// go on. Sessions (New) are torn down by Close, which Drain does not
// wait for.
func Drain(ctx context.Context) error {
	if err := waitTeardowns(ctx); err != nil {
		return err
	}
	removeSpare()
	return nil
}

// waitTeardowns is Drain's wait.
func waitTeardowns(ctx context.Context) error {
	teardowns.mu.Lock()
	if teardowns.n == 0 {
		teardowns.mu.Unlock()
		return nil
	}
	idle := teardowns.idle
	teardowns.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
