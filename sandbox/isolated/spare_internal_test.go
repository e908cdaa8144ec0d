package isolated

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// From its second one-shot on, a process makes the next one's groups
// ahead, once a run's teardown is done; the next one-shot with the same
// limits takes them, one with other limits does not, and Drain removes
// them.
func TestOneShotsAfterTheFirstTakeGroupsMadeAhead(t *testing.T) {
	if os.Getuid() != 0 {
		testenv.Missing(t, "root (control groups for a sandbox's limits)")
	}
	pol := policy.Default()
	if _, _, cg, err := prepare(pol); err != nil || cg == nil {
		if err != nil {
			t.Fatal(err)
		}
		testenv.Missing(t, "memory or pids control groups for hutch: the policy's limits get none here")
	} else {
		cg.remove()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := Drain(ctx); err != nil {
		t.Fatal(err)
	}
	spares.mu.Lock()
	spares.oneShots = 0
	spares.mu.Unlock()
	run := func(p policy.Policy) {
		t.Helper()
		res, err := Run(ctx, p, sandbox.Command{Args: []string{"/bin/true"}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %v (exit %d)", err, res.ExitCode)
		}
		if err := waitTeardowns(ctx); err != nil {
			t.Fatal(err)
		}
	}
	spare := func() *cgroup {
		spares.mu.Lock()
		defer spares.mu.Unlock()
		return spares.group
	}
	exists := func(cg *cgroup) bool {
		for _, dir := range cg.dirs {
			if _, err := os.Stat(dir); err != nil {
				return false
			}
		}
		return true
	}

	run(pol)
	if spare() != nil {
		t.Fatal("groups were made ahead after a process's first one-shot")
	}
	run(pol)
	first := spare()
	if first == nil || !exists(first) {
		t.Fatalf("no groups made ahead after the second one-shot: %v", first)
	}
	run(pol)
	if exists(first) {
		t.Fatalf("the third one-shot did not take the groups made ahead (%v are still there)", first.dirs)
	}
	second := spare()
	if second == nil || second == first || !exists(second) {
		t.Fatalf("no new groups made ahead after the third one-shot: %v", second)
	}
	other := pol
	other.Limits.Memory = pol.Limits.Memory / 2
	run(other)
	if !exists(second) {
		t.Fatal("a one-shot with another memory limit took the groups made for the policy's")
	}
	if err := Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if spare() != nil || exists(second) {
		t.Fatalf("Drain left the groups made ahead: %v", second.dirs)
	}
}
