package sysprog

import (
	"runtime"
	"sync"
)

// Thread reserves by role: a server (the session's init, the container's
// server) blocks on the host's stream and in file operations; a starter
// (runner, exec helper, reaper) in a wait for its command and in killing
// its tree; the container's idle init in nothing but its wait for orphans.
const (
	ServerThreads  = 6
	StarterThreads = 4
	IdleThreads    = 2
)

// ReserveThreads makes the Go runtime start n OS threads now, while it
// can, and keep them idle for later (the runtime never ends an idle
// thread). The helper's processes live inside the sandbox's process
// limit, shared with the commands: once a fork bomb has filled it, the
// runtime can create no thread, and a Go process that needs one then
// dies ("failed to create new OS thread") and takes the session with it.
// With a reserve it takes an idle thread instead. Conn's waits hold no
// thread, so the reserve covers blocking system calls (a read of the
// host's stream, a wait for a child, a file operation) and the runtime's
// own needs; n is what one role has in flight at most, not per command.
//
// Each reserved thread counts against the sandbox's process limit while
// the role lives: a handful per role.
func ReserveThreads(n int) {
	// The caller comes back on the thread it came in on: the roles
	// confine the thread they start commands from, and that is the main
	// thread, the one /proc shows as the process.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var locked, done sync.WaitGroup
	release := make(chan struct{})
	locked.Add(n)
	done.Add(n)
	for range n {
		go func() {
			defer done.Done()
			// A goroutine locked to its thread keeps that thread to
			// itself while it waits, so the others each need a
			// thread of their own.
			runtime.LockOSThread()
			locked.Done()
			<-release
			runtime.UnlockOSThread() // the thread goes idle, not away
		}()
	}
	locked.Wait()
	close(release)
	done.Wait()
}
