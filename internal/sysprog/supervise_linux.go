package sysprog

import (
	"errors"
	"fmt"
	"path"
	"sync"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/seccomp"
	"github.com/hutchsandbox/hutch/policy"
)

// Supervised commands (docs/security.md, "Protected paths in writable
// directories"): when a protected path is missing in a writable
// directory, a read-only mount cannot keep it (a mount needs a mount
// point), so every system call of the command that could make or write a
// name goes to a supervisor, which makes it itself (package session).
// The command's process installs the notifying filter
// (seccomp.NotifyProgram) on itself just before execve, and sends the
// filter's listener over the supervisor's socket: from its first
// instruction on, the command cannot make a name the supervisor did not.

// ErrNeedsSupervisor is RunOnce's error for a policy whose commands need
// the supervisor (NeedsSupervision), which only a session has.
var ErrNeedsSupervisor = errors.New("a protected path is missing in a writable directory: its commands need a session's supervisor")

// supervisorSocket is the descriptor of the supervisor's socket that
// commands started by this process send their listener to; -1 for none.
var supervisorSocket = -1

// SetSupervisor makes every command this process starts from now on a
// supervised one, sending its listener on fd (a SOCK_SEQPACKET unix
// socket). Call it before starting commands, from the goroutine that
// starts them.
func SetSupervisor(fd int) { supervisorSocket = fd }

// Supervised reports whether commands started by this process are
// supervised (SetSupervisor).
func Supervised() bool { return supervisorSocket >= 0 }

// NeedsSupervision reports whether p's commands need the supervisor: p
// has a writable path, and some protected path (p.Protected()) at the top
// of a writable path, or of the start directory deeper in one, is not
// there as a file or directory of its own (it is missing, or it is or
// lies behind a symbolic link): the sandbox's read-only mounts keep only
// those that are. A writable path that is itself missing holds nothing to
// protect.
func NeedsSupervision(p policy.Policy) bool {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	entries := p.Protected()
	for _, root := range protectRoots(p) {
		fd, err := unix.Openat2(unix.AT_FDCWD, root, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC})
		if err != nil {
			continue
		}
		unix.Close(fd)
		for _, e := range entries {
			fd, err := unix.Openat2(unix.AT_FDCWD, path.Join(root, e), how)
			if err != nil {
				return true
			}
			var st unix.Stat_t
			err = unix.Fstat(fd, &st)
			unix.Close(fd)
			if err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return true
			}
		}
	}
	return false
}

// ProtectRoots are where p's protected paths are kept: each writable
// path, and the start directory when it lies deeper in one.
func ProtectRoots(p policy.Policy) []string { return protectRoots(p) }

// notifyFilter is seccomp.NotifyProgram assembled for the kernel, made
// once.
var notifyFilter = sync.OnceValues(func() ([]unix.SockFilter, error) {
	prog, err := seccomp.NotifyProgram()
	if err != nil {
		return nil, err
	}
	return assemble(prog)
})

// assemble turns a BPF program into the kernel's instructions.
func assemble(prog []bpf.Instruction) ([]unix.SockFilter, error) {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, err
	}
	if len(raw) == 0 || len(raw) > 0xffff {
		return nil, fmt.Errorf("seccomp filter of %d instructions", len(raw))
	}
	filters := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filters[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return filters, nil
}

// superviseStep is what a command's process needs to install the
// notifying filter and send its listener: ready for raw system calls.
type superviseStep struct {
	sock   uintptr
	prog   unix.SockFprog
	filter []unix.SockFilter // what prog points to
	msg    unix.Msghdr
	iov    unix.Iovec
	byte1  [1]byte
	oob    []byte // one SCM_RIGHTS message; the descriptor at oob[fdAt:]
	fdAt   uintptr
}

// newSuperviseStep prepares x's command to be supervised through the
// socket supervisorSocket, when there is one.
func newSuperviseStep(x *oneShotExec) error {
	if supervisorSocket < 0 {
		return nil
	}
	filter, err := notifyFilter()
	if err != nil {
		return fmt.Errorf("the supervisor's seccomp filter: %w", err)
	}
	s := &superviseStep{sock: uintptr(supervisorSocket), filter: filter, oob: unix.UnixRights(0), fdAt: uintptr(unix.CmsgLen(0))}
	s.prog = unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	s.iov.Base = &s.byte1[0]
	s.iov.SetLen(1)
	s.msg.Iov = &s.iov
	s.msg.SetIovlen(1)
	s.msg.Control = &s.oob[0]
	s.msg.SetControllen(len(s.oob))
	x.supervise = s
	return nil
}

// A supervised command installs the notifying filter on itself (in
// startCommand, before execve) and sends the listener to the supervisor.
// The wait of a notified call is killable only once the supervisor has
// the notification (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, Linux 5.19),
// so a signal cannot restart a call the supervisor already made; older
// kernels go without. The steps are written out in startCommand, not
// called: a call's frame on top of startCommand's passed the stack that
// the child of a vfork may use (nosplit) in a build instrumented for
// fuzzing.

// superviseFlags are the filter's flags where the kernel has them all.
const superviseFlags = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV

var superviseFailed = []byte("cannot hand its file creations to the supervisor: ")
