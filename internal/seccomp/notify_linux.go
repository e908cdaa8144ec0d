package seccomp

import (
	"fmt"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// retNotify hands the system call to the supervisor listening on the
// filter (SECCOMP_RET_USER_NOTIF): the caller waits for its answer.
const retNotify = unix.SECCOMP_RET_USER_NOTIF

// writeIntent are the open flags NotifyProgram hands to the supervisor:
// every open that may create a file (O_CREAT, O_TMPFILE's own bit), or
// write or truncate one (O_WRONLY, O_RDWR, and their invalid sum 3, and
// O_TRUNC, which Linux honours even with O_RDONLY). The flags argument is
// an int to the kernel: only its low word counts.
const writeIntent = unix.O_WRONLY | unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC | unix.O_TMPFILE&^unix.O_DIRECTORY

// NotifiedSyscalls are the system calls NotifyProgram hands to the
// supervisor whatever their arguments: each makes or replaces a name.
// open and openat go to it only with writeIntent flags; openat2 (its
// flags in memory a filter cannot read) fails with ENOSYS in Program,
// and the C libraries fall back to openat.
var NotifiedSyscalls = []string{"creat", "mkdir", "mkdirat", "mknod", "mknodat", "symlink", "symlinkat",
	"link", "linkat", "rename", "renameat", "renameat2"}

// notified are NotifiedSyscalls with their numbers on this architecture.
var notified = []sysCall{
	{"creat", sysCreat}, {"mkdir", sysMkdir}, {"mkdirat", unix.SYS_MKDIRAT},
	{"mknod", sysMknod}, {"mknodat", unix.SYS_MKNODAT},
	{"symlink", sysSymlink}, {"symlinkat", unix.SYS_SYMLINKAT},
	{"link", sysLink}, {"linkat", unix.SYS_LINKAT},
	{"rename", sysRename}, {"renameat", sysRenameat}, {"renameat2", unix.SYS_RENAMEAT2},
}

// NotifyProgram is the second filter a supervised command gets, on top of
// Program (the kernel applies the stricter verdict: what Program refuses
// stays refused). It hands to the supervisor every system call that can
// make, replace or write a name — open and openat with writeIntent flags
// and NotifiedSyscalls — and allows everything else. Calls of another
// ABI (i386, x32) are allowed here: Program kills or refuses them.
func NotifyProgram() ([]bpf.Instruction, error) {
	if auditArch == 0 {
		return nil, fmt.Errorf("seccomp: no system-call policy for this architecture")
	}
	seen := map[int]string{}
	for _, c := range append([]sysCall{{"open", sysOpen}, {"openat", unix.SYS_OPENAT}}, notified...) {
		if err := claim(seen, c); err != nil {
			return nil, err
		}
	}
	var a bpfAsm
	native, allow := a.newLabel(), a.newLabel()
	a.add(bpf.LoadAbsolute{Off: offArch, Size: 4})
	a.jumpIf(bpf.JumpEqual, auditArch, native, next)
	a.add(bpf.RetConstant{Val: retAllow})
	a.mark(native)
	a.add(bpf.LoadAbsolute{Off: offNr, Size: 4})
	if x32SyscallBit != 0 {
		a.jumpIf(bpf.JumpGreaterOrEqual, x32SyscallBit, allow, next)
	}
	a.refuse(notified, retNotify)
	for _, o := range []struct {
		nr  int
		arg uint32
	}{{sysOpen, 1}, {unix.SYS_OPENAT, 2}} {
		if o.nr == noSyscall {
			continue
		}
		other := a.newLabel()
		a.jumpIf(bpf.JumpEqual, uint32(o.nr), next, other)
		a.add(bpf.LoadAbsolute{Off: argLo(o.arg), Size: 4})
		hand := a.newLabel()
		a.jumpIf(bpf.JumpBitsSet, writeIntent, hand, allow)
		a.mark(hand)
		a.add(bpf.RetConstant{Val: retNotify})
		a.mark(other)
	}
	a.mark(allow)
	a.add(bpf.RetConstant{Val: retAllow})
	return a.program()
}
