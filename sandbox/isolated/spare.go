package isolated

import (
	"path/filepath"
	"sync"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/policy"
)

// A process that runs one-shot after one-shot (an agent's tool calls, a
// program's loop) makes the next one's control groups ahead: in the
// background, once a run's teardown has removed its own, rather than on
// the next run's path, where making and limiting them takes about
// 0.25 ms. It does so from its second one-shot on, so a process that runs
// one (hutch run) makes none. A spare is made for one memory and process
// limit and taken by the next sandbox with the same ones (a one-shot or a
// session), and only while this process is still in the group it was
// made below, so that it stays within the host's limits for hutch. Drain
// removes it; a process that exits without Drain leaves it, empty, for
// the next sandbox's sweep.

// groupKey is what a sandbox's groups are made for.
type groupKey struct {
	memory    policy.Size
	processes int
}

func keyOf(l policy.Limits) groupKey { return groupKey{l.Memory, l.Processes} }

var spares struct {
	mu       sync.Mutex
	oneShots int     // one-shots started in this process
	group    *cgroup // made ahead; nil when none
	key      groupKey
}

// oneShotStarted counts a one-shot run.
func oneShotStarted() {
	spares.mu.Lock()
	spares.oneShots++
	spares.mu.Unlock()
}

// takeCgroup returns the spare groups made for l (enforced limits) when
// there are, and otherwise makes new ones (newCgroup).
func takeCgroup(l policy.Limits) (*cgroup, error) {
	spares.mu.Lock()
	cg := spares.group
	if cg != nil && spares.key == keyOf(l) {
		spares.group = nil
	} else {
		cg = nil
	}
	spares.mu.Unlock()
	if cg != nil {
		if cg.belowOwn() {
			return cg, nil
		}
		cg.remove()
	}
	return newCgroup(l)
}

// belowOwn reports whether each of cg's groups is right below the group
// this process is in now, for its controller (as ownCgroup names it).
func (cg *cgroup) belowOwn() bool {
	listing, _ := boundary.ReadKernelFile("/proc/self/cgroup")
	for ctrl, dir := range cg.dirs {
		c, root := ctrl, filepath.Join(cgroupRoot, ctrl)
		if cg.v2 {
			c, root = "", cgroupRoot // one hierarchy for both
		}
		own, _ := cgroupIn(listing, c)
		if filepath.Dir(dir) != filepath.Join(root, own) {
			return false
		}
	}
	return true
}

// makeSpare makes the groups of the next one-shot with limits l ahead,
// after this process's second one-shot, unless there are spares already.
func makeSpare(l policy.Limits) {
	spares.mu.Lock()
	wanted := spares.oneShots >= 2 && spares.group == nil
	spares.mu.Unlock()
	if !wanted {
		return
	}
	cg, err := newCgroup(l)
	if err != nil || cg == nil {
		return // the next run makes its own, and says what is wrong
	}
	spares.mu.Lock()
	if spares.group == nil {
		spares.group, spares.key, cg = cg, keyOf(l), nil
	}
	spares.mu.Unlock()
	cg.remove() // another teardown's spare came first
}

// removeSpare removes the groups made ahead, if any.
func removeSpare() {
	spares.mu.Lock()
	cg := spares.group
	spares.group = nil
	spares.mu.Unlock()
	cg.remove()
}
