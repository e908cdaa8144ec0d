package seccomp

import "golang.org/x/sys/unix"

// auditArch is the seccomp_data.arch of this binary's system-call ABI.
const auditArch = unix.AUDIT_ARCH_X86_64 // 0xc000003e

// x32SyscallBit marks a system call of the x32 ABI, which shares x86_64's
// audit arch: it is told apart only by this bit in the number.
const x32SyscallBit = 0x40000000

// The system calls x86_64 has and arm64 does not.
const (
	sysOpen   = unix.SYS_OPEN
	sysCreat  = unix.SYS_CREAT
	sysMknod  = unix.SYS_MKNOD
	sysChmod  = unix.SYS_CHMOD
	sysIopl   = unix.SYS_IOPL
	sysIoperm = unix.SYS_IOPERM
	sysUselib = unix.SYS_USELIB
)

// The name-making system calls x86_64 has and arm64 does not (see
// NotifyProgram).
const (
	sysMkdir    = unix.SYS_MKDIR
	sysSymlink  = unix.SYS_SYMLINK
	sysLink     = unix.SYS_LINK
	sysRename   = unix.SYS_RENAME
	sysRenameat = unix.SYS_RENAMEAT
)
