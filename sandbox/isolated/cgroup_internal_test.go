package isolated

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// sweepGroups removes exactly the groups of groupName's form whose
// creator (in this PID namespace) is gone, and only while they are empty;
// a plain directory stands for the cgroup parent here.
func TestSweepRemovesOnlyTheEmptyGroupsOfGoneCreators(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	self := selfOwner()
	if self.ns == 0 || self.start == 0 {
		t.Skip("this process's PID namespace or start time cannot be read")
	}
	name := func(o groupOwner) string { return fmt.Sprintf("hutch-%d-%d-%d-0123456789ab", o.ns, o.pid, o.start) }
	gone := name(groupOwner{self.ns, uint64(dead.Process.Pid), 12345})
	reused := name(groupOwner{self.ns, self.pid, self.start + 1}) // this PID, another process's start
	busy := name(groupOwner{self.ns, uint64(dead.Process.Pid), 777})
	keep := []string{
		groupName(), // this process's own
		name(groupOwner{self.ns + 1, uint64(dead.Process.Pid), 12345}), // another PID namespace
		"hutch-0123456789ab", // an older hutch's: no creator named
		gone + "0",           // not the exact form
		"other-" + gone[len("hutch-"):],
		busy, // holds something (for a group: a process)
	}
	parent := t.TempDir()
	for _, n := range append([]string{gone, reused}, keep...) {
		if err := os.MkdirAll(filepath.Join(parent, n, cmdGroup), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(parent, busy, "cgroup.procs"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sweepGroups(parent)
	for _, n := range []string{gone, reused} {
		if _, err := os.Stat(filepath.Join(parent, n)); err == nil {
			t.Errorf("%s (creator gone) was not removed", n)
		}
	}
	for _, n := range keep {
		if _, err := os.Stat(filepath.Join(parent, n)); err != nil {
			t.Errorf("%s was removed: %v", n, err)
		}
	}
}
