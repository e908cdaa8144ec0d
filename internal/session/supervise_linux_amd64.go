package session

import "golang.org/x/sys/unix"

// auditArch is seccomp_data.arch of this binary's system calls.
const auditArch = unix.AUDIT_ARCH_X86_64

// decodeLegacy reads the notified calls x86_64 has besides their *at
// forms (arm64 has none).
func decodeLegacy(n *seccompNotif) (c call, ok bool) {
	a := n.Args
	switch int(n.Nr) {
	case unix.SYS_OPEN:
		return call{kind: kindOpen, dirfd: unix.AT_FDCWD, path: a[0], flags: uint32(a[1]), mode: uint32(a[2])}, true
	case unix.SYS_CREAT:
		return call{kind: kindOpen, dirfd: unix.AT_FDCWD, path: a[0], flags: unix.O_CREAT | unix.O_WRONLY | unix.O_TRUNC, mode: uint32(a[1])}, true
	case unix.SYS_MKDIR:
		return call{kind: kindMkdir, dirfd: unix.AT_FDCWD, path: a[0], mode: uint32(a[1])}, true
	case unix.SYS_MKNOD:
		return call{kind: kindMknod, dirfd: unix.AT_FDCWD, path: a[0], mode: uint32(a[1]), dev: uint32(a[2])}, true
	case unix.SYS_SYMLINK:
		return call{kind: kindSymlink, path: a[0], newfd: unix.AT_FDCWD, newpath: a[1]}, true
	case unix.SYS_LINK:
		return call{kind: kindLink, dirfd: unix.AT_FDCWD, path: a[0], newfd: unix.AT_FDCWD, newpath: a[1]}, true
	case unix.SYS_RENAME:
		return call{kind: kindRename, dirfd: unix.AT_FDCWD, path: a[0], newfd: unix.AT_FDCWD, newpath: a[1]}, true
	case unix.SYS_RENAMEAT:
		return call{kind: kindRename, dirfd: int32(a[0]), path: a[1], newfd: int32(a[2]), newpath: a[3]}, true
	}
	return c, false
}
