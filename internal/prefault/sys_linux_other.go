//go:build linux && !amd64

package prefault

import "syscall"

// errno is a system call's error number; 0 for none.
type errno = syscall.Errno

const einval = syscall.EINVAL

func pageSize() uintptr { return uintptr(syscall.Getpagesize()) }

func sysMadvise(addr, n, advice uintptr) errno {
	_, _, e := syscall.Syscall(syscall.SYS_MADVISE, addr, n, advice)
	return e
}

// sysReadFile reads path into buf and returns how much it read (0 on any
// error).
func sysReadFile(path string, buf []byte) int {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer syscall.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			break
		}
		n += m
	}
	return n
}

func getenv(key string) (string, bool) { return syscall.Getenv(key) }
