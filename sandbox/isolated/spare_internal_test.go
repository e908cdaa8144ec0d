package isolated

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// From its second one-shot on, a process makes the next one's groups
// ahead, once a run's teardown is done; the next one-shot with the same
// limits takes them, one with other limits does not, and Drain removes
// them.
func TestOneShotsAfterTheFirstTakeGroupsMadeAhead(t *testing.T) {
	pol := policy.Default()
	groupsFor(t, pol)
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

// Groups made ahead below a group hutch is no longer in (it was moved
// since) are never taken: they would not be bound by the host's limits
// for hutch. They are removed, and new groups made.
func TestGroupsMadeAheadBelowAnotherGroupAreNotTaken(t *testing.T) {
	pol := policy.Default()
	dirs := groupsFor(t, pol)
	elsewhere := &cgroup{dirs: map[string]string{}}
	for ctrl := range dirs {
		// A plain directory stands for the old parent's group.
		dir := filepath.Join(t.TempDir(), "hutch-moved")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		elsewhere.dirs[ctrl] = dir
	}
	if elsewhere.belowOwn() {
		t.Fatalf("%v counts as below this process's groups", elsewhere.dirs)
	}
	l := pol.Limits.Enforced()
	spares.mu.Lock()
	saved, savedKey := spares.group, spares.key
	spares.group, spares.key = elsewhere, keyOf(l)
	spares.mu.Unlock()
	t.Cleanup(func() {
		spares.mu.Lock()
		spares.group, spares.key = saved, savedKey
		spares.mu.Unlock()
	})
	cg, err := takeCgroup(l)
	if err != nil || cg == nil {
		t.Fatalf("takeCgroup: %v, %v", cg, err)
	}
	defer cg.remove()
	if cg == elsewhere {
		t.Fatal("groups below another group were taken")
	}
	if !cg.belowOwn() {
		t.Fatalf("the new groups %v are not below this process's", cg.dirs)
	}
	for _, dir := range elsewhere.dirs {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%s was not removed", dir)
		}
	}
}
