package sysprog

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/policy"
)

// A one-shot built while the walk of /proc still runs hides the last
// walk's list, and its command runs only once this walk has listed the
// same entries: a guess that lacks an entry, or holds one too many, is
// thrown away with its PID 1, and the command runs under the walk's own
// list; a walk that fails fails the run.
func TestOneShotCommandWaitsForTheWalkItsRootGuessed(t *testing.T) {
	if os.Getuid() != 0 {
		testenv.Missing(t, "root (only root's sandboxes hide root-only /proc entries)")
	}
	real, err := hostOnlyEntries(false, procWalkers)
	if err != nil {
		t.Fatal(err)
	}
	// A root-only regular file of this kernel's, whose mask
	// /proc/self/mountinfo lists when it is hidden.
	target := ""
	for _, p := range real {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && !slices.Contains(procHidden, strings.TrimPrefix(p, "/proc/")) {
			target = p
			break
		}
	}
	if target == "" {
		t.Fatalf("no root-only regular file among %q", real)
	}
	without := slices.DeleteFunc(slices.Clone(real), func(p string) bool { return p == target })
	t.Cleanup(func() { setLastWalk(false, real) })
	for _, c := range []struct {
		name    string
		guess   []string
		walkErr error
		wantErr bool
	}{
		{"the same list", real, nil, false},
		{"an entry missing", without, nil, false},
		{"an entry too many", append(slices.Clone(real), "/proc/hutch-no-such-entry"), nil, false},
		{"a walk that fails", real, errors.New("the walk broke"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			setLastWalk(false, c.guess)
			// A walk still running when RunOnce builds the root: it ends a
			// moment later, with the kernel's list (or the failure).
			w := &ProcWalk{done: make(chan struct{})}
			time.AfterFunc(200*time.Millisecond, func() {
				w.out, w.err = real, c.walkErr
				close(w.done)
			})
			before := guessedRuns.Load()
			out, st, err := runOneShot(t, w, `grep -c " `+target+` " /proc/self/mountinfo`)
			if guessedRuns.Load() == before {
				t.Fatal("the root was not built from the guess")
			}
			if c.wantErr {
				if err == nil || !strings.Contains(err.Error(), "the walk broke") {
					t.Fatalf("a failed walk: %v (exit %d, %q)", err, st.ExitCode, out)
				}
				return
			}
			if err != nil || st.ExitCode != 0 || strings.TrimSpace(out) != "1" {
				t.Fatalf("%s is masked %q times in the sandbox (exit %d, %v); want once", target, out, st.ExitCode, err)
			}
		})
	}
}

// runOneShot runs sh -c script in a one-shot sandbox of the default policy
// whose root takes its hidden /proc entries from w.
func runOneShot(t *testing.T, w *ProcWalk, script string) (string, wire.Status, error) {
	t.Helper()
	dir := t.TempDir()
	pol, err := policy.Default().Extend(policy.Policy{Dir: dir, Read: []string{dir}}).Normalize(dir)
	if err != nil {
		t.Fatal(err)
	}
	job := wire.Job{Policy: pol, Dir: dir, HostUID: os.Getuid(), HostGID: os.Getgid(),
		Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(outR); done <- b }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	exited, once := exitedOnce(t)
	st, _, err := RunOnce(ctx, job, null, outW, outW, OneShot{Proc: w, Timeout: 15 * time.Second, Exited: exited})
	outW.Close()
	once()
	return string(<-done), st, err
}

// exitedOnce returns an OneShot.Exited, and a check that fails the test
// unless it was called exactly once within 10 s.
func exitedOnce(t *testing.T) (exited func(), check func()) {
	calls := make(chan struct{}, 2)
	return func() { calls <- struct{}{} }, func() {
		t.Helper()
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("Exited was not called within 10 s")
		}
		select {
		case <-calls:
			t.Fatal("Exited was called twice")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// RunOnce calls Exited exactly once however the run ends: a command that
// exits, one killed by the timeout, one whose ctx is cancelled, and a
// sandbox never started.
func TestOneShotExitedOnceWhateverTheEnd(t *testing.T) {
	dir := t.TempDir()
	pol, err := policy.Default().Extend(policy.Policy{Dir: dir, Read: []string{dir}}).Normalize(dir)
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for _, c := range []struct {
		name    string
		argv    []string
		timeout time.Duration
		cancel  time.Duration // cancel ctx this long after the start
		wantErr bool
	}{
		{"exit 3", []string{"/bin/sh", "-c", "exit 3"}, 0, 0, false},
		{"killed by the timeout", []string{"/bin/sleep", "30"}, 300 * time.Millisecond, 0, false},
		{"ctx cancelled", []string{"/bin/sleep", "30"}, 0, 300 * time.Millisecond, true},
		{"never started", nil, 0, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := wire.Job{Policy: pol, Dir: dir, HostUID: os.Getuid(), HostGID: os.Getgid(), Argv: c.argv, Env: []string{"PATH=/usr/bin:/bin"}}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if c.cancel > 0 {
				time.AfterFunc(c.cancel, cancel)
			}
			exited, once := exitedOnce(t)
			_, _, err := RunOnce(ctx, job, null, null, null, OneShot{Timeout: c.timeout, Exited: exited})
			if (err != nil) != c.wantErr {
				t.Fatalf("RunOnce: %v", err)
			}
			once()
		})
	}
}
