// Package nofile keeps the open-files limit (RLIMIT_NOFILE) this process
// started with, so that the commands hutch starts get that limit rather
// than the one Go gives itself.
//
// Go's syscall package raises its own process's soft limit to the hard
// limit (less one) in its init, for Go does not use select(2), and its
// os/exec puts the original back in each child it starts. hutch starts
// commands with its own raw fork (package helper), which os/exec's
// restoring does not reach, and Go offers no way to read the original.
// This package reads it first: it imports nothing, and Go initializes
// packages in the order of their import paths wherever their imports
// allow (the language specification, "Package initialization"), so this
// package's init, under github.com/..., runs before syscall's.
//
// It knows the limit on linux/amd64 and linux/arm64, where it makes the
// system call itself; elsewhere Start reports it unknown.
package nofile

// start is the limit at this process's start: soft, hard.
var start [2]uint64

// known is whether start was read.
var known bool

func init() {
	known = readLimit(&start) == 0
}

// Start returns the soft and hard RLIMIT_NOFILE this process started
// with, before package syscall's init raised the soft one; ok is false when it
// could not be read on this platform.
func Start() (soft, hard uint64, ok bool) {
	return start[0], start[1], known
}
