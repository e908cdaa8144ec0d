package sysprog

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/wire"
	"golang.org/x/sys/unix"
)

// spawn starts prog, a file inside the sandbox, as job's command: the
// job's arguments and environment, files as its standard streams and no
// other descriptor (every other one this process holds is close-on-exec).
// Its child does all the rest with raw system calls before execve (see
// startCommand): it joins the commands' group (Job.CmdGroup, through
// CmdGroupFD) and does not run when the group's count (CountFD) is then
// over the policy's process limit, starts a session of its own when
// setsid is set, enters the job's directory, takes the memory rlimit
// when no cgroup bounds memory and, when the policy sets no open-files
// limit, the one this process started with (see startOpenFiles). So the
// command never runs an instruction outside its group or above its
// limit, and this process's threads never count against the group (Go's
// ForkExec could do none of this before execve: the forking thread had
// to visit the group, and the rlimit came just after the start).
//
// A command that cannot start (a step failed, execve refused) exits 126
// or 127 with the reason on its stderr, as a shell's would; err is for a
// process that could not be made at all.
func spawn(job wire.Job, prog string, setsid bool, files [3]*os.File) (int, error) {
	// A builder for its strings only (no ops): it keeps them, and refuses
	// one with a NUL byte.
	b := &builder{p: &program{}}
	x := newCommandExec(b.str, job, []string{prog})
	if job.Dir != "" {
		x.dir = b.str(job.Dir)
	}
	if b.err != nil {
		return 0, b.err
	}
	if job.CmdGroup {
		x.group = boundary.CmdGroupFD
		if n := job.Policy.Limits.Processes; n > 0 {
			x.count, x.maxProcs = boundary.CountFD, uint64(n)
			x.full = []byte(fmt.Sprintf("the policy's %d processes are all running: ", n))
		}
	}
	x.setsid = setsid
	if err := newSuperviseStep(x); err != nil {
		return 0, err
	}
	// The streams go to descriptors above 2 first, from which the child
	// moves them down: one already at 0-2 could be overwritten before it
	// was moved. They are close-on-exec, so only 0-2 reach the command.
	for i, f := range files {
		fd, derr := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
		if derr != nil {
			return 0, fmt.Errorf("standard streams: %w", derr)
		}
		defer unix.Close(fd)
		x.stdio[i] = int32(fd)
	}
	r, e := spawnBlocked(x)
	runtime.KeepAlive(b.p)
	runtime.KeepAlive(x)
	if n := job.Policy.Limits.Processes; e == unix.EAGAIN && n > 0 && !job.PidsByCgroup {
		// EAGAIN also comes from outside the policy: a pids cgroup hutch
		// itself runs in, the user's process limit on the host,
		// kernel.threads-max. Blame the policy only when its count is
		// reached.
		tasks := sandboxTasks()
		if tasks >= n {
			return 0, fmt.Errorf("starting it: %w: the policy's %d processes are taken: without a pids cgroup, RLIMIT_NPROC counts every task in the sandbox (%d now), hutch's own helpers' threads included; give a higher process limit, or let hutch use a pids cgroup (run it as root, or in a delegated cgroup v2 subtree)",
				e, n, tasks)
		}
		return 0, fmt.Errorf("starting it: %w: refused outside the policy's limit of %d processes (%d tasks in the sandbox): by a control group hutch runs in, the user's process limit on the host, or the system's", e, n, tasks)
	}
	if e != 0 {
		return 0, fmt.Errorf("starting it: %w", e)
	}
	return int(r), nil
}

// sandboxTasks counts the tasks (threads) of every process this one's
// /proc shows (inside a sandbox, its PID namespace's), and those of the
// session's init through initTasks: commands do not see hutch's own
// processes (the sandbox's /proc has hidepid=ptraceable, and hutch's are
// not dumpable), and once confined this helper is one of them. Other
// helpers of the session (a runner busy with another command, exec
// helpers) stay out of the count.
func sandboxTasks() int {
	procs, _ := os.ReadDir("/proc")
	n := 0
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' { // the init, hidden, is not among them
			continue
		}
		tasks, _ := os.ReadDir("/proc/" + p.Name() + "/task")
		n += len(tasks)
	}
	if initTasks != nil {
		if _, err := initTasks.Seek(0, 0); err == nil {
			names, _ := initTasks.Readdirnames(-1)
			n += len(names)
		}
	}
	return n
}

// initTasks is the session's init's task directory, opened by
// HoldInitTasks; nil elsewhere.
var initTasks *os.File

// HoldInitTasks opens the init's task directory (/proc/1/task) while this
// helper may still see the init: its capabilities pass hidepid's check,
// which only a lookup makes, not a read of an open directory. Close on
// exec: no command gets it.
func HoldInitTasks() {
	if f, err := os.Open("/proc/1/task"); err == nil {
		initTasks = f
	}
}

// spawnBlocked runs spawnCommand from a locked thread with every signal
// blocked (a Go signal handler must not run in a child sharing this
// memory; the child sets its own dispositions and mask), holding
// syscall.ForkLock as every fork in this process does.
func spawnBlocked(x *oneShotExec) (uintptr, syscall.Errno) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	syscall.ForkLock.Lock()
	defer syscall.ForkLock.Unlock()
	old, e := blockSignals()
	if e != 0 {
		return 0, e
	}
	pid, errno := spawnCommand(x)
	setSignalMask(old)
	return pid, syscall.Errno(errno)
}

// ForkCommand starts prog with the job's arguments, environment and
// directory and the given standard streams (see spawn). When it cannot
// start, ok is false, a line naming it is on stderr and st carries the
// shell's 126.
func ForkCommand(job wire.Job, prog string, setsid bool, stdin, stdout, stderr *os.File) (pid int, st wire.Status, ok bool) {
	commandOOM.raise() // the child starts as the OOM killer's first choice
	pid, err := spawn(job, prog, setsid, [3]*os.File{stdin, stdout, stderr})
	commandOOM.lower()
	if err != nil {
		fmt.Fprintf(stderr, "hutch: %s: %v\n", job.Argv[0], err)
		return 0, wire.Status{Exited: true, ExitCode: 126}, false
	}
	return pid, wire.Status{}, true
}

// ReapUntil reaps every child of this process (orphans come to a PID 1 or
// a subreaper too) until pid ends, and returns pid's status.
func ReapUntil(pid int) (wire.Status, error) {
	for {
		var ws unix.WaitStatus
		var ru unix.Rusage
		got, err := unix.Wait4(-1, &ws, 0, &ru)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return wire.Status{}, fmt.Errorf("waiting: %w", err)
		}
		if got != pid {
			continue
		}
		return statusOf(ws, &ru), nil
	}
}

// statusOf is how a process ended, from its wait status and usage.
func statusOf(ws unix.WaitStatus, ru *unix.Rusage) wire.Status {
	st := wire.Status{Exited: ws.Exited(), ExitCode: ws.ExitStatus(), MaxRSSKiB: ru.Maxrss,
		CPUMillis: (ru.Utime.Nano() + ru.Stime.Nano()) / 1e6}
	if ws.Signaled() {
		st.Signal = int(ws.Signal())
	}
	return st
}
