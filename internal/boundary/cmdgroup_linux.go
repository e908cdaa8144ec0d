package boundary

import "os"

// The commands' control group holds the policy's process limit, so that
// hutch's own processes and threads (a session's Go helpers) never count
// against it, and commands never run outside it (Job.CmdGroup). A helper
// starts a command with spawn, whose child writes itself into the group
// (its tasks file on cgroup v1, cgroup.threads in v2's threaded groups:
// the child has one thread) before execve, so the command is born there
// and no helper thread ever visits it. A move into a group is not checked
// against its pids.max (only a fork is), so the child then reads the
// group's pids.current and does not run when that is over the limit: a
// command never starts in a group its running ones already fill. (Two
// commands joining at the same instant may both see the other and both
// refuse: it fails closed.) clone3's CLONE_INTO_CGROUP would do all this
// in one step, but the helpers' seccomp filter refuses clone3, whose
// flags it cannot see.

// CmdGroupFD and CountFD are where a session's helpers hold the commands'
// group's thread file and its pids.current.
const (
	CmdGroupFD = 5
	CountFD    = 6
)

// ExecStderrFD is where an exec helper holds its command's stderr; its own
// fd 2 goes to the session's init (see newDiagnosis).
const ExecStderrFD = 7

// CommandGroup holds the host's open files of the commands' group; the
// zero value is no group.
type CommandGroup struct {
	Procs   *os.File // the group's cgroup.procs (a one-shot's command writes itself in)
	Threads *os.File // the group's thread file (a session's commands write themselves in)
	Count   *os.File // the group's pids.current, open for reading
}

// Set reports whether there is a group.
func (g CommandGroup) Set() bool { return g.Threads != nil }

// Close closes the files.
func (g CommandGroup) Close() {
	for _, f := range []*os.File{g.Procs, g.Threads, g.Count} {
		if f != nil {
			f.Close()
		}
	}
}

// ExtraFiles extends a session's init's ExtraFiles (extra, which puts them
// at 3, 4...) with the group's thread file at CmdGroupFD and its count at
// CountFD; extra as it is without a group.
func (g CommandGroup) ExtraFiles(extra []*os.File) []*os.File {
	if !g.Set() {
		return extra
	}
	return PlaceGroupFiles(extra, g.Threads, g.Count)
}

// PlaceGroupFiles appends threads and count to extra at CmdGroupFD and
// CountFD, closing the descriptors before them that extra leaves out.
func PlaceGroupFiles(extra []*os.File, threads, count *os.File) []*os.File {
	return PlaceFile(PlaceFile(extra, CmdGroupFD, threads), CountFD, count)
}

// PlaceFile appends f to extra (ExtraFiles, which start at descriptor 3)
// so that the child has it at fd, closing the descriptors in between
// that extra leaves out. extra must not reach fd already.
func PlaceFile(extra []*os.File, fd int, f *os.File) []*os.File {
	for len(extra) < fd-3 {
		extra = append(extra, nil) // nil: closed in the child
	}
	return append(extra, f)
}
