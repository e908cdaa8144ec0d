package boundary

import (
	"fmt"
	"time"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"golang.org/x/sys/unix"
)

// Rlimit is a resource limit a sandbox's processes get: soft Cur, hard
// Max, in Unit; Fix is the shell command that raises this process's hard
// limit.
type Rlimit struct {
	Resource  int
	Cur, Max  uint64
	Name      string
	Unit, Fix string
}

// Rlimits are the policy's limits that rlimits enforce, and no core
// files; a process limit only without a pids cgroup (counted per user
// namespace: only the sandbox's processes).
func Rlimits(l policy.Limits, pidsByCgroup bool) []Rlimit {
	rs := []Rlimit{{unix.RLIMIT_CORE, 0, 0, "core", "", ""}}
	if l.CPUTime > 0 {
		// SIGXCPU at the limit, SIGKILL a second later for programs that
		// catch it.
		secs := uint64(l.CPUTime / time.Second) // rounded up, without overflow
		if l.CPUTime%time.Second != 0 {
			secs++
		}
		rs = append(rs, Rlimit{unix.RLIMIT_CPU, secs, secs + 1, "cpu", " s", "ulimit -Ht"})
	}
	if l.FileSize > 0 {
		rs = append(rs, Rlimit{unix.RLIMIT_FSIZE, uint64(l.FileSize), uint64(l.FileSize), "file size", " bytes", "ulimit -Hf"})
	}
	if l.OpenFiles > 0 {
		rs = append(rs, Rlimit{unix.RLIMIT_NOFILE, uint64(l.OpenFiles), uint64(l.OpenFiles), "open files", "", "ulimit -Hn"})
	}
	if l.Processes > 0 && !pidsByCgroup {
		rs = append(rs, Rlimit{unix.RLIMIT_NPROC, uint64(l.Processes), uint64(l.Processes), "processes", "", "ulimit -Hu"})
	}
	return rs
}

// CheckHardLimits refuses, as a configuration error naming the hard limit
// and the fix, a policy limit that needs a hard Rlimit above the one this
// process runs under: no process in a sandbox may raise a hard limit (the
// capability counts only in the host's user namespace), so the sandbox
// could not be built. pidsByCgroup is whether a pids cgroup, not
// RLIMIT_NPROC, bounds processes.
func CheckHardLimits(l policy.Limits, pidsByCgroup bool) error {
	for _, r := range Rlimits(l, pidsByCgroup) {
		var now unix.Rlimit
		if r.Max == 0 || unix.Getrlimit(r.Resource, &now) != nil || r.Max <= now.Max {
			continue
		}
		return fmt.Errorf("%w: the policy's %s limit needs a hard limit of %d%s, above the %d%s hutch runs under: lower it, or raise hutch's hard limit (%s) before starting hutch",
			sandbox.ErrConfig, r.Name, r.Max, r.Unit, now.Max, r.Unit, r.Fix)
	}
	return nil
}
