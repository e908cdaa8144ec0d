package hostfs

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openAnon opens a new file of the directory dir with no name
// (O_TMPFILE), readable and writable: a process killed while writing it
// leaves nothing behind. It fails where the filesystem has no such files
// (EOPNOTSUPP, EISDIR on old kernels).
func openAnon(dir *os.File) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir.Name(), Err: err}
	}
	return os.NewFile(uintptr(fd), dir.Name()), nil
}

// linkAnon gives f, from openAnon, the name name in the directory dir: by
// its descriptor (AT_EMPTY_PATH, which needs CAP_DAC_READ_SEARCH on some
// kernels), else through /proc/self/fd. name is a bare name, new in dir:
// linkat never follows or replaces what is there.
func linkAnon(dir, f *os.File, name string) error {
	dfd, fd := int(dir.Fd()), int(f.Fd())
	if unix.Linkat(fd, "", dfd, name, unix.AT_EMPTY_PATH) == nil {
		return nil
	}
	return unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), dfd, name, unix.AT_SYMLINK_FOLLOW)
}

// fileOwner is the user owning fi's file.
func fileOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
