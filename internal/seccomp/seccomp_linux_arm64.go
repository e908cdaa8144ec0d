package seccomp

import "golang.org/x/sys/unix"

// auditArch is the seccomp_data.arch of this binary's system-call ABI.
// AArch32 tasks (AUDIT_ARCH_ARM) do not match it.
const auditArch = unix.AUDIT_ARCH_AARCH64 // 0xc00000b7

// x32SyscallBit is zero: arm64 has no second ABI under its audit arch.
const x32SyscallBit = 0
