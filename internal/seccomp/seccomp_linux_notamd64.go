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
