//go:build linux && !amd64

package seccomp

// Outside amd64 (arm64 included) there are only the *at forms of these
// (openat, fchmodat), and no port I/O or uselib: their rules are left
// out.
const (
	sysOpen   = noSyscall
	sysCreat  = noSyscall
	sysMknod  = noSyscall
	sysChmod  = noSyscall
	sysIopl   = noSyscall
	sysIoperm = noSyscall
	sysUselib = noSyscall
)

// Nor mkdir, symlink, link, rename or renameat: arm64 has only mkdirat,
// symlinkat, linkat and renameat2 (golang.org/x/sys names a
// SYS_RENAMEAT for arm64, but the kernel does not implement that number:
// a supervisor must never perform it).
const (
	sysMkdir    = noSyscall
	sysSymlink  = noSyscall
	sysLink     = noSyscall
	sysRename   = noSyscall
	sysRenameat = noSyscall
)
