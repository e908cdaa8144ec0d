package sysprog

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// threadPointer is the calling thread's FS base: on amd64 the code Go
// compiles reloads its goroutine register from there after every call
// into assembly, so a fork's child reads that memory (see heapPlan).
func threadPointer() (uintptr, bool) {
	const archGetFS = 0x1003
	var fs uint64
	_, _, e := unix.RawSyscall(unix.SYS_ARCH_PRCTL, archGetFS, uintptr(unsafe.Pointer(&fs)), 0)
	return uintptr(fs), e == 0
}
