package helper

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The runner: warm execs without a new helper per command.
//
// Starting the exec helper costs a whole Go program start (about 15 ms
// here) for every command. A session's policy never changes, so the
// confinement a command inherits is the same every time: a runner applies
// it once, to itself, and then starts command after command.
//
// The runner is PID 1 of a PID namespace of its own, below the init's,
// confined exactly like the exec helper (resource limits, priority,
// Landlock, no_new_privs, no capability, the seccomp filter). It runs one
// command at a time; when that command ends it kills every other process
// of its namespace (PID 1 may signal them all) and reaps them before it
// reports, so nothing a command started outlives it — as with a namespace
// per command. A timeout or cancel kills the runner itself, which ends its
// namespace; the init starts a fresh runner for the next command. While
// the runner is busy, a concurrent command takes the exec helper path.

// runnerMinOpenFiles is the smallest open-files limit under which a runner
// still has the descriptors it needs for itself; below it, commands take
// the exec helper path, where the limit binds the command alone.
const runnerMinOpenFiles = 64

// runnerMain serves commands on fd 3: first a "start" request carrying the
// session's job, answered once the runner is confined; then one "exec"
// request per command with its three standard streams, answered with the
// command's status when it and everything it started have ended.
func runnerMain() int {
	runtime.LockOSThread() // confinement is per thread: start commands from this one
	// Not dumpable: commands (same uid, no capability) cannot reach this
	// process's descriptors or memory through /proc.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// Commands share this namespace; the signals they may send PID 1 (not
	// SIGKILL or SIGSTOP, which the kernel keeps from it) are caught and
	// dropped. Caught, not ignored: an ignored signal would stay ignored
	// in the commands, and SIGXFSZ or SIGPIPE must still stop them.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
		syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGVTALRM, syscall.SIGPROF)
	go func() {
		for range sigs {
		}
	}()
	conn := NewConn(3)
	var req Request
	files, err := conn.Recv(&req)
	closeFiles(files)
	if err != nil || req.Op != "start" || req.Job == nil {
		return 1
	}
	job := *req.Job
	if err := confine(job); err != nil {
		_ = conn.Send(Response{ID: req.ID, Err: ToWire(fmt.Errorf("confining the runner: %w", err))})
		return 1
	}
	if err := conn.Send(Response{ID: req.ID}); err != nil {
		return 1
	}
	for {
		var r Request
		passed, err := conn.Recv(&r)
		if err != nil {
			return 0 // the init let go of this runner
		}
		res := runOne(job, r, passed)
		res.Done = retiring(job)
		if err := conn.Send(res); err != nil || res.Done {
			return 0
		}
	}
}

// runOne runs one command of the session and ends whatever it started.
func runOne(job Job, r Request, passed []*os.File) Response {
	defer closeFiles(passed)
	res := Response{ID: r.ID}
	if r.Op != "exec" || r.Job == nil || len(r.Job.Argv) == 0 || len(passed) != 3 {
		res.Err = ToWire(errors.New("runner: exec needs a command and three pipes"))
		return res
	}
	job.Argv, job.Env, job.Dir = r.Job.Argv, r.Job.Env, r.Job.Dir
	prog, st, ok := findProgram(job, passed[2])
	if ok {
		// The runner's copies of the streams close once the command runs:
		// the host then sees end-of-file when the command's side closes.
		st, err := startAndReap(job, prog, passed[0], passed[1], passed[2], func() { closeFiles(passed) })
		endAll()
		if err != nil {
			res.Err = ToWire(err)
			return res
		}
		res.Status = &st
		return res
	}
	res.Status = &st
	return res
}

// endAll kills every process left in the runner's namespace and reaps
// them all, so the next command starts alone.
func endAll() {
	_ = unix.Kill(-1, unix.SIGKILL)
	for {
		_, err := unix.Wait4(-1, nil, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return // ECHILD: nobody left
		}
	}
}

// retiring reports whether the runner has used half of its CPU-time limit:
// the limit binds the runner's own (small) use too, so it hands over to a
// fresh runner long before the limit could stop it.
func retiring(job Job) bool {
	limit := job.Policy.Limits.CPUTime
	if limit <= 0 {
		return false
	}
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return true
	}
	used := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return used >= time.Duration(limit)/2
}

// runner is the init's handle on one runner process.
type runner struct {
	cmd  *exec.Cmd
	sock *os.File // the init's end of the socket; conn uses its descriptor
	conn *Conn
}

// useRunner reports whether this session's commands may go through a
// runner at all.
func useRunner(job Job) bool {
	l := job.Policy.Limits.OpenFiles
	return l == 0 || l >= runnerMinOpenFiles
}

// startRunner starts a runner for the session and waits until it is
// confined and ready.
func startRunner(job Job) (*runner, error) {
	host, child, err := SocketPair()
	if err != nil {
		return nil, err
	}
	defer child.Close()
	c := exec.Command("/proc/self/exe")
	c.Args = []string{RunnerName}
	c.Dir = "/"
	c.Env = []string{}
	c.ExtraFiles = []*os.File{child}
	c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID, Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		host.Close()
		return nil, fmt.Errorf("starting the runner: %w", err)
	}
	r := &runner{cmd: c, sock: host, conn: NewConn(int(host.Fd()))}
	job.Argv = []string{"-"} // the session's job; each exec names its command
	var res Response
	if err := r.conn.Send(Request{Op: "start", Job: &job}); err != nil {
		r.discard()
		return nil, fmt.Errorf("starting the runner: %w", err)
	}
	if _, err := r.conn.Recv(&res); err != nil || res.Err != nil {
		r.discard()
		if err == nil {
			err = res.Err.Error()
		}
		return nil, fmt.Errorf("starting the runner: %w", err)
	}
	return r, nil
}

// discard kills the runner (its namespace goes with it) and reaps it.
func (r *runner) discard() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.sock.Close()
}

// run hands one command to the runner and waits for its status. ok is
// false when the runner went away (killed on timeout or cancel, or it
// died): the runner is then of no further use.
func (r *runner) run(id uint64, job *Job, passed []*os.File) (res Response, ok bool, err error) {
	if err := r.conn.Send(Request{ID: id, Op: "exec", Job: job}, passed...); err != nil {
		return res, false, err
	}
	closeFiles(passed) // the runner has its copies
	if _, err := r.conn.Recv(&res); err != nil {
		return res, false, nil
	}
	return res, !res.Done, nil
}
