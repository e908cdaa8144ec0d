package helper

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/internal/wire"
	"golang.org/x/sys/unix"
)

// execMain runs inside the finished sandbox as PID 1 of a PID namespace of
// its own (one per command). It confines itself — resource limits,
// priority, Landlock, no_new_privs, every capability dropped, the seccomp
// filter — then starts the command, which inherits all of it, reaps
// whatever the command leaves behind, and reports the command's status on
// fd 4. When it exits, the kernel kills everything still in its namespace:
// nothing a command starts outlives it. Confinement happens here rather
// than in init so that init keeps what it needs to serve the sandbox,
// while nothing the command runs ever holds more than the command.
func execMain() int {
	runtime.LockOSThread() // capabilities are per thread: fork from this one
	prepareCommandOOM()    // while its /proc files are still its own
	holdInitTasks()        // while it may still see the init
	// Out of the command's reach: it cannot reopen the status pipe through
	// /proc to forge its own result, nor signal this PID 1 away.
	unreachable()
	jobFile, statusFile := os.NewFile(3, "job"), os.NewFile(4, "status")
	// fd 4, like every other inherited descriptor, is close-on-exec (Main
	// saw to it): the command cannot forge its status.
	stderr := os.NewFile(boundary.ExecStderrFD, "stderr")
	job, err := decodeJob(jobFile)
	jobFile.Close()
	if err != nil {
		return fail(stderr, 125, "hutch: %v", err)
	}
	st, err := runConfined(job, os.Stdin, os.Stdout, stderr)
	if err != nil {
		return fail(stderr, 125, "hutch: %v", err)
	}
	_ = json.NewEncoder(statusFile).Encode(st)
	return 0
}

// runConfined confines the calling thread (which the caller has locked),
// starts the command from it with the given standard streams, reaps every
// process that comes to it (as a PID 1 does) and returns the command's
// status. A program that cannot be found or run gets the shell's 127 or
// 126 and a line on stderr; err is for a sandbox that could not be set up.
func runConfined(job wire.Job, stdin, stdout, stderr *os.File) (wire.Status, error) {
	prog, st, ok := findProgram(job, stderr)
	if !ok {
		return st, nil
	}
	if err := confine(job); err != nil {
		return wire.Status{}, fmt.Errorf("confining the command: %w", err)
	}
	return startAndReap(job, prog, stdin, stdout, stderr, nil)
}

// findProgram looks the command up in its own PATH, from its own start
// directory. When it is missing or cannot run, ok is false, a line naming
// it is on stderr and st carries the shell's 127 or 126.
func findProgram(job wire.Job, stderr *os.File) (prog string, st wire.Status, ok bool) {
	prog, code, err := tierkit.LookPath(job.Argv[0], job.PathEnv(), job.Dir)
	if err != nil {
		if code == 127 {
			err = errors.New("command not found")
		}
		fmt.Fprintf(stderr, "hutch: %s: %v\n", job.Argv[0], err)
		return "", wire.Status{Exited: true, ExitCode: code}, false
	}
	return prog, wire.Status{}, true
}

// startAndReap starts prog from the calling thread (confined already)
// with the given standard streams, calls started (when set) once it runs,
// then reaps every process that comes to this PID 1 until the command
// itself ends, and returns its status. Whatever the command left running
// is the caller's to end.
func startAndReap(job wire.Job, prog string, stdin, stdout, stderr *os.File, started func()) (wire.Status, error) {
	pid, st, ok := forkCommand(job, prog, false, stdin, stdout, stderr)
	if !ok {
		return st, nil
	}
	if started != nil {
		started()
	}
	return reapUntil(pid)
}

// forkCommand starts prog with the job's arguments, environment and
// directory and the given standard streams (see spawn). When it cannot
// start, ok is false, a line naming it is on stderr and st carries the
// shell's 126.
func forkCommand(job wire.Job, prog string, setsid bool, stdin, stdout, stderr *os.File) (pid int, st wire.Status, ok bool) {
	commandOOM.raise() // the child starts as the OOM killer's first choice
	pid, err := spawn(job, prog, setsid, [3]*os.File{stdin, stdout, stderr})
	commandOOM.lower()
	if err != nil {
		fmt.Fprintf(stderr, "hutch: %s: %v\n", job.Argv[0], err)
		return 0, wire.Status{Exited: true, ExitCode: 126}, false
	}
	return pid, wire.Status{}, true
}

// reapUntil reaps every child of this process (orphans come to a PID 1 or
// a subreaper too) until pid ends, and returns pid's status.
func reapUntil(pid int) (wire.Status, error) {
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

// unreachable puts this helper out of reach of the commands it starts
// (same user, no capability): not dumpable, so /proc shows them none of
// its descriptors, memory or threads; and deaf to the signals they may
// send it (see dropSignals).
func unreachable() {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	dropSignals()
}

// recvStart reads the "start" request that comes first on a helper's
// socket (fd 3); ok is false when anything else came.
func recvStart() (conn *wire.Conn, req wire.Request, ok bool) {
	conn = wire.NewConn(3)
	files, err := conn.Recv(&req)
	closeFiles(files)
	return conn, req, err == nil && req.Op == "start" && req.Job != nil
}

// fail writes a line on w and returns code.
func fail(w io.Writer, code int, format string, args ...any) int {
	fmt.Fprintf(w, format+"\n", args...)
	return code
}

// confine applies every layer that works per process to the calling
// thread (which the caller has locked), with confineOps.
func confine(job wire.Job) error {
	b := newBuilder()
	if err := confineOps(b, job); err != nil {
		return err
	}
	prog, err := b.build()
	if err != nil {
		return err
	}
	return prog.exec()
}
