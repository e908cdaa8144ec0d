//go:build linux && !amd64 && !arm64

package sysprog

import "syscall"

// sys6 is syscall.RawSyscall6 where hutch has no frameless version of it.
//
//go:nosplit
//go:norace
func sys6(trap, a1, a2, a3, a4, a5, a6 uintptr) (r1 uintptr, errno syscall.Errno) {
	r, _, e := syscall.RawSyscall6(trap, a1, a2, a3, a4, a5, a6)
	return r, e
}
