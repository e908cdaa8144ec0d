package session

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/hostfs"
	"github.com/hutchsandbox/hutch/internal/sysprog"
	"github.com/hutchsandbox/hutch/internal/wire"
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
// per command. A command cannot raise the runner's limits, but it can
// lower them (or its priority) from outside: the runner then retires after
// that command (see runnerState), so nothing a command does to it binds
// the next one. A timeout or cancel kills the runner itself, which ends
// its namespace; the next command gets a fresh runner. The init lends
// the runner to the host (lendRunner), which then sends it commands and
// kills it itself; while it is busy, a concurrent command goes to the
// init and takes the exec helper path.

// runnerMinOpenFiles is the smallest open-files limit under which a runner
// still has the descriptors it needs for itself; below it, commands take
// the exec helper path, where the limit binds the command alone.
const runnerMinOpenFiles = 64

// RunnerMain serves commands on fd 3: first a "start" request carrying the
// session's job, answered once the runner is confined; then one "exec"
// request per command with its three standard streams, answered with the
// command's status when it and everything it started have ended, or at
// once with an error when the command's directory is not one the file
// tools reach. The peer is the init, and then the host it lends the
// runner to.
func RunnerMain() int {
	runtime.LockOSThread()      // confinement is per thread: start commands from this one
	sysprog.PrepareCommandOOM() // while its /proc files are still its own
	sysprog.HoldInitTasks()     // while it may still see the init
	unreachable()
	// One command at a time, from this locked thread: calls on the socket
	// block it rather than go through the poller.
	conn := wire.NewBlockingConn(3)
	req, ok := recvStart(conn)
	if !ok {
		return 1
	}
	job := *req.Job
	if err := useSupervisor(); err != nil {
		_ = conn.Send(wire.Response{ID: req.ID, Err: wire.ToWire(err)})
		return 1
	}
	if err := sysprog.Confine(job); err != nil {
		_ = conn.Send(wire.Response{ID: req.ID, Err: wire.ToWire(fmt.Errorf("confining the runner: %w", err))})
		return 1
	}
	clean, err := readRunnerState()
	if err != nil {
		_ = conn.Send(wire.Response{ID: req.ID, Err: wire.ToWire(fmt.Errorf("reading the runner's state: %w", err))})
		return 1
	}
	// The file tools' guard, for the commands' directories: a runner lent
	// to the host (see lendRunner) is handed them as the host names them.
	files, err := hostfs.New(job.Policy.Dir, nil)
	if err != nil {
		_ = conn.Send(wire.Response{ID: req.ID, Err: wire.ToWire(fmt.Errorf("the runner's start directory: %w", err))})
		return 1
	}
	if err := conn.Send(wire.Response{ID: req.ID}); err != nil {
		return 1
	}
	for {
		var r wire.Request
		passed, err := conn.Recv(&r)
		if err != nil {
			return 0 // the init let go of this runner
		}
		if r.Job != nil {
			// Before it is taken: a directory that is not there is an
			// answer, and the command never starts.
			if r.Job.Dir, err = commandDir(files, r.Job.Dir); err != nil {
				wire.CloseFiles(passed)
				if err := conn.Send(wire.Response{ID: r.ID, Err: wire.ToWire(err)}); err != nil {
					return 0
				}
				continue
			}
		}
		if err := conn.Send(wire.Response{ID: r.ID, Taken: true}); err != nil {
			return 0
		}
		res := runOne(job, r, passed)
		res.Done = retiring(job)
		if err := conn.Send(res); err != nil || res.Done {
			return 0
		}
		// runOne ended every process of this namespace, and no other can
		// reach the runner: its state cannot change before the next
		// command. So it is checked here, after the answer, off the
		// command's path; a runner that was changed leaves without taking
		// another command, and says so with its exit status.
		if !clean.intact() {
			return runnerRetired
		}
	}
}

// runnerRetired is the runner's exit status when it left, after answering,
// because a command changed it: the command the init sent it next (if
// any) never ran, and goes to a fresh runner. The init learns that from
// the missing Taken, not from this status, which is for whoever reads a
// runner's end.
const runnerRetired = 3

// droppedSignals are the signals dropSignals catches: every one the Go
// runtime would die of, or keep ignored from its parent, or leave at a
// default that stops a process. The rest (SIGCHLD, SIGURG, SIGWINCH,
// SIGPIPE...) the runtime already survives, and catching them would cost
// a wake-up each: a runner gets a SIGCHLD for every command.
var droppedSignals = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGABRT,
	syscall.SIGBUS, syscall.SIGFPE, syscall.SIGSEGV, syscall.SIGTERM, syscall.SIGSTKFLT, syscall.SIGSYS,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGVTALRM,
	syscall.SIGPROF, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
}

// dropSignals catches every signal that could end or stop a helper and
// drops it. Commands share the PID
// namespace of the helper that started them, and PID 1 gets every signal
// they send it (but SIGKILL and SIGSTOP, which the kernel keeps from it)
// that it handles: unless relayed to a channel, the Go runtime dies of a
// SIGSEGV, SIGBUS, SIGABRT, SIGSYS... sent with kill(2), or SIGTERM, and
// the command would die with it. Caught, not ignored: a caught signal is
// back at its default in the commands (exec resets it), an ignored one
// would stay ignored — and the Go runtime keeps SIGHUP and SIGINT ignored
// when the process started so (hutch run under nohup, say), so catching
// them is also what gives commands their default. A fault of the
// helper's own code is still a crash: the runtime tells the two apart.
func dropSignals() {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, droppedSignals...)
	go func() {
		for range sigs {
		}
	}()
}

// runOne runs one command of the session and ends whatever it started.
func runOne(job wire.Job, r wire.Request, passed []*os.File) wire.Response {
	defer wire.CloseFiles(passed)
	res := wire.Response{ID: r.ID}
	if r.Op != "exec" || r.Job == nil || len(r.Job.Argv) == 0 || len(passed) != 3 {
		res.Err = wire.ToWire(errors.New("runner: exec needs a command and three pipes"))
		return res
	}
	job.Argv, job.Env, job.Dir = r.Job.Argv, r.Job.Env, r.Job.Dir
	prog, st, ok := FindProgram(job, passed[2])
	if ok {
		// The runner's copies of the streams close once the command runs:
		// the host then sees end-of-file when the command's side closes.
		st, err := startAndReap(job, prog, passed[0], passed[1], passed[2], func() { wire.CloseFiles(passed) })
		endAll()
		if err != nil {
			res.Err = wire.ToWire(err)
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
func retiring(job wire.Job) bool {
	return CPUHalfUsed(time.Duration(job.Policy.Limits.CPUTime))
}

// CPUHalfUsed reports whether this process has used half of limit in CPU
// time (user and system); never for no limit (0), always when its usage
// cannot be read.
func CPUHalfUsed(limit time.Duration) bool {
	if limit <= 0 {
		return false
	}
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return true
	}
	used := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return used >= limit/2
}

// runnerState is what of the runner a command can change from outside
// and the next command would inherit. A command runs as the runner's own
// user, so without any capability it may still lower the runner's
// resource limits (prlimit), raise the nice value, change the scheduling
// policy, utilization clamps and CPU affinity of the thread that starts
// commands (setpriority, sched_setattr, sched_setaffinity), lower its I/O
// priority (ioprio_set), and, where Landlock does not keep it from
// writing /proc, raise its OOM score or its autogroup's nice value. None
// of that lets it out of the sandbox, but it would bind every later
// command of the session (a lowered open-files limit even keeps the runner
// from taking the next command's streams). So the runner records its
// state once confined and, after each command, retires when anything
// differs: the next command gets a fresh runner.
type runnerState struct {
	limits   [RunnerLimits]unix.Rlimit
	sched    unix.SchedAttr
	affinity unix.CPUSet
	ioprio   uintptr
	proc     string // oom_score_adj and autogroup
}

// RunnerLimits is the number of resource limits Linux has (RLIMIT_CPU
// through RLIMIT_RTTIME).
const RunnerLimits = unix.RLIMIT_RTTIME + 1

// ReadLimits is this process's resource limits (the runner's and a
// container reaper's state a command may lower). Getrlimit cannot fail
// for these resources; if it did, that limit would read as zero.
func ReadLimits() (l [RunnerLimits]unix.Rlimit) {
	for r := range l {
		_ = unix.Getrlimit(r, &l[r])
	}
	return l
}

// readRunnerState reads the state of the calling thread and its process.
// The thread is the locked one that starts commands: scheduling and I/O
// priority are per thread, and a command inherits them from it.
func readRunnerState() (runnerState, error) {
	st := runnerState{limits: ReadLimits()}
	switch attr, err := unix.SchedGetAttr(0, 0); {
	case err == nil:
		st.sched = *attr
	case errors.Is(err, unix.ENOSYS): // before Linux 3.14: the nice value alone
		nice, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
		if err != nil {
			return st, fmt.Errorf("priority: %w", err)
		}
		st.sched.Nice = int32(nice)
	default:
		return st, fmt.Errorf("scheduling: %w", err)
	}
	if err := unix.SchedGetaffinity(0, &st.affinity); err != nil {
		return st, fmt.Errorf("CPU affinity: %w", err)
	}
	const ioprioWhoProcess = 1
	prio, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, 0, 0)
	if errno != 0 {
		return st, fmt.Errorf("I/O priority: %w", errno)
	}
	st.ioprio = prio
	for _, f := range []string{"/proc/self/oom_score_adj", "/proc/self/autogroup"} {
		b, err := boundary.ReadKernelFile(f)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return st, err
		}
		st.proc += string(b) + "\x00"
	}
	return st, nil
}

// intact reports whether the runner's state is still st. A state that
// cannot be read (a lowered open-files limit, say) is not intact.
func (st runnerState) intact() bool {
	now, err := readRunnerState()
	return err == nil && now == st
}

// runner is the init's handle on one runner process.
type runner struct {
	cmd  *exec.Cmd
	conn *wire.Conn
}

// useRunner reports whether this session's commands may go through a
// runner at all.
func useRunner(job wire.Job) bool {
	l := job.Policy.Limits.OpenFiles
	return l == 0 || l >= runnerMinOpenFiles
}

// startRunner starts a runner for the session and waits until it is
// confined and ready.
func startRunner(job wire.Job) (*runner, error) {
	host, child, err := wire.SocketPair()
	if err != nil {
		return nil, err
	}
	c := exec.Command("/proc/self/exe")
	c.Args = []string{boundary.RunnerName}
	c.Dir = "/"
	c.Env = helperEnv()
	c.ExtraFiles = supervisorFiles(groupExtraFiles(job, []*os.File{child}))
	c.SysProcAttr = helperAttrs()
	err = c.Start()
	// The runner has its copy: with this one closed, a runner that dies
	// before it answers (a Go runtime that cannot make a thread under an
	// outer pids limit) is EOF below, not a wait until the timeout.
	child.Close()
	if err != nil {
		host.Close()
		return nil, fmt.Errorf("starting the runner: %w", err)
	}
	conn, err := wire.FileConn(host)
	if err != nil {
		_ = c.Process.Kill()
		_ = c.Wait()
		return nil, fmt.Errorf("starting the runner: %w", err)
	}
	r := &runner{cmd: c, conn: conn}
	job.Argv = []string{"-"} // the session's job; each exec names its command
	var res wire.Response
	if err := r.conn.Send(wire.Request{Op: "start", Job: &job}); err != nil {
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
	_ = r.conn.Close()
}
