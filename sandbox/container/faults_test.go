package container_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
)

// slack is what a loaded 2-core machine may add to a bound, on top of
// the grace the package promises.
const slack = 5 * time.Second

// A container paused behind hutch's back holds no call past its own
// deadline plus StopGrace (ExecGrace for a command): a command's timeout (the call then says it
// could not confirm the command stopped, never that it killed it), a
// read with a deadline, and a read without one (FileTimeout); once the
// container runs again the command is stopped. On docker and podman,
// through the helper and through the runtime's exec.
func TestPausedContainerHoldsNoCallPastItsDeadline(t *testing.T) {
	cases := []struct {
		name string
		rt   container.Runtime
		o    container.Options
	}{
		{"docker helper", container.Docker, container.Options{}},
		{"docker exec", container.Docker, container.Options{NoHelper: true}},
		{"podman helper", container.Podman, container.Options{Runtime: container.Podman}},
		{"podman exec", container.Podman, container.Options{Runtime: container.Podman, NoHelper: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.rt == container.Podman {
				needPodman(t)
			}
			sb := newSB(t, tc.o)
			if err := sb.Write(bg, "f.txt", []byte("x")); err != nil {
				t.Fatal(err)
			}
			prog := tc.rt.Program()
			type done struct {
				err   error
				took  time.Duration
				timed bool
			}
			begin := time.Now()
			execDone := make(chan done, 1)
			go func() {
				r, err := sb.Exec(bg, sandbox.Command{Shell: "sleep 1234; echo done", Timeout: 3 * time.Second})
				execDone <- done{err, time.Since(begin), r.TimedOut}
			}()
			time.Sleep(time.Second)
			if out, err := exec.Command(prog, "pause", sb.ID()).CombinedOutput(); err != nil {
				t.Fatalf("pause: %v %s", err, out)
			}
			unpaused := false
			unpause := func() {
				if !unpaused {
					unpaused = true
					_ = exec.Command(prog, "unpause", sb.ID()).Run()
				}
			}
			defer unpause()
			read := func(ctx context.Context, ch chan done) {
				start := time.Now()
				_, err := sb.Read(ctx, "f.txt")
				ch <- done{err: err, took: time.Since(start)}
			}
			short, none := make(chan done, 1), make(chan done, 1)
			ctx, cancel := context.WithTimeout(bg, 2*time.Second)
			defer cancel()
			go read(ctx, short)
			go read(bg, none)
			wait := func(what string, ch chan done, bound time.Duration) done {
				select {
				case d := <-ch:
					if d.took > bound {
						t.Errorf("%s took %v, over its bound %v", what, d.took, bound)
					}
					return d
				case <-time.After(bound + time.Minute):
					t.Fatalf("%s: no answer %v past its bound %v", what, time.Minute, bound)
				}
				return done{}
			}
			d := wait("the shell call", execDone, 3*time.Second+container.ExecGrace+slack)
			if !errors.Is(d.err, container.ErrNotStopped) || d.timed {
				t.Errorf("shell call on a paused container: timed_out %v, error %v; want ErrNotStopped and no result", d.timed, d.err)
			}
			// The runtime's exec refuses a paused container at once; the
			// helper's stream just does not answer.
			if d := wait("a read with a 2 s deadline", short, 2*time.Second+container.StopGrace+slack); d.err == nil {
				t.Error("a read with a deadline succeeded on a paused container")
			}
			if d := wait("a read without a deadline", none, container.FileTimeout+container.StopGrace+slack); d.err == nil ||
				(errors.Is(d.err, context.DeadlineExceeded) && !strings.Contains(d.err.Error(), "paused")) {
				t.Errorf("read without a deadline: %v", d.err)
			}
			unpause()
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				out, err := exec.Command(prog, "exec", sb.ID(), "ps").CombinedOutput()
				if err == nil && !strings.Contains(string(out), "sleep 1234") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the timed-out command still runs 15 s after the container was unpaused: %v\n%s", err, out)
				}
			}
			if r, err := sb.Exec(bg, sandbox.Command{Shell: "cat f.txt"}); err != nil || string(r.Stdout) != "x" {
				t.Errorf("after unpause: %q %v", r.Stdout, err)
			}
		})
	}
}
