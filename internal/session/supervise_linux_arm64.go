package session

import "golang.org/x/sys/unix"

// auditArch is seccomp_data.arch of this binary's system calls.
const auditArch = unix.AUDIT_ARCH_AARCH64

// decodeLegacy: arm64 has only the *at forms (its SYS_RENAMEAT number is
// not a system call there).
func decodeLegacy(*seccompNotif) (call, bool) { return call{}, false }
