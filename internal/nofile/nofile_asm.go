//go:build linux && (amd64 || arm64)

package nofile

// readLimit stores this process's RLIMIT_NOFILE (soft, hard) in lim and
// returns 0, or a nonzero value when the system call failed (its negated
// error number). It is written in assembly so that this package imports
// nothing, not even syscall.
func readLimit(lim *[2]uint64) (errno uintptr)
