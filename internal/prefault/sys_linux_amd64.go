package prefault

import "unsafe"

// On amd64 this package makes its system calls itself (sys_linux_amd64.s)
// rather than through package syscall: with no imports it is initialized
// before nearly every other package, so their first allocations and code
// already find populated pages.

// errno is a system call's error number; 0 for none.
type errno uintptr

const (
	sysRead   = 0
	sysOpen   = 2
	sysClose  = 3
	nrMadvise = 28
	oRdonly   = 0
	oCloexec  = 0o2000000
	eintr     = 4
	einval    = 22
)

// rawSyscall is implemented in sys_linux_amd64.s.
func rawSyscall(trap, a1, a2, a3 uintptr) (r1, e uintptr)

func pageSize() uintptr { return 4096 }

func sysMadvise(addr, n, advice uintptr) errno {
	_, e := rawSyscall(nrMadvise, addr, n, advice)
	return errno(e)
}

// openRead opens path (shorter than 64 bytes) for reading.
func openRead(path string) (fd uintptr, ok bool) {
	var name [64]byte
	if len(path) >= len(name) {
		return 0, false
	}
	copy(name[:], path)
	fd, e := rawSyscall(sysOpen, uintptr(unsafe.Pointer(&name[0])), oRdonly|oCloexec, 0)
	return fd, e == 0
}

// sysReadFile reads path into buf and returns how much it read (0 on any
// error).
func sysReadFile(path string, buf []byte) int {
	fd, ok := openRead(path)
	if !ok {
		return 0
	}
	defer rawSyscall(sysClose, fd, 0, 0)
	n := 0
	for n < len(buf) {
		m, e := rawSyscall(sysRead, fd, uintptr(unsafe.Pointer(&buf[n])), uintptr(len(buf)-n))
		if e == eintr {
			continue
		}
		if e != 0 || m == 0 {
			break
		}
		n += int(m)
	}
	return n
}

// getenv reads a variable from /proc/self/environ (the environment this
// process started with), 4 KiB at a time: a small stack, no allocation.
// Only the value's first 8 bytes are kept (enough for HUTCH_NO_PREFAULT).
func getenv(key string) (string, bool) {
	fd, ok := openRead("/proc/self/environ")
	if !ok {
		return "", false
	}
	defer rawSyscall(sysClose, fd, 0, 0)
	var chunk [4096]byte
	var val [8]byte
	matched, nval, found := 0, 0, false // matched: bytes of key+"=" matched so far in this entry; -1: no match
	for {
		m, e := rawSyscall(sysRead, fd, uintptr(unsafe.Pointer(&chunk[0])), uintptr(len(chunk)))
		if e == eintr {
			continue
		}
		if e != 0 || m == 0 {
			break
		}
		for _, c := range chunk[:m] {
			switch {
			case c == 0:
				if found {
					return string(val[:nval]), true
				}
				matched = 0
			case found:
				if nval < len(val) {
					val[nval] = c
					nval++
				}
			case matched < 0:
			case matched < len(key) && c == key[matched]:
				matched++
			case matched == len(key) && c == '=':
				found = true
			default:
				matched = -1
			}
		}
	}
	if found {
		return string(val[:nval]), true
	}
	return "", false
}
