package sysprog

import "golang.org/x/sys/unix"

// rawVfork is implemented in vfork_linux_amd64.s.
func rawVfork(flags uintptr) (pid uintptr, errno uintptr)

// spawnCommand starts the command's process from the sandbox's PID 1
// (startCommand in the child). On amd64 it is a vfork: the child shares
// this process's memory and the parent waits until it has called execve,
// which spares copying the page tables of a copy of a Go process and
// tearing them down again at execve.
//
//go:nosplit
//go:norace
func spawnCommand(x *oneShotExec) (uintptr, uintptr) {
	pid, errno := rawVfork(unix.CLONE_VM | unix.CLONE_VFORK | uintptr(unix.SIGCHLD))
	if errno == 0 && pid == 0 {
		// Only a failure returns; saying so is the last thing the
		// child does, here rather than below startCommand's frame.
		what, e, code := startCommand(x)
		childExit(x, what, e, code)
	}
	return pid, errno
}
