package helper

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// GroupByThread is how a sandbox's helpers start commands inside the
// commands' control group, which holds the policy's process limit, so
// that hutch's own processes and threads (a session's Go helpers) never
// count against it and commands never run outside it (Job.CmdGroup): the
// forking thread writes itself into the group (its tasks file on cgroup
// v1, cgroup.threads in v2's threaded groups), forks the command, which
// is born there, and writes itself back. (clone3's CLONE_INTO_CGROUP
// would do without the moves, but the helpers' seccomp filter refuses
// clone3, whose flags it cannot see.)
const GroupByThread = "thread"

// CmdGroupFD and HomeGroupFD are where a session's helpers hold the
// group's files: the commands' group's thread file, and hutch's.
const (
	CmdGroupFD  = 5
	HomeGroupFD = 6
)

// CommandGroup holds the host's open files of the commands' group.
type CommandGroup struct {
	Mode  string   // GroupByThread, or "" for none
	Procs *os.File // the group's cgroup.procs (a one-shot's command writes itself in)
	Enter *os.File // the group's thread file
	Leave *os.File // hutch's group's thread file
}

// Close closes the files.
func (g CommandGroup) Close() {
	for _, f := range []*os.File{g.Procs, g.Enter, g.Leave} {
		if f != nil {
			f.Close()
		}
	}
}

// SessionFiles are what a session's init gets at CmdGroupFD and
// HomeGroupFD.
func (g CommandGroup) SessionFiles() [2]*os.File { return [2]*os.File{g.Enter, g.Leave} }

// inheritedGroup are this helper's own CmdGroupFD and HomeGroupFD, as
// files made once (a file collected by the GC would close its descriptor).
var inheritedGroup = sync.OnceValue(func() [2]*os.File {
	return [2]*os.File{os.NewFile(CmdGroupFD, "hutch-cmd-group"), os.NewFile(HomeGroupFD, "hutch-home-group")}
})

// groupExtraFiles extends a child helper's ExtraFiles (extra, which puts
// them at 3, 4...) so that the group's files land at CmdGroupFD and
// HomeGroupFD, when the job has a command group.
func groupExtraFiles(job Job, extra []*os.File) []*os.File {
	if job.CmdGroup == "" {
		return extra
	}
	for len(extra) < CmdGroupFD-3 {
		extra = append(extra, nil)
	}
	g := inheritedGroup()
	return append(extra, g[0], g[1])
}

// intoCommandGroup returns enter and leave, which move the calling
// thread (locked to its goroutine) into the commands' group for the fork
// and back; both do nothing without a command group. A failed leave is
// harmless: the thread then counts as one of the command's processes.
func intoCommandGroup(job Job) (enter func() error, leave func()) {
	if job.CmdGroup != GroupByThread {
		return func() error { return nil }, func() {}
	}
	zero := []byte("0") // "0": the writing thread
	enter = func() error {
		if _, err := unix.Write(CmdGroupFD, zero); err != nil {
			return fmt.Errorf("joining the commands' cgroup: %w", err)
		}
		return nil
	}
	return enter, func() { _, _ = unix.Write(HomeGroupFD, zero) }
}
