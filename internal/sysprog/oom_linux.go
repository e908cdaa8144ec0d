package sysprog

import (
	"bytes"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/boundary"
)

// The OOM killer's choice.
//
// A sandbox's memory limit binds hutch's own processes in it as well as the
// command's: the isolated tier's init and PID 1, the container's init and
// helper server. When the limit is reached the kernel kills the process
// with the largest "badness", which is mostly its resident size; a command
// made of many small processes (each smaller than a Go helper, whose RSS
// also counts pages shared with hutch) then got hutch's own process
// killed: the sandbox died and the result said nothing of the limit.
//
// So every command starts with oom_score_adj 1000, the most a process can
// ask to be picked: whatever the command runs is picked before any hutch
// process, which keeps its own value. This guards against a command's
// accident, not its intent: a command may lower its score back to the
// caller's where it may write its /proc (the container tier, where it can
// also signal the helper: either ends only its own session); in the
// isolated tier its /proc is read-only to it. A process can only set its own score down to where it was (its
// oom_score_adj_min) without privilege, and none can set another's before
// it runs, so the process that starts a command raises its own score just
// before the fork and puts it back just after: the child inherits 1000.
// The file is opened early, while the process may still open it for
// writing (before it becomes non-dumpable, which makes its /proc files
// root's, and before Landlock).

// oomScoreFile is the kernel's file for a process's OOM score adjustment.
const oomScoreFile = "/proc/self/oom_score_adj"

// oomFirst is the score a command starts with.
var oomFirst = []byte("1000")

// commandOOM is this process's handle on its own score, when
// PrepareCommandOOM has opened it; fd is -1 otherwise.
var commandOOM = oomScore{fd: -1}

// oomScore is an open oom_score_adj and the value to restore.
type oomScore struct {
	fd   int
	orig []byte
}

// PrepareCommandOOM opens this process's oom_score_adj for the commands it
// will start. Without /proc or the file, commands start with this
// process's score, as they would have without it.
func PrepareCommandOOM() {
	orig, err := boundary.ReadKernelFile(oomScoreFile)
	if err != nil {
		return
	}
	fd, err := unix.Open(oomScoreFile, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	commandOOM = oomScore{fd: fd, orig: bytes.TrimSpace(orig)}
}

// raise gives this process the command's score, for a fork; lower puts
// the original back. Both are no-ops when the file is not open.
func (o oomScore) raise() { o.write(oomFirst) }
func (o oomScore) lower() { o.write(o.orig) }

func (o oomScore) write(b []byte) {
	if o.fd >= 0 {
		_, _ = unix.Pwrite(o.fd, b, 0)
	}
}

// oomOps adds the one-shot PID 1's part (see sandboxPID1): its own score
// file, opened into a slot of the program before it becomes non-dumpable,
// and the value to restore, read here (PID 1 inherits this process's).
// Like PrepareCommandOOM it is best effort: nothing is added (x.oomHigh
// stays empty) where the value cannot be read here, and a policy that
// hides /proc (or /proc/self) leaves the slot at -1, no descriptor, so the
// writes fail harmlessly and the command keeps PID 1's score.
func oomOps(b *builder, x *oneShotExec) {
	orig, err := boundary.ReadKernelFile(oomScoreFile)
	if err != nil {
		return
	}
	x.oomOrig, x.oomHigh = bytes.TrimSpace(orig), oomFirst
	x.oomSlot = b.preset(^uintptr(0))
	open := b.mark()
	b.call("opening "+oomScoreFile, unix.SYS_OPENAT, cwd, b.str(oomScoreFile), unix.O_WRONLY|unix.O_CLOEXEC).out = x.oomSlot
	b.skipTo(open, unix.ENOENT, unix.ENOTDIR, unix.EACCES, unix.EPERM, unix.ELOOP, unix.EROFS)
}
