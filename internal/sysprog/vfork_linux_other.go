//go:build linux && !amd64

package sysprog

import (
	"golang.org/x/sys/unix"
)

// spawnCommand starts the command's process from the sandbox's PID 1
// (startCommand in the child), with a plain fork (amd64 uses a vfork).
//
//go:nosplit
//go:norace
func spawnCommand(x *oneShotExec) (uintptr, uintptr) {
	pid, e := sys6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	if e == 0 && pid == 0 {
		// Only a failure returns; saying so is the last thing the
		// child does, here rather than below startCommand's frame.
		what, e, code := startCommand(x)
		childExit(x, what, e, code)
	}
	return pid, uintptr(e)
}
