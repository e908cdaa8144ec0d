package hostfs

import (
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// samePinned reports whether d is the directory at dir (relative to
// root) reached through no symbolic link and without leaving root:
// the same device and inode. When it is not, changed says why: ELOOP (a
// link on the way now), ENOTDIR, or fs.ErrNotExist (another directory,
// or none, is there now).
func samePinned(root *os.Root, d *os.File, dir string) (changed, err error) {
	rf, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer rf.Close()
	fd, err := unix.Openat2(int(rf.Fd()), dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err == unix.ENOSYS || err == unix.EPERM {
		// No openat2 (an old kernel, a container runtime's filter): the
		// same walk one name at a time, none of them followed.
		fd, err = openNoLinks(int(rf.Fd()), dir)
	}
	switch {
	case err == unix.ELOOP || err == unix.EXDEV:
		return unix.ELOOP, nil // a link on the way now
	case err == unix.ENOTDIR:
		return unix.ENOTDIR, nil
	case err == unix.ENOENT:
		return fs.ErrNotExist, nil
	case err != nil:
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		return nil, err
	}
	if err := unix.Fstat(int(d.Fd()), &b); err != nil {
		return nil, err
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		return fs.ErrNotExist, nil // another directory is there now
	}
	return nil, nil
}

// openNoLinks opens the directory at dir (clean, relative, no "..")
// below the directory open at at, following no symbolic link on the way:
// openat2's RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, a name at a time.
func openNoLinks(at int, dir string) (int, error) {
	fd, err := unix.Openat(at, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, name := range strings.Split(dir, "/") {
		switch name {
		case "", ".":
			continue
		case "..":
			unix.Close(fd)
			return -1, unix.EXDEV // never in a judged path: refuse as a climb out
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err // ENOTDIR for a link (O_PATH|O_NOFOLLOW opens the link, not a directory)
		}
		fd = next
	}
	return fd, nil
}
