//go:build linux && !amd64 && !arm64

package seccomp

// hutch has system-call numbers for amd64 and arm64 only. Elsewhere
// auditArch is zero and Program returns an error: sandboxes that need
// seccomp refuse to start rather than run without it.
const auditArch = 0

const x32SyscallBit = 0
