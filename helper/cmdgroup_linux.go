package helper

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// The commands' control group holds the policy's process limit, so that
// hutch's own processes and threads (a session's Go helpers) never count
// against it, and commands never run outside it (Job.CmdGroup). A helper
// starts a command by moving its forking thread into the group (its
// tasks file on cgroup v1, cgroup.threads in v2's threaded groups),
// forking, which has the command born there, and moving the thread back
// (once the command has exec'd: Go's ForkExec returns no sooner, so for
// that moment the thread is one of the limit's processes, and a command
// forking at once may get one fewer; never more).
// (clone3's CLONE_INTO_CGROUP would do without the moves, but the
// helpers' seccomp filter refuses clone3, whose flags it cannot see.)

// CmdGroupFD and HomeGroupFD are where a session's helpers hold the
// group's files: the commands' group's thread file, and hutch's.
const (
	CmdGroupFD  = 5
	HomeGroupFD = 6
)

// CommandGroup holds the host's open files of the commands' group; the
// zero value is no group.
type CommandGroup struct {
	Procs *os.File // the group's cgroup.procs (a one-shot's command writes itself in)
	Enter *os.File // the group's thread file
	Leave *os.File // hutch's group's thread file
}

// Set reports whether there is a group.
func (g CommandGroup) Set() bool { return g.Enter != nil }

// Close closes the files.
func (g CommandGroup) Close() {
	for _, f := range []*os.File{g.Procs, g.Enter, g.Leave} {
		if f != nil {
			f.Close()
		}
	}
}

// ExtraFiles extends a session's init's ExtraFiles (extra, which puts them
// at 3, 4...) with the group's thread files at CmdGroupFD and HomeGroupFD;
// extra as it is without a group.
func (g CommandGroup) ExtraFiles(extra []*os.File) []*os.File {
	if !g.Set() {
		return extra
	}
	return placeGroupFiles(extra, g.Enter, g.Leave)
}

// placeGroupFiles appends enter and leave to extra at CmdGroupFD and
// HomeGroupFD, closing the descriptors before them that extra leaves out.
func placeGroupFiles(extra []*os.File, enter, leave *os.File) []*os.File {
	for len(extra) < CmdGroupFD-3 {
		extra = append(extra, nil) // nil: closed in the child
	}
	return append(extra, enter, leave)
}

// inheritedGroup are this helper's own CmdGroupFD and HomeGroupFD, as
// files made once (a file collected by the GC would close its descriptor).
var inheritedGroup = sync.OnceValue(func() [2]*os.File {
	return [2]*os.File{os.NewFile(CmdGroupFD, "hutch-cmd-group"), os.NewFile(HomeGroupFD, "hutch-home-group")}
})

// groupExtraFiles hands a child helper (runner, exec helper) this helper's
// group files, when the job has a command group (see CommandGroup.ExtraFiles).
func groupExtraFiles(job Job, extra []*os.File) []*os.File {
	if !job.CmdGroup {
		return extra
	}
	g := inheritedGroup()
	return placeGroupFiles(extra, g[0], g[1])
}

// intoCommandGroup returns enter and leave, which move the calling
// thread (locked to its goroutine) into the commands' group for the fork
// and back; both do nothing without a command group. A failed leave is
// harmless: the thread then counts as one of the command's processes.
func intoCommandGroup(job Job) (enter func() error, leave func()) {
	if !job.CmdGroup {
		return func() error { return nil }, func() {}
	}
	enter = func() error {
		if _, err := unix.Write(CmdGroupFD, zero[:]); err != nil {
			return fmt.Errorf("joining the commands' cgroup: %w", err)
		}
		return nil
	}
	return enter, func() { _, _ = unix.Write(HomeGroupFD, zero[:]) }
}
