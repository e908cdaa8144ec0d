//go:build amd64 || arm64

package sysprog

import "syscall"

// sys6 is a raw system call that adds nothing to the stack (see
// sys6_linux_amd64.s): what a fork's child runs uses it, and
// syscall.RawSyscall6 elsewhere.
//
//go:noescape
func sys6(trap, a1, a2, a3, a4, a5, a6 uintptr) (r1 uintptr, errno syscall.Errno)
