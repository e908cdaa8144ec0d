package helper

import (
	"os"
	"sync"
)

// The commands' control group holds the policy's process limit, so that
// hutch's own processes and threads (a session's Go helpers) never count
// against it, and commands never run outside it (Job.CmdGroup). A helper
// starts a command with spawn, whose child writes itself into the group
// (its tasks file on cgroup v1, cgroup.threads in v2's threaded groups:
// the child has one thread) before execve, so the command is born there
// and no helper thread ever visits it. (clone3's CLONE_INTO_CGROUP would
// do the same, but the helpers' seccomp filter refuses clone3, whose
// flags it cannot see.)

// CmdGroupFD is where a session's helpers hold the commands' group's
// thread file.
const CmdGroupFD = 5

// CommandGroup holds the host's open files of the commands' group; the
// zero value is no group.
type CommandGroup struct {
	Procs   *os.File // the group's cgroup.procs (a one-shot's command writes itself in)
	Threads *os.File // the group's thread file (a session's commands write themselves in)
}

// Set reports whether there is a group.
func (g CommandGroup) Set() bool { return g.Threads != nil }

// Close closes the files.
func (g CommandGroup) Close() {
	for _, f := range []*os.File{g.Procs, g.Threads} {
		if f != nil {
			f.Close()
		}
	}
}

// ExtraFiles extends a session's init's ExtraFiles (extra, which puts them
// at 3, 4...) with the group's thread file at CmdGroupFD; extra as it is
// without a group.
func (g CommandGroup) ExtraFiles(extra []*os.File) []*os.File {
	if !g.Set() {
		return extra
	}
	return placeGroupFile(extra, g.Threads)
}

// placeGroupFile appends f to extra at CmdGroupFD, closing the
// descriptors before it that extra leaves out.
func placeGroupFile(extra []*os.File, f *os.File) []*os.File {
	for len(extra) < CmdGroupFD-3 {
		extra = append(extra, nil) // nil: closed in the child
	}
	return append(extra, f)
}

// inheritedGroup is this helper's own CmdGroupFD, as a file made once (a
// file collected by the GC would close its descriptor).
var inheritedGroup = sync.OnceValue(func() *os.File {
	return os.NewFile(CmdGroupFD, "hutch-cmd-group")
})

// groupExtraFiles hands a child helper (runner, exec helper) this helper's
// group file, when the job has a command group (see CommandGroup.ExtraFiles).
func groupExtraFiles(job Job, extra []*os.File) []*os.File {
	if !job.CmdGroup {
		return extra
	}
	return placeGroupFile(extra, inheritedGroup())
}
