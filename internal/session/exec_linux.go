package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/sysprog"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/internal/wire"
	"golang.org/x/sys/unix"
)

// ExecMain runs inside the finished sandbox as PID 1 of a PID namespace of
// its own (one per command). It confines itself — resource limits,
// priority, Landlock, no_new_privs, every capability dropped, the seccomp
// filter — then starts the command, which inherits all of it, reaps
// whatever the command leaves behind, and reports the command's status on
// fd 4. When it exits, the kernel kills everything still in its namespace:
// nothing a command starts outlives it. Confinement happens here rather
// than in init so that init keeps what it needs to serve the sandbox,
// while nothing the command runs ever holds more than the command.
func ExecMain() int {
	runtime.LockOSThread()      // capabilities are per thread: fork from this one
	sysprog.PrepareCommandOOM() // while its /proc files are still its own
	sysprog.HoldInitTasks()     // while it may still see the init
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
	if err := useSupervisor(); err != nil {
		return fail(stderr, 125, "hutch: %v", err)
	}
	st, err := runConfined(job, os.Stdin, os.Stdout, stderr, nil)
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
// started, when set, is called once the command runs (see startAndReap).
func runConfined(job wire.Job, stdin, stdout, stderr *os.File, started func()) (wire.Status, error) {
	prog, st, ok := FindProgram(job, stderr)
	if !ok {
		return st, nil
	}
	if err := sysprog.Confine(job); err != nil {
		return wire.Status{}, fmt.Errorf("confining the command: %w", err)
	}
	return startAndReap(job, prog, stdin, stdout, stderr, started)
}

// FindProgram looks the command up in its own PATH, from its own start
// directory. When it is missing or cannot run, ok is false, a line naming
// it is on stderr and st carries the shell's 127 or 126.
func FindProgram(job wire.Job, stderr *os.File) (prog string, st wire.Status, ok bool) {
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
	pid, st, ok := sysprog.ForkCommand(job, prog, false, stdin, stdout, stderr)
	if !ok {
		return st, nil
	}
	if started != nil {
		started()
	}
	return sysprog.ReapUntil(pid)
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
// socket (fd 3), through conn; ok is false when anything else came.
func recvStart(conn *wire.Conn) (req wire.Request, ok bool) {
	files, err := conn.Recv(&req)
	wire.CloseFiles(files)
	return req, err == nil && req.Op == "start" && req.Job != nil
}

// fail writes a line on w and returns code.
func fail(w io.Writer, code int, format string, args ...any) int {
	fmt.Fprintf(w, format+"\n", args...)
	return code
}

// Policy and job files carry JSON; decoding is strict.
func decodeJob(f *os.File) (wire.Job, error) {
	var j wire.Job
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return j, fmt.Errorf("reading the job: %w", err)
	}
	if len(j.Argv) == 0 {
		return j, fmt.Errorf("job has no command")
	}
	return j, nil
}
