package sysprog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/nofile"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// OneShot is what RunOnce takes besides its job and streams; the zero
// value is a run with none of it.
type OneShot struct {
	// Groups are files of control groups (a v1 tasks file, a
	// cgroup.procs) the sandbox's PID 1 writes itself into once its
	// namespaces and id maps are set, before it builds the root or starts
	// anything. They hold a process until Exited is called. The caller
	// closes the files.
	Groups []*os.File
	// Timeout, when positive, kills the whole sandbox once it passes.
	Timeout time.Duration
	// Proc, when set, is the walk of /proc for this run's root, started
	// ahead (WalkProcAhead).
	Proc *ProcWalk
	// Exited, when set, is called once no process of the sandbox is
	// left: its PID 1 has been reaped, or was never started. That is
	// before RunOnce returns, except after a command that ended and was
	// reported: PID 1's own exit (which waits for its namespace to empty)
	// then comes after, and Exited is called from a goroutine of its own,
	// so that the caller is not held up. Exactly once either way.
	Exited func()
}

// exited calls o.Exited, if set.
func (o OneShot) exited() {
	if o.Exited != nil {
		o.Exited()
	}
}

// RunOnce runs job's command once in a fresh sandbox built from its policy
// and tears the sandbox down: the fast path of a one-shot run, with no
// helper process to start and nothing to serve.
//
// This process forks itself with the sandbox's namespaces; the child runs
// a program of system calls fixed in advance (see program): it builds
// the root, confines itself exactly as the init's path does, becomes the
// PID 1 that starts the command and reaps everything, and reports how
// the command ended on a pipe. Nothing of the Go runtime runs in the
// child, so it costs one fork rather than one process start of this
// binary. opt says which control groups the child joins; its command is
// born in them (see OneShot).
//
// The policy's network must be none or all (an allow-list needs the
// init's bridge: use a session). opt.Timeout, when positive, kills the
// whole sandbox; so does ctx. timedOut reports the former. err is for a sandbox
// that could not be built or run (ErrUnsupported, with the reason) or a
// cancelled ctx; what the command did is in the Status.
func RunOnce(ctx context.Context, job wire.Job, stdin, stdout, stderr *os.File, opt OneShot) (st wire.Status, timedOut bool, err error) {
	// Exited is called on return unless a PID 1 outlives it (handedOn).
	handedOn := false
	defer func() {
		if !handedOn {
			opt.exited()
		}
	}()
	groups, timeout := opt.Groups, opt.Timeout
	if len(job.Argv) == 0 {
		return st, false, fmt.Errorf("%w: no command", sandbox.ErrConfig)
	}
	if job.Policy.Network == policy.NetworkAllow {
		return st, false, fmt.Errorf("%w: a network allow-list needs a sandbox session", sandbox.ErrConfig)
	}
	if NeedsSupervision(job.Policy) {
		// This PID 1 runs no Go: it has no supervisor to give.
		return st, false, fmt.Errorf("%w: %w", sandbox.ErrUnsupported, ErrNeedsSupervisor)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return st, false, err
	}
	defer statusR.Close()
	defer statusW.Close()

	b := newBuilder()
	b.procAhead = opt.Proc
	fd := func(f *os.File) uint8 { return b.preset(f.Fd()) }
	sIn, sOut, sErr, sStatus := fd(stdin), fd(stdout), fd(stderr), fd(statusW)
	// While the walk of /proc still runs, PID 1 builds the root from the
	// list of this process's last walk and then waits at a gate, before
	// anything of the command: this process lets it through once its own
	// walk has listed the same entries, and sends it away otherwise (a
	// new PID 1 is then built from the new list; a failed walk fails the
	// run). The walk so runs beside the fork and the root's build.
	withHostNet := job.Policy.Network == policy.NetworkAll
	guess, gated := opt.Proc.guess(withHostNet)
	var gateR, gateW *os.File
	if gated {
		if gateR, gateW, err = os.Pipe(); err != nil {
			return st, false, err
		}
		defer gateR.Close()
		defer gateW.Close()
		b.procAhead = walked(job.Policy, guess) // the root hides the guess
		guessedRuns.Add(1)
		b.close(b.preset(gateW.Fd())) // the gate closes when this process's end does
	}
	// Die with this thread, and with this process should it already be
	// gone by then (the death signal only covers a death after it is set):
	// the child's copy of life's write end is closed, so its read end
	// reports a hang-up unless this process still holds its own.
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return st, false, err
	}
	defer lifeR.Close()
	defer lifeW.Close()
	b.call("parent death signal", unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
	b.hostAlive(lifeR.Fd(), lifeW.Fd())
	// The sandbox's root is the caller's uid and gid, its only ids (a
	// process may map its own ids).
	b.writeFile("/proc/self/uid_map", fmt.Appendf(nil, "0 %d 1\n", job.HostUID), 0)
	b.writeFile("/proc/self/setgroups", []byte("deny"), 0)
	b.writeFile("/proc/self/gid_map", fmt.Appendf(nil, "0 %d 1\n", job.HostGID), 0)
	// Into the control groups before the root is built or anything
	// started: this process writes itself ("0") into each group's file.
	for _, g := range groups {
		s := fd(g)
		b.call("joining the sandbox's control groups", unix.SYS_WRITE, 0, b.str("0"), 1).in[0] = s
		b.close(s)
	}
	// A cgroup namespace rooted where this process now is, in the
	// sandbox's own groups: /proc shows them as "/", never a host path.
	b.call("new cgroup namespace", unix.SYS_UNSHARE, unix.CLONE_NEWCGROUP)
	b.call("new session", unix.SYS_SETSID)
	b.retitle(boundary.InitName)
	// Every protected path was there a moment ago (NeedsSupervision): one
	// that goes missing before the mounts are made fails the run.
	b.strictProtect = true
	if err := b.root(job.Policy, job.Quotas); err != nil {
		return st, false, fmt.Errorf("%w: building the sandbox: %v", sandbox.ErrUnsupported, err)
	}
	gateOp := -1
	if gated {
		g, got := fd(gateR), b.slot()
		o := b.call("waiting for the walk of /proc", unix.SYS_READ, 0, ptr(b, new(byte)), 1)
		o.in[0], o.out = g, got
		gateOp = b.mark()
		b.expect("waiting for the walk of /proc", got, 1)
		b.close(g)
	}
	dirOp := b.mark()
	b.call("start directory "+job.Dir, unix.SYS_CHDIR, b.str(job.Dir))
	// The command's streams on 0, 1, 2; the status pipe on 3 (closed at
	// exec); nothing else of this process.
	low := []uint8{sIn, sOut, sErr, sStatus}
	high := make([]uint8, len(low))
	for i, s := range low {
		high[i] = b.slot()
		o := b.call("standard streams", unix.SYS_FCNTL, 0, unix.F_DUPFD_CLOEXEC, 10)
		o.in[0], o.out = s, high[i]
	}
	for i := range 3 {
		b.call("standard streams", unix.SYS_DUP3, 0, uintptr(i), 0).in[0] = high[i]
	}
	o := b.call("status pipe", unix.SYS_DUP3, 0, 3, unix.O_CLOEXEC)
	o.in[0], o.out = high[3], sStatus
	b.call("closing inherited descriptors", unix.SYS_CLOSE_RANGE, uintptr(len(low)), ^uintptr(0)>>32, 0)
	// The command's strings live with the program, which refuses any with
	// a NUL byte.
	x := newOneShotExec(b, job, sStatus)
	oomOps(b, x) // while PID 1 may still open its own /proc files
	// Out of the command's reach: not dumpable (no /proc access to this
	// PID 1), and every signal stays blocked here.
	b.call("not dumpable", unix.SYS_PRCTL, unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if err := confineOps(b, job); err != nil {
		return st, false, fmt.Errorf("%w: confining the command: %v", sandbox.ErrUnsupported, err)
	}
	p, err := b.build()
	if err != nil {
		return st, false, fmt.Errorf("%w: %v", sandbox.ErrConfig, err)
	}

	flags := boundary.CloneFlags(job.Policy.Network == policy.NetworkAll)
	// The child dies with this thread (PR_SET_PDEATHSIG): keep it until
	// the child is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The child shares none of the heap it does not use (see wipePlan);
	// no other fork of this process comes while it is marked.
	plan := heapPlan(p, x)
	syscall.ForkLock.Lock()
	pid, errno := forkBlocked(flags, p, x, plan)
	syscall.ForkLock.Unlock()
	if plan != nil && plan.applied {
		forksWiped.Add(1)
	}
	if plan != nil && plan.stuck {
		stuck.Store(true)
	}
	runtime.KeepAlive(p)
	runtime.KeepAlive(x)
	if errno != 0 {
		return st, false, fmt.Errorf("%w: creating the sandbox's namespaces: %v", sandbox.ErrUnsupported, errno)
	}
	statusW.Close()
	child := int(pid)
	var walkErr error
	again := false // the guess was wrong: a new PID 1 for the new list
	if gated {
		gateR.Close()
		hostOnly, err := opt.Proc.result(withHostNet)
		switch {
		case err != nil:
			walkErr = err
		case slices.Equal(hostOnly, guess):
			_, _ = gateW.Write([]byte{1}) // a PID 1 already gone gets nothing
		default:
			again = true
		}
		gateW.Close()
	}
	var killed atomic.Bool
	kill := func() { _ = unix.Kill(child, unix.SIGKILL) }
	reap := func() (unix.WaitStatus, error) {
		var ws unix.WaitStatus
		for {
			_, err := unix.Wait4(child, &ws, 0, nil)
			if !errors.Is(err, unix.EINTR) {
				return ws, err
			}
		}
	}
	defer context.AfterFunc(ctx, kill)()
	var timer *time.Timer
	if timeout > 0 {
		timer = time.AfterFunc(timeout, func() { killed.Store(true); kill() })
	}
	var rec oneShotRecord
	_, readErr := io.ReadFull(statusR, unsafe.Slice((*byte)(unsafe.Pointer(&rec)), unsafe.Sizeof(rec)))
	if timer != nil {
		timer.Stop()
	}
	var ws unix.WaitStatus
	var werr error
	// PID 1 stopped at the gate: sent away by a failed walk or a wrong
	// guess (again).
	atGate := readErr == nil && rec.Kind == recSetup && int(rec.Op) == gateOp
	retry := atGate && again
	if readErr == nil && !retry {
		// PID 1 has killed everything else and reported; its own exit
		// (which also waits for its namespace to empty) need not hold
		// the caller up.
		handedOn = true
		go func() {
			_, _ = reap()
			opt.exited()
		}()
	} else {
		ws, werr = reap() // a retry, too, starts once this PID 1 is gone
	}
	switch {
	case killed.Load() && readErr != nil:
		return wire.Status{Signal: int(unix.SIGKILL)}, true, nil
	case ctx.Err() != nil && readErr != nil:
		return st, false, ctx.Err()
	case readErr != nil:
		if werr == nil && ws.Signaled() {
			return st, false, fmt.Errorf("%w: the sandbox's PID 1 was killed by %s before the command ended", sandbox.ErrClosed, unix.SignalName(ws.Signal()))
		}
		return st, false, fmt.Errorf("%w: the sandbox ended without a status: %v", sandbox.ErrClosed, readErr)
	case atGate && walkErr != nil:
		return st, false, fmt.Errorf("%w: building the sandbox: %v", sandbox.ErrUnsupported, walkErr)
	case retry:
		// The walk has ended: the new run has no guess to make, and calls
		// Exited itself.
		handedOn = true
		return RunOnce(ctx, job, stdin, stdout, stderr, opt)
	case rec.Kind == recSetup:
		if rec.Op < 0 {
			return st, false, fmt.Errorf("%w: starting the command: %v", sandbox.ErrUnsupported, syscall.Errno(rec.Errno))
		}
		kind := sandbox.ErrUnsupported
		if int(rec.Op) == dirOp {
			kind = sandbox.ErrNotFound
		}
		return st, false, fmt.Errorf("%w: building the sandbox: %v", kind, p.failure(int(rec.Op), uintptr(rec.Errno)))
	}
	return statusOf(unix.WaitStatus(rec.Status), &rec.Rusage), false, nil
}

// guessedRuns counts the one-shots whose root was built from a guess of
// the walk of /proc (see RunOnce's gate).
var guessedRuns atomic.Int64

// retitle appends overwriting this process's command line (a fork's is
// its parent's: hutch's own arguments) with title, as /proc shows it.
// Nothing is done where the kernel does not say where it is.
func (b *builder) retitle(title string) {
	area, ok := argArea()
	start, end := area[0], area[1]
	if !ok || end <= start || end-start > 1<<20 {
		return
	}
	buf := make([]byte, end-start) // the title, NUL-padded
	copy(buf[:len(buf)-1], title)
	b.writeFile("/proc/self/mem", buf, start)
}

// argArea is where this process's arguments are in memory (fields 48 and
// 49 of /proc/self/stat).
var argArea = sync.OnceValues(func() (area [2]uintptr, ok bool) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return area, false
	}
	f, ok := boundary.StatFields(stat, 49)
	if !ok {
		return area, false
	}
	s, err1 := strconv.ParseUint(f[48-3], 10, 64)
	e, err2 := strconv.ParseUint(f[49-3], 10, 64)
	return [2]uintptr{uintptr(s), uintptr(e)}, err1 == nil && err2 == nil
})

// hostAlive appends closing this process's copy of descriptor w and
// failing unless another process (the host) still holds it open: r, the
// pipe's read end, then reports no hang-up.
func (b *builder) hostAlive(r, w uintptr) {
	b.close(b.preset(w))
	alive, poll := b.slot(), &unix.PollFd{Fd: int32(r), Events: unix.POLLIN}
	b.call("checking the host is alive", unix.SYS_PPOLL, ptr(b, poll), 1, ptr(b, &unix.Timespec{}), 0, 0).out = alive
	b.expect("checking the host is alive", alive, 0)
}

// writeFile appends writing data at offset off of the file at path
// (which exists): with write(2) at offset 0, since some /proc files
// (uid_map) refuse pwrite; with pwrite(2) elsewhere.
func (b *builder) writeFile(path string, data []byte, off uintptr) {
	fd := b.slot()
	what := "writing " + path
	b.call(what, unix.SYS_OPENAT, cwd, b.str(path), unix.O_WRONLY|unix.O_CLOEXEC).out = fd
	b.p.keep = append(b.p.keep, data)
	nr := uintptr(unix.SYS_PWRITE64)
	if off == 0 {
		nr = unix.SYS_WRITE
	}
	b.call(what, nr, 0, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), off).in[0] = fd
	b.close(fd)
}

// What the sandbox's PID 1 reports on the status pipe.
const (
	recEnded = 1 + iota // the command ended: Status and Rusage
	recSetup            // the sandbox could not be built: Op and Errno
)

type oneShotRecord struct {
	Kind   int32
	Op     int32 // the failing op; -1 when starting the command failed
	Errno  int64
	Status int32 // the command's wait status
	_      int32
	Rusage unix.Rusage
}

// oneShotExec is what the child needs to start the command, ready for
// raw system calls: the one-shot's PID 1 (newOneShotExec) and a helper's
// spawn use it.
type oneShotExec struct {
	// mark is execMark in exec data made by newCommandExec: a child that
	// finds anything else (memory it was not given: see heapPlan) starts
	// nothing.
	mark   uint64
	status uint8 // the program's slot of the status pipe
	// group is a file of the commands' group (cgroup.procs, or a thread
	// file for a single-threaded child) the child writes itself into
	// first; -1 for none.
	group int
	// count is the group's pids.current, read once the child is in the
	// group: more than maxProcs there and the command does not run. -1
	// for none.
	count    int
	maxProcs uint64
	full     []byte // what the child says when the group is full
	buf      [24]byte
	// stdio are descriptors the child moves to 0, 1 and 2 (each is above
	// 2); -1 leaves that one as it is.
	stdio [3]int32
	dir   uintptr // the directory the child enters; 0 for none
	// setsid has the child start a session of its own.
	setsid bool
	// paths are the command's candidate files, tried in order (a PATH
	// search done by execve itself, inside the sandbox).
	paths      []uintptr
	argv, envp []uintptr
	// rlimits are set in turn, each when its Max > 0: RLIMIT_DATA (the
	// memory limit without a cgroup), then RLIMIT_NOFILE (the soft limit
	// hutch started with, which Go raised for itself: startOpenFiles).
	rlimits [2]rlimitStep
	// prefix opens the line written when no candidate could run.
	prefix  []byte
	errText [][]byte // errnoText
	rec     oneShotRecord
	dfl     [4]uintptr // a struct sigaction with SIG_DFL
	empty   uint64     // an empty signal set
	// PID 1's own oom_score_adj, in slot oomSlot, gets oomHigh for the
	// fork of the command and oomOrig back after it (see oomOps); empty
	// when not set up.
	oomSlot          uint8
	oomHigh, oomOrig []byte
	// supervise, when set, makes the command a supervised one (see
	// superviseSelf).
	supervise *superviseStep
}

func newOneShotExec(b *builder, job wire.Job, status uint8) *oneShotExec {
	x := newCommandExec(b.str, job, tierkit.Candidates(job.Argv[0], job.PathEnv(), job.Dir))
	x.status = status
	return x
}

// newCommandExec is what a child needs to start job's command from the
// candidate files paths, with the job's memory rlimit when no cgroup
// bounds memory; no group, streams as they are, no directory change.
// str keeps a NUL-terminated copy of a string and returns its address.
func newCommandExec(str func(string) uintptr, job wire.Job, paths []string) *oneShotExec {
	x := &oneShotExec{mark: execMark, group: -1, count: -1, stdio: [3]int32{-1, -1, -1}, prefix: []byte("hutch: " + job.Argv[0] + ": "), errText: errnoText()}
	for _, c := range paths {
		x.paths = append(x.paths, str(c))
	}
	for _, a := range job.Argv {
		x.argv = append(x.argv, str(a))
	}
	x.argv = append(x.argv, 0)
	for _, e := range job.Env {
		x.envp = append(x.envp, str(e))
	}
	x.envp = append(x.envp, 0)
	// EPERM on the memory limit: the hard limit in force is lower than
	// asked (raising it takes a capability), which binds the command
	// more, not less. A lower soft open-files limit under the same hard
	// one is never refused.
	x.rlimits = [2]rlimitStep{
		{resource: unix.RLIMIT_DATA, failed: limitFailed, tolerate: unix.EPERM},
		{resource: unix.RLIMIT_NOFILE, failed: filesFailed},
	}
	if l := job.Policy.Limits; l.Memory > 0 && !job.MemoryByCgroup {
		x.rlimits[0].lim = unix.Rlimit{Cur: uint64(l.Memory), Max: uint64(l.Memory)}
	}
	if job.Policy.Limits.OpenFiles == 0 {
		x.rlimits[1].lim, _ = startOpenFiles()
	}
	return x
}

// execMark marks exec data as whole (oneShotExec.mark).
const execMark = 0x6875746368_657865 // "hutchexe"

// rlimitStep is a resource limit a command's child sets on itself.
type rlimitStep struct {
	resource uintptr
	lim      unix.Rlimit // set when Max > 0
	failed   []byte      // what the child says when it cannot
	tolerate syscall.Errno
}

// startOpenFiles is the open-files limit a command gets when its policy
// sets none: the soft limit this process started with, under the hard
// limit in force. Package syscall's init raised the soft one to the hard
// one less one for this process; os/exec puts the original back in its
// children, and this does the same for the children hutch forks itself,
// on the same test as os/exec's: the limit is still what syscall set (the
// soft limit the hard one less one, the hard one as at the start). ok is
// false when there is nothing to put back: the start limit is unknown
// (see package nofile), was not lower, or someone has set the limit
// since.
func startOpenFiles() (unix.Rlimit, bool) {
	soft, hard, ok := nofile.Start()
	var now unix.Rlimit
	if !ok || unix.Getrlimit(unix.RLIMIT_NOFILE, &now) != nil || now.Max != hard || now.Cur != now.Max-1 || soft >= now.Cur {
		return unix.Rlimit{}, false
	}
	return unix.Rlimit{Cur: soft, Max: now.Max}, true
}

// errnoText holds the text of each errno, for the child's message.
var errnoText = sync.OnceValue(func() [][]byte {
	t := make([][]byte, 134)
	for i := range t {
		t[i] = []byte(syscall.Errno(i).Error())
	}
	return t
})

// forkBlocked forks this process with flags, all signals blocked around
// the fork (the child keeps them blocked), and runs the sandbox's PID 1
// in the child.
func forkBlocked(flags uintptr, p *program, x *oneShotExec, w *wipePlan) (uintptr, syscall.Errno) {
	old, e := blockSignals()
	if e != 0 {
		return 0, e
	}
	pid, errno := forkChild(flags, p, x, w)
	setSignalMask(old)
	return pid, errno
}

// blockSignals blocks every signal on the calling thread (locked to its
// goroutine) and returns the mask it had.
func blockSignals() (old uint64, e syscall.Errno) {
	all := ^uint64(0)
	_, e = sys6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&all)), uintptr(unsafe.Pointer(&old)), 8, 0, 0)
	return old, e
}

// setSignalMask sets the calling thread's signal mask to m.
func setSignalMask(m uint64) {
	sys6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&m)), 0, 8, 0, 0)
}

// forkChild is the fork itself, with plan w when there is one. The child
// never returns from it.
//
//go:nosplit
//go:norace
func forkChild(flags uintptr, p *program, x *oneShotExec, w *wipePlan) (uintptr, syscall.Errno) {
	wiped := w != nil && w.apply(here())
	r, e := sys6(unix.SYS_CLONE, flags|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	if e != 0 || r != 0 {
		if wiped {
			w.stuck = !w.clear()
			w.applied = e == 0
		}
		return r, e
	}
	sandboxPID1(p, x)
	return 0, 0
}

// sandboxPID1 is the child: it runs the program (root, confinement), then
// starts the command, reaps every process until the command ends, kills
// what is left, reports, and exits. Raw system calls only.
//
//go:nosplit
//go:norace
func sandboxPID1(p *program, x *oneShotExec) {
	if x.mark != execMark {
		report(p, x, recSetup, -1, uintptr(unix.EINVAL))
	}
	if i, e := p.run(); i >= 0 {
		report(p, x, recSetup, int32(i), e)
	}
	oomWrite(p, x, x.oomHigh) // the command is the OOM killer's first choice
	cmd, e := spawnCommand(x)
	oomWrite(p, x, x.oomOrig) // this PID 1 is not
	if e != 0 {
		report(p, x, recSetup, -1, e)
	}
	for {
		r, e := sys6(unix.SYS_WAIT4, ^uintptr(0), uintptr(unsafe.Pointer(&x.rec.Status)), 0, uintptr(unsafe.Pointer(&x.rec.Rusage)), 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 || r == cmd {
			break
		}
	}
	sys6(unix.SYS_KILL, ^uintptr(0), uintptr(unix.SIGKILL), 0, 0, 0, 0)
	// Its copies of the command's streams: the host sees end-of-file
	// once the killed processes are gone, without waiting for this exit.
	for fd := uintptr(0); fd < 3; fd++ {
		sys6(unix.SYS_CLOSE, fd, 0, 0, 0, 0, 0)
	}
	report(p, x, recEnded, 0, 0)
}

// oomWrite writes v to PID 1's oom_score_adj, when there is one.
//
//go:nosplit
//go:norace
func oomWrite(p *program, x *oneShotExec, v []byte) {
	if len(x.oomHigh) > 0 && len(v) > 0 {
		sys6(unix.SYS_PWRITE64, p.slots[x.oomSlot], uintptr(unsafe.Pointer(&v[0])), uintptr(len(v)), 0, 0, 0)
	}
}

// report writes the record on the status pipe and exits.
//
//go:nosplit
//go:norace
func report(p *program, x *oneShotExec, kind, op int32, errno uintptr) {
	x.rec.Kind, x.rec.Op, x.rec.Errno = kind, op, int64(errno)
	sys6(unix.SYS_WRITE, p.slots[x.status], uintptr(unsafe.Pointer(&x.rec)), unsafe.Sizeof(x.rec), 0, 0, 0)
	code := uintptr(0)
	if kind != recEnded {
		code = 1
	}
	for {
		sys6(unix.SYS_EXIT_GROUP, code, 0, 0, 0, 0, 0)
	}
}

// startCommand is the command's process: default signal dispositions,
// nothing blocked, into the commands' group, a session of its own, its
// streams and directory (each when x asks), its memory rlimit and the
// open-files limit hutch started with (x.rlimits), then execve of each
// candidate in turn. Every step the command relies on comes before it
// runs a single instruction. It returns only when a step fails or no
// candidate runs, with what its caller gives childExit: what failed and
// the shell's 127 (not found) or 126.
//
//go:nosplit
//go:norace
func startCommand(x *oneShotExec) (what []byte, e syscall.Errno, code uintptr) {
	if x.mark != execMark {
		return nil, unix.EINVAL, 126
	}
	for sig := uintptr(1); sig <= 64; sig++ {
		if sig != uintptr(unix.SIGKILL) && sig != uintptr(unix.SIGSTOP) {
			sys6(unix.SYS_RT_SIGACTION, sig, uintptr(unsafe.Pointer(&x.dfl)), 0, 8, 0, 0)
		}
	}
	sys6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&x.empty)), 0, 8, 0, 0)
	// The streams first (this runs nothing of the command's): whatever
	// fails after says why on the command's own stderr.
	for i := uintptr(0); i < 3; i++ {
		if fd := x.stdio[i]; fd >= 0 {
			if _, e := sys6(unix.SYS_DUP3, uintptr(fd), i, 0, 0, 0, 0); e != 0 {
				return streamsFailed, e, 126
			}
		}
	}
	if x.group >= 0 {
		// Into the commands' group before anything runs; never outside.
		if _, e := sys6(unix.SYS_WRITE, uintptr(x.group), uintptr(unsafe.Pointer(&zero[0])), 1, 0, 0, 0); e != 0 {
			return groupFailed, e, 126
		}
	}
	if x.count >= 0 && x.maxProcs > 0 {
		// A move into a group is not held to its limit: see that this one
		// did not take the group over it.
		n, e := sys6(unix.SYS_PREAD64, uintptr(x.count), uintptr(unsafe.Pointer(&x.buf[0])), uintptr(len(x.buf)), 0, 0, 0)
		if e != 0 {
			return countFailed, e, 126
		}
		if decimal(&x.buf, n) > x.maxProcs {
			return x.full, unix.EAGAIN, 126
		}
	}
	if x.supervise != nil {
		// Before anything of the command's runs, and while the
		// supervisor's socket is still open.
		s := x.supervise // see superviseFlags
		fd, e := sys6(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, superviseFlags, uintptr(unsafe.Pointer(&s.prog)), 0, 0, 0)
		if e == unix.EINVAL {
			fd, e = sys6(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&s.prog)), 0, 0, 0)
		}
		if e == 0 {
			*(*int32)(unsafe.Pointer(uintptr(unsafe.Pointer(unsafe.SliceData(s.oob))) + s.fdAt)) = int32(fd)
			_, e = sys6(unix.SYS_SENDMSG, s.sock, uintptr(unsafe.Pointer(&s.msg)), unix.MSG_NOSIGNAL, 0, 0, 0)
			sys6(unix.SYS_CLOSE, fd, 0, 0, 0, 0, 0)
		}
		if e != 0 {
			return superviseFailed, e, 126
		}
	}
	if x.stdio[0] >= 0 {
		// The streams' sources, the group's files and anything else
		// still open: a descriptor someone forgot to mark close-on-exec
		// is not the command's.
		if _, e := sys6(unix.SYS_CLOSE_RANGE, 3, ^uintptr(0)>>32, 0, 0, 0, 0); e != 0 {
			return closeFailed, e, 126
		}
	}
	if x.setsid {
		if _, e := sys6(unix.SYS_SETSID, 0, 0, 0, 0, 0, 0); e != 0 {
			return setsidFailed, e, 126
		}
	}
	if x.dir != 0 {
		if _, e := sys6(unix.SYS_CHDIR, x.dir, 0, 0, 0, 0, 0); e != 0 {
			return dirFailed, e, 126
		}
	}
	for i := range x.rlimits { // (range: no bounds check, see execve's below)
		r := &x.rlimits[i]
		if r.lim.Max == 0 {
			continue
		}
		if _, e := sys6(unix.SYS_PRLIMIT64, 0, r.resource, uintptr(unsafe.Pointer(&r.lim)), 0, 0, 0); e != 0 && e != r.tolerate {
			return r.failed, e, 126
		}
	}
	first := uintptr(0)
	// (SliceData and range: no bounds check, whose panic path is deeper
	// than this stack allows.)
	argv, envp := uintptr(unsafe.Pointer(unsafe.SliceData(x.argv))), uintptr(unsafe.Pointer(unsafe.SliceData(x.envp)))
	for _, path := range x.paths {
		_, e := sys6(unix.SYS_EXECVE, path, argv, envp, 0, 0, 0)
		if first == 0 && e != unix.ENOENT && e != unix.ENOTDIR {
			first = uintptr(e)
		}
	}
	if first == 0 {
		// Every candidate said ENOENT: none exists, or one does and its
		// #! interpreter or ELF loader is what is missing.
		for _, path := range x.paths {
			if _, e := sys6(unix.SYS_FACCESSAT, cwd, path, unix.F_OK, 0, 0, 0); e == 0 {
				return noInterpreter, unix.ENOENT, 127
			}
		}
		return notFound, 0, 127
	}
	return nil, syscall.Errno(first), 126
}

// decimal is the unsigned number at the start of buf[:n] (digits only);
// a value too long for buf's 24 bytes reads as more than any limit.
//
//go:nosplit
//go:norace
func decimal(buf *[24]byte, n uintptr) uint64 {
	v := uint64(0)
	for i, c := range buf { // (range: no bounds check, see execve's below)
		if uintptr(i) >= n || c < '0' || c > '9' {
			return v
		}
		v = v*10 + uint64(c-'0')
	}
	if n >= uintptr(len(buf)) {
		return ^uint64(0)
	}
	return v
}

// childExit writes "hutch: ARGV0: " what, the text of errno e (none for
// 0) and a newline on stderr, with one system call, and exits with code.
// It is as shallow as it can be: it runs at the bottom of the chain of
// nosplit calls of a fork's child, whose stack cannot grow.
//
//go:nosplit
//go:norace
//go:noinline
func childExit(x *oneShotExec, what []byte, e syscall.Errno, code uintptr) {
	var text []byte
	if t := x.errText; e != 0 && uintptr(e) < uintptr(len(t)) {
		text = t[e]
	}
	iov := [4]unix.Iovec{
		{Base: unsafe.SliceData(x.prefix), Len: uint64(len(x.prefix))},
		{Base: unsafe.SliceData(what), Len: uint64(len(what))},
		{Base: unsafe.SliceData(text), Len: uint64(len(text))},
		{Base: &newline[0], Len: 1},
	}
	sys6(unix.SYS_WRITEV, 2, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)), 0, 0, 0)
	for {
		sys6(unix.SYS_EXIT_GROUP, code, 0, 0, 0, 0, 0)
	}
}

var (
	newline       = [1]byte{'\n'}
	zero          = [1]byte{'0'} // written to a cgroup's procs or thread file: the writer
	notFound      = []byte("command not found")
	groupFailed   = []byte("cannot join the commands' cgroup: ")
	countFailed   = []byte("cannot read the commands' process count: ")
	noInterpreter = []byte("its interpreter or loader is missing: ")
	closeFailed   = []byte("cannot close inherited descriptors: ")
	setsidFailed  = []byte("cannot start a session: ")
	streamsFailed = []byte("cannot set up its standard streams: ")
	dirFailed     = []byte("cannot enter its directory: ")
	limitFailed   = []byte("cannot set its memory limit: ")
	filesFailed   = []byte("cannot set its open-files limit: ")
)

// childGlobals are this package's variables that what a fork's child
// runs reads through a pointer: heapPlan keeps what they point to (today
// static data, which a plan never touches).
var childGlobals = []*[]byte{&notFound, &groupFailed, &countFailed, &noInterpreter, &closeFailed, &setsidFailed, &streamsFailed, &dirFailed, &limitFailed, &filesFailed, &superviseFailed}
