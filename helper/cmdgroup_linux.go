package helper

import (
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// How a sandbox's helpers start commands inside the commands' control
// group, which holds the policy's process limit, so that hutch's own
// processes and threads (a session's Go helpers) never count against it
// and commands never run outside it (Job.CmdGroup).
const (
	// GroupByThread (cgroup v1, where a thread may be in a group of its
	// own): the forking thread writes itself into the group's tasks file,
	// forks the command, and writes itself back into the sandbox group's.
	GroupByThread = "thread"
	// GroupByClone (cgroup v2): the command is cloned into the group
	// (clone3 with CLONE_INTO_CGROUP, Linux 5.7).
	GroupByClone = "clone"
)

// CmdGroupFD and HomeGroupFD are where a session's helpers hold the
// group's files: the commands' tasks file (v1) or directory (v2), and the
// sandbox group's tasks file (v1).
const (
	CmdGroupFD  = 5
	HomeGroupFD = 6
)

// CommandGroup holds the host's open files of the commands' group.
type CommandGroup struct {
	Mode  string   // GroupByThread, GroupByClone, or "" for none
	Procs *os.File // the group's cgroup.procs (a one-shot's command writes itself in)
	Dir   *os.File // v2: the group's directory
	Enter *os.File // v1: the group's tasks
	Leave *os.File // v1: the sandbox group's tasks
}

// Close closes the files.
func (g CommandGroup) Close() {
	for _, f := range []*os.File{g.Procs, g.Dir, g.Enter, g.Leave} {
		if f != nil {
			f.Close()
		}
	}
}

// SessionFiles are what a session's init gets at CmdGroupFD and
// HomeGroupFD (nil entries for none).
func (g CommandGroup) SessionFiles() [2]*os.File {
	if g.Mode == GroupByClone {
		return [2]*os.File{g.Dir, nil}
	}
	return [2]*os.File{g.Enter, g.Leave}
}

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
	extra = append(extra, g[0])
	if job.CmdGroup == GroupByThread {
		extra = append(extra, g[1])
	}
	return extra
}

// intoCommandGroup is sys for a command cloned into the commands' group
// (v2), and enter and leave move the calling thread, which must be locked
// to its goroutine, into the group around the fork and back (v1). With no
// command group all three leave things as they are.
func intoCommandGroup(job Job, sys *syscall.SysProcAttr) (out *syscall.SysProcAttr, enter func() error, leave func()) {
	out, enter, leave = sys, func() error { return nil }, func() {}
	switch job.CmdGroup {
	case GroupByClone:
		s := syscall.SysProcAttr{}
		if sys != nil {
			s = *sys
		}
		s.UseCgroupFD, s.CgroupFD = true, CmdGroupFD
		out = &s
	case GroupByThread:
		zero := []byte("0") // "0": the writing thread
		enter = func() error {
			if _, err := unix.Write(CmdGroupFD, zero); err != nil {
				return fmt.Errorf("joining the commands' cgroup: %w", err)
			}
			return nil
		}
		leave = func() { _, _ = unix.Write(HomeGroupFD, zero) }
	}
	return out, enter, leave
}
