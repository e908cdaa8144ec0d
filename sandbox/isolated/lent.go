package isolated

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/sandbox"
)

// A session's commands go to a runner the init lends this process: a
// process inside the sandbox, confined once as every command is, that
// starts command after command (docs/isolated.md). This process speaks to
// it directly, over a socket the init passed, instead of through the
// init: a warm exec costs two messages between processes instead of
// four. It enforces each command's timeout itself, by killing the runner
// through a pidfd the init passed with the socket (the runner's PID
// namespace, and so everything the command started, ends with it); the
// init only reaps it. One command at a time: a command that comes while
// the runner is busy, or that a runner could not take, goes to the init.

// lentRunner is the runner the init lent this process.
type lentRunner struct {
	conn  *wire.Conn
	pidfd *os.File
}

// kill kills the runner (everything of its commands goes with it) and
// closes its socket, so that a call waiting on it returns at once. It
// reports whether the kill was delivered: false when the pidfd refused
// it, and the runner may still run.
func (l *lentRunner) kill() bool {
	delivered := false
	if rc, err := l.pidfd.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			err := unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0)
			delivered = err == nil || errors.Is(err, unix.ESRCH) // ESRCH: gone already
		})
	}
	_ = l.conn.Close()
	return delivered
}

// waitGone waits, at most hostGrace, until the runner has exited, and
// reports whether it has: its pidfd turns readable only once the runner,
// PID 1 of its namespace, has seen every other process of the namespace
// killed and reaped. So a command killed on its timeout has nothing left
// running when Exec returns. A pidfd that cannot be polled (closed with
// the session) counts as gone: the session's end ends the runner.
func (l *lentRunner) waitGone() bool {
	rc, err := l.pidfd.SyscallConn()
	if err != nil {
		return true
	}
	gone := true
	if err := rc.Control(func(fd uintptr) { gone = exited(int(fd), hostGrace) }); err != nil {
		return true
	}
	return gone
}

// exited reports whether the process of pidfd has exited, waiting at
// most wait for it (0: not at all). A pidfd that cannot be polled counts
// as exited.
func exited(pidfd int, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		ms := max(0, (time.Until(deadline) + time.Millisecond - 1).Milliseconds()) // never -1: that waits forever
		n, err := unix.Poll(fds, int(ms))
		switch {
		case n > 0 || err != nil && !errors.Is(err, unix.EINTR):
			return true
		case !time.Now().Before(deadline):
			return false
		}
	}
}

// killLent kills l; a runner the kill cannot reach still ends, with the
// init, whose PID namespace holds it: the session is closed.
func (s *Sandbox) killLent(l *lentRunner) {
	if !l.kill() {
		_ = s.closeFor("the kill of the sandbox's command runner could not be delivered")
	}
}

// endLent waits until l, killed, is gone with everything it started.
// One still there after hostGrace is ended with the whole session, and
// the error says so.
func (s *Sandbox) endLent(l *lentRunner) error {
	if l.waitGone() {
		return nil
	}
	return s.closeFor(fmt.Sprintf("the sandbox's command runner was still running %v after it was killed", hostGrace))
}

// gone reports whether the session has ended: closed, or its init gone
// or on its way out. A PID 1 kills the processes of its namespace (a lent
// runner among them) while it exits, and its pidfd reads as exited only
// after they are all reaped; so a runner seen dead for that reason may
// find the init's pidfd still quiet, but the init already exiting.
func (s *Sandbox) gone() bool {
	s.mu.Lock()
	closed := s.closed || s.dead != nil
	s.mu.Unlock()
	if closed || s.init == nil || s.init.Process == nil {
		return closed
	}
	select {
	case <-s.reaped:
		return true
	default:
	}
	// The init is the host's child, not yet reaped: its PID is its own.
	return exiting(s.init.Process.Pid)
}

// pfExiting is the kernel's PF_EXITING task flag: set on a thread once it
// has begun to exit, before anything else of its exit happens.
const pfExiting = 0x4

// exiting reports whether process pid has begun to exit, or is gone.
// It reads the flags of /proc/pid/stat, whose ninth field they are.
func exiting(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH)
	}
	flags, ok := statFlags(string(b))
	return !ok || flags&pfExiting != 0
}

// statFlags is the flags field (9) of a /proc/pid/stat line; ok is false
// for a line not of that form (see boundary.StatFields).
func statFlags(stat string) (flags uint64, ok bool) {
	f, ok := boundary.StatFields([]byte(stat), 9)
	if !ok {
		return 0, false
	}
	flags, err := strconv.ParseUint(f[9-3], 10, 64)
	return flags, err == nil
}

// close lets the runner go: with its socket closed it leaves (or, busy,
// its command is left to the timeout already running).
func (l *lentRunner) close() {
	_ = l.conn.Close()
	_ = l.pidfd.Close()
}

// execLent runs spec on the lent runner, borrowing one when there is
// none, and reports whether it ran the command there (ran). When it did
// not, the command never started and its streams are untouched: the
// caller sends it to the init. A runner that had retired, or died while
// idle, is replaced once.
func (s *Sandbox) execLent(ctx context.Context, spec *wire.Job, files [3]*os.File, timeout time.Duration) (st wire.Status, timedOut, ran bool, err error) {
	if err := ctx.Err(); err != nil {
		return wire.Status{}, false, true, fmt.Errorf("isolated exec: %w", err) // a call already cancelled is not made
	}
	for range 2 {
		l, err := s.takeLent(ctx, timeout)
		if err != nil {
			return wire.Status{}, false, true, fmt.Errorf("isolated exec: %w", err)
		}
		if l == nil {
			return wire.Status{}, false, false, nil
		}
		out, err := s.runLent(ctx, l, spec, files, timeout)
		s.giveBack(l, out.keep)
		if out.settled {
			return out.st, out.timedOut, true, err
		}
	}
	return wire.Status{}, false, false, nil
}

// takeLent returns the lent runner, idle, marked busy; it borrows one
// from the init when there is none. nil when the runner is busy, the
// init lends none for this session, or borrowing failed; an error when
// the session has ended (a closed one, or an init that did not answer
// within the command's timeout and hostGrace: the session is then
// closed, as for a command the init does not end).
func (s *Sandbox) takeLent(ctx context.Context, timeout time.Duration) (*lentRunner, error) {
	s.mu.Lock()
	if s.closed || s.noLent || s.lentBusy {
		s.mu.Unlock()
		return nil, nil
	}
	s.lentBusy = true
	l := s.lent
	s.mu.Unlock()
	if l != nil {
		return l, nil
	}
	l, err := s.borrow(ctx, timeout+hostGrace)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case errors.Is(err, sandbox.ErrClosed):
		s.lentBusy = false
		return nil, err
	case err != nil:
		s.lentBusy = false
		s.noLent = errors.Is(err, sandbox.ErrUnsupported)
		return nil, nil
	case s.closed:
		s.lentBusy = false
		l.close()
		return nil, nil
	}
	s.lent = l
	return l, nil
}

// borrow asks the init for a runner, within bound: its socket and its
// pidfd.
func (s *Sandbox) borrow(ctx context.Context, bound time.Duration) (*lentRunner, error) {
	res, files, err := s.callWithin(ctx, bound, fmt.Sprintf("lend a command runner within %v", bound), wire.Request{Op: "runner"})
	if err == nil {
		err = res.Err.Error()
	}
	if err == nil && len(files) != 2 {
		err = fmt.Errorf("the init lent a runner with %d descriptors, want 2", len(files))
	}
	if err != nil {
		wire.CloseFiles(files)
		return nil, err
	}
	conn, err := wire.FileConn(files[0])
	if err != nil {
		files[1].Close()
		return nil, err
	}
	return &lentRunner{conn: conn, pidfd: files[1]}, nil
}

// giveBack ends a command's use of l: kept for the next command, or let
// go.
func (s *Sandbox) giveBack(l *lentRunner, keep bool) {
	s.mu.Lock()
	s.lentBusy = false
	if !keep && s.lent == l {
		s.lent = nil
	}
	s.mu.Unlock()
	if !keep {
		l.close()
	}
}

// lentOutcome is how a command handed to a lent runner went: its status
// and whether its timeout ended it; settled, whether that is the
// command's end (the runner took it, answered, or it was killed or
// cancelled), else it never started and goes elsewhere; keep, whether
// the runner can take the next command.
type lentOutcome struct {
	st            wire.Status
	timedOut      bool
	settled, keep bool
}

// lentCall is one command on a lent runner: what ended it.
type lentCall struct {
	s        *Sandbox
	l        *lentRunner
	mu       sync.Mutex
	answered bool
	killed   bool // by the timeout or a cancel of ours
	timedOut bool
}

// kill ends the command (and the runner) unless it has been answered.
func (c *lentCall) kill(timeout bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answered {
		return
	}
	c.killed, c.timedOut = true, c.timedOut || timeout
	c.s.killLent(c.l)
}

// end marks the command answered (no kill lands after it) and reports
// whether a kill came first.
func (c *lentCall) end() (killed, timedOut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answered = true
	return c.killed, c.timedOut
}

// runLent hands spec to l and waits for its status (see lentOutcome).
//
// The runner says it has taken a command before it starts it. A send
// that fails never reached it (a message of the socket pair arrives whole
// or not at all): a runner gone (EPIPE, its end closed) did not take it,
// as one that goes before saying it took it (it had retired, or was
// killed while idle). An answer without Taken is the runner's refusal (a
// directory that is not there): settled, so that it is the answer.
func (s *Sandbox) runLent(ctx context.Context, l *lentRunner, spec *wire.Job, files [3]*os.File, timeout time.Duration) (out lentOutcome, err error) {
	c := &lentCall{s: s, l: l}
	stop := context.AfterFunc(ctx, func() { c.kill(false) })
	defer stop()
	if timeout > 0 {
		t := time.AfterFunc(timeout, func() { c.kill(true) })
		defer t.Stop()
	}
	id := s.nextID.Add(1)
	var res wire.Response
	var got, taken bool
	sendErr := l.conn.Send(wire.Request{ID: id, Op: "exec", Job: spec}, files[0], files[1], files[2])
	if sendErr == nil {
		got, err = s.recvLent(l, id, &res)
		if got && res.Taken {
			taken = true
			got, err = s.recvLent(l, id, &res)
		}
	}
	killed, timedOut := c.end()
	cancelled := killed && !timedOut && ctx.Err() != nil
	var endErr error
	if err != nil || (got && res.Status == nil && res.Err == nil) {
		// A runner that breaks the protocol (another request's answer,
		// an answer without a status) is not trusted with the command's
		// end: it is killed, and the command with it.
		s.killLent(l)
		killed = true
		if err == nil {
			err = errors.New("isolated exec: the runner answered without a status")
		}
	}
	if killed || (taken && !got) {
		// The runner was killed, by us or from outside, with the command
		// in hand: whatever it started is gone before Exec returns.
		endErr = s.endLent(l)
	}
	switch {
	case endErr != nil:
		return lentOutcome{settled: true}, endErr
	case err != nil:
		return lentOutcome{settled: true}, err
	case cancelled:
		return lentOutcome{settled: true}, fmt.Errorf("isolated exec: %w", ctx.Err())
	case got:
		keep := !killed && !res.Done
		if res.Err != nil {
			return lentOutcome{settled: true, keep: keep}, res.Err.Error()
		}
		return lentOutcome{st: *res.Status, timedOut: timedOut, settled: true, keep: keep}, nil
	case killed:
		// The timeout: the runner, and with it the command, was killed
		// (before it started the command, when not taken).
		return lentOutcome{st: wire.Status{Signal: int(syscall.SIGKILL)}, timedOut: timedOut, settled: true}, nil
	case s.gone():
		return lentOutcome{settled: true}, fmt.Errorf("isolated exec: %w: the sandbox's init is gone", sandbox.ErrClosed)
	case sendErr != nil:
		if errors.Is(sendErr, unix.EPIPE) || errors.Is(sendErr, unix.ECONNRESET) {
			return lentOutcome{}, nil // gone: not taken
		}
		// A record too large is the command's; anything else leaves the
		// runner's socket in doubt, and the next command gets a fresh one.
		return lentOutcome{settled: true, keep: errors.Is(sendErr, sandbox.ErrTooLarge)}, fmt.Errorf("isolated exec: handing the command to the runner: %w", sendErr)
	case !taken:
		return lentOutcome{}, nil
	}
	// Neither a timeout nor a cancel of ours: something else killed the
	// runner while it had the command, which may have run in part. That
	// is no exit status of the command's.
	return lentOutcome{settled: true}, errLentRunnerDied
}

// recvLent reads the runner's next message about request id into res;
// got is false when the runner went away first, err set when the message
// is about another request. Descriptors have no place in its messages:
// any is closed.
func (s *Sandbox) recvLent(l *lentRunner, id uint64, res *wire.Response) (got bool, err error) {
	*res = wire.Response{}
	files, rerr := l.conn.Recv(res)
	wire.CloseFiles(files)
	switch {
	case rerr != nil:
		return false, nil
	case res.ID != id:
		return false, fmt.Errorf("isolated exec: the runner answered request %d, want %d", res.ID, id)
	}
	return true, nil
}

// errLentRunnerDied is an exec's error when the session's runner died with
// the command in hand, killed by something other than the exec's own
// timeout or cancel.
var errLentRunnerDied = errors.New("isolated exec: the session's command runner died while it ran the command (killed from outside the sandbox?): the command may have partly run; check what it changes before running it again")
