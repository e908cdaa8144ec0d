package hostfs

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openAnon opens a new file of d with no name (O_TMPFILE), readable and
// writable: a process killed while writing it leaves nothing behind. It
// fails where the filesystem has no such files (EOPNOTSUPP, EISDIR on
// old kernels).
func openAnon(d *os.Root) (*os.File, error) {
	return d.OpenFile(".", unix.O_TMPFILE|os.O_RDWR, 0o600)
}

// linkAnon gives f, from openAnon, the name name in d: by its descriptor
// (AT_EMPTY_PATH, which needs CAP_DAC_READ_SEARCH on some kernels), else
// through /proc/self/fd. name is a bare name, new in d: linkat never
// follows or replaces what is there.
func linkAnon(d *os.Root, f *os.File, name string) error {
	dir, err := d.Open(".")
	if err != nil {
		return err
	}
	defer dir.Close()
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
