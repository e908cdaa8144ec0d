package boundary

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// ReadKernelFile reads a small file of /proc or /sys (a sysctl, a
// cgroup's file) with plain system calls: open, read to the end, close.
// os.ReadFile also registers such a file with Go's poller (/proc/sys
// files can be polled), which costs five system calls more; on a
// sandbox's start, that is a few hundredths of a millisecond for the
// files it reads. Errors are *os.PathError, as os.ReadFile's.
func ReadKernelFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for errors.Is(err, unix.EINTR) {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// WriteKernelFile writes data to an existing file of /proc or /sys (a
// sysctl, a cgroup's file) in one write, with plain system calls (see
// ReadKernelFile). A write the kernel takes only in part is an error.
func WriteKernelFile(path string, data []byte) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	for errors.Is(err, unix.EINTR) {
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	n, err := unix.Write(fd, data)
	for errors.Is(err, unix.EINTR) {
		n, err = unix.Write(fd, data)
	}
	cerr := unix.Close(fd)
	switch {
	case err != nil:
		return &os.PathError{Op: "write", Path: path, Err: err}
	case n != len(data):
		return &os.PathError{Op: "write", Path: path, Err: unix.EIO}
	case cerr != nil:
		return &os.PathError{Op: "close", Path: path, Err: cerr}
	}
	return nil
}
