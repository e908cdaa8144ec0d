package isolated

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// An init that stops answering (stopped here from the host; nothing in the
// sandbox can reach it) costs the caller the timeout and a grace, then the
// session is closed — never a wait without end.
func TestHostGuardOnSilentInit(t *testing.T) {
	if err := Supported(); err != nil {
		testenv.Missing(t, "the isolated tier: %v", err)
	}
	defer func(g time.Duration) { hostGrace = g }(hostGrace)
	hostGrace = 300 * time.Millisecond
	sb, err := New(context.Background(), Options{Policy: policy.Default()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := unix.Kill(sb.init.Process.Pid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = sb.Exec(context.Background(), sandbox.Command{Args: []string{"sleep", "30"}, Timeout: 200 * time.Millisecond})
	if !errors.Is(err, sandbox.ErrClosed) || time.Since(start) > 5*time.Second {
		t.Errorf("after %v: %v, want ErrClosed soon after timeout+grace", time.Since(start), err)
	}
	if _, err := sb.Read(context.Background(), "x"); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("the session lives on: %v", err)
	}
}
