package isolated

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Drain waits for every teardown running in the background, and gives up
// (with ctx's error) when ctx ends first; with none running it returns
// at once.
func TestDrainWaitsForTheTeardownsInBackground(t *testing.T) {
	if err := Drain(context.Background()); err != nil {
		t.Fatalf("Drain with nothing to wait for: %v", err)
	}
	first, second := make(chan struct{}), make(chan struct{})
	inBackground(func() { <-first })
	inBackground(func() { <-second })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain with two teardowns running: %v, want the deadline", err)
	}
	close(first)
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain with one teardown still running: %v, want the deadline", err)
	}
	close(second)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := Drain(ctx); err != nil {
		t.Fatalf("Drain once both ended: %v", err)
	}
}

// groupsFor is where this host makes the control groups of pol's limits
// (controller -> directory, removed again at once); the test goes no
// further where it makes none.
func groupsFor(t *testing.T, pol policy.Policy) map[string]string {
	t.Helper()
	if os.Getuid() != 0 {
		testenv.Missing(t, "root (control groups for a sandbox's limits)")
	}
	_, _, cg, err := prepare(pol)
	if err != nil {
		t.Fatal(err)
	}
	if cg == nil {
		testenv.Missing(t, "memory or pids control groups for hutch: the policy's limits get none here")
	}
	cg.remove()
	return cg.dirs
}

// Run returns once the command has ended; its sandbox's control groups
// go when the sandbox's PID 1 has exited, after that. Once Drain
// returns, none of them is left.
func TestRunLeavesNoGroupOnceDrained(t *testing.T) {
	pol := policy.Default()
	var parents []string
	for _, dir := range groupsFor(t, pol) {
		parents = append(parents, filepath.Dir(dir))
	}
	prefix := groupName()
	prefix = prefix[:strings.LastIndexByte(prefix, '-')+1] // this process's groups
	ours := func() map[string]bool {
		m := map[string]bool{}
		for _, p := range parents {
			ents, err := os.ReadDir(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
					m[filepath.Join(p, e.Name())] = true
				}
			}
		}
		return m
	}
	before := ours()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 3 {
		res, err := Run(ctx, pol, sandbox.Command{Args: []string{"/bin/true"}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %v (exit %d)", err, res.ExitCode)
		}
	}
	if err := Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	for dir := range ours() {
		if !before[dir] {
			t.Errorf("%s is left once Drain returned", dir)
		}
	}
}
