package isolated

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// The host's side of a lent runner, against a runner that misbehaves in
// every way a dying or compromised one could: the runner is played over a
// real socket pair, and the process its pidfd names is a real one, so a
// kill is seen as a kill.
func TestLentRunnerOutcomes(t *testing.T) {
	type want struct {
		ran, keep, timedOut bool
		code, signal        int
		err                 string // in the error; "" for none
		killed              bool   // the pidfd's process
	}
	cases := []struct {
		name    string
		timeout time.Duration
		cancel  bool
		// runner plays the runner's side for the request it got; die
		// ends the process its pidfd names, as a runner's own end would.
		runner func(c *wire.Conn, req wire.Request, die func())
		want   want
	}{
		{"answers", 0, false, func(c *wire.Conn, req wire.Request, die func()) {
			_ = c.Send(wire.Response{ID: req.ID, Taken: true})
			_ = c.Send(wire.Response{ID: req.ID, Status: &wire.Status{Exited: true, ExitCode: 3}})
		}, want{ran: true, keep: true, code: 3}},
		{"answers and retires", 0, false, func(c *wire.Conn, req wire.Request, die func()) {
			_ = c.Send(wire.Response{ID: req.ID, Taken: true})
			_ = c.Send(wire.Response{ID: req.ID, Status: &wire.Status{Exited: true}, Done: true})
		}, want{ran: true}},
		{"refuses (no such directory)", 0, false, func(c *wire.Conn, req wire.Request, die func()) {
			_ = c.Send(wire.Response{ID: req.ID, Err: wire.ToWire(sandbox.ErrNotDir)})
		}, want{ran: true, keep: true, err: "not a directory"}},
		{"goes before taking it", 0, false, func(c *wire.Conn, req wire.Request, die func()) {
			_ = c.Close()
			die()
		}, want{killed: true}},
		{"goes with it in hand", 0, false, func(c *wire.Conn, req wire.Request, die func()) {
			_ = c.Send(wire.Response{ID: req.ID, Taken: true})
			_ = c.Close()
			die()
		}, want{ran: true, err: "runner died", killed: true}},
		{"answers another request", 0, false, func(c *wire.Conn, req wire.Request, die func()) {
			_ = c.Send(wire.Response{ID: req.ID + 1, Taken: true})
		}, want{ran: true, err: "answered request", killed: true}},
		{"answers without a status", 0, false, func(c *wire.Conn, req wire.Request, die func()) {
			_ = c.Send(wire.Response{ID: req.ID, Taken: true})
			_ = c.Send(wire.Response{ID: req.ID})
		}, want{ran: true, err: "without a status", killed: true}},
		{"outlives the timeout", 200 * time.Millisecond, false, func(c *wire.Conn, req wire.Request, die func()) {
			_ = c.Send(wire.Response{ID: req.ID, Taken: true})
		}, want{ran: true, timedOut: true, signal: int(syscall.SIGKILL), killed: true}},
		{"never takes it before the timeout", 200 * time.Millisecond, false, func(c *wire.Conn, req wire.Request, die func()) {},
			want{ran: true, timedOut: true, signal: int(syscall.SIGKILL), killed: true}},
		{"is cancelled", 0, true, func(c *wire.Conn, req wire.Request, die func()) {
			_ = c.Send(wire.Response{ID: req.ID, Taken: true})
		}, want{ran: true, err: "context canceled", killed: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proc := exec.Command("sleep", "60")
			if err := proc.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- proc.Wait() }()
			defer func() { _ = proc.Process.Kill() }()
			pidfd, err := unix.PidfdOpen(proc.Process.Pid, 0)
			if err != nil {
				testenv.Missing(t, "pidfd_open (Linux 5.3): %v", err)
			}
			hc, pc := connPair(t)
			l := &lentRunner{conn: hc, pidfd: os.NewFile(uintptr(pidfd), "pidfd")}
			defer l.close()
			go func() {
				var req wire.Request
				files, err := pc.Recv(&req)
				for _, f := range files {
					f.Close()
				}
				if err == nil {
					tc.runner(pc, req, func() { _ = proc.Process.Kill() })
				}
			}()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				time.AfterFunc(200*time.Millisecond, cancel)
			}
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer w.Close()
			s := closableSandbox(t)
			out, err := s.runLent(ctx, l, &wire.Job{Argv: []string{"true"}}, [3]*os.File{r, w, w}, tc.timeout)
			got := want{ran: out.settled, keep: out.keep, timedOut: out.timedOut, code: out.st.ExitCode, signal: out.st.Signal, err: tc.want.err}
			switch {
			case tc.want.err == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.want.err != "" && (err == nil || !strings.Contains(err.Error(), tc.want.err)):
				t.Errorf("error %v, want one saying %q", err, tc.want.err)
			}
			if tc.want.err == "not a directory" && !errors.Is(err, sandbox.ErrNotDir) {
				t.Errorf("error %v is not sandbox.ErrNotDir", err)
			}
			select {
			case <-exited:
				got.killed = true
			case <-time.After(300 * time.Millisecond):
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// closableSandbox is a Sandbox with no init, whose Close works: what
// runLent needs of one.
func closableSandbox(t *testing.T) *Sandbox {
	host, peer, err := wire.SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	peer.Close()
	conn, err := wire.FileConn(host)
	if err != nil {
		t.Fatal(err)
	}
	done, reaped := make(chan struct{}), make(chan struct{})
	close(done)
	close(reaped)
	return &Sandbox{conn: conn, init: &exec.Cmd{}, done: done, reaped: reaped, pending: map[uint64]chan reply{}}
}

// A runner the host cannot kill (its pidfd refuses the signal) still
// ends: the session is closed, and with it the init whose PID namespace
// holds the runner. The exec says so rather than report a kill that did
// not happen.
func TestLentRunnerKillThatCannotLandClosesTheSession(t *testing.T) {
	defer func(g time.Duration) { hostGrace = g }(hostGrace)
	hostGrace = 300 * time.Millisecond
	hc, pc := connPair(t)
	notPidfd, w, err := os.Pipe() // a descriptor no signal goes through
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l := &lentRunner{conn: hc, pidfd: notPidfd}
	defer l.close()
	go func() {
		var req wire.Request
		if _, err := pc.Recv(&req); err == nil {
			_ = pc.Send(wire.Response{ID: req.ID, Taken: true}) // and never an answer
		}
	}()
	s := closableSandbox(t)
	_, err = s.runLent(context.Background(), l, &wire.Job{Argv: []string{"true"}}, [3]*os.File{w, w, w}, 200*time.Millisecond)
	if !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("runLent returned %v, want sandbox.ErrClosed", err)
	}
	for deadline := time.Now().Add(5 * time.Second); !s.gone(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the session is still open after a kill that could not land")
		}
	}
}

// A session's commands go to a runner lent to the host, not through the
// init, wherever the session can use a runner.
func TestSessionCommandsGoToALentRunner(t *testing.T) {
	sb := defaultSession(t)
	for range 2 {
		if r, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"true"}}); err != nil || r.ExitCode != 0 {
			t.Fatalf("true: %v, exit %d", err, r.ExitCode)
		}
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.lent == nil || sb.noLent {
		t.Errorf("no runner lent to the host after two commands (lent %v, none lent %v)", sb.lent != nil, sb.noLent)
	}
}

// The init's death during a command (killed from outside here) ends the
// session: the command fails with ErrClosed, as it does through the
// init, not with the runner's death blamed on someone else.
func TestSessionWhoseInitDiesFailsItsCommandWithErrClosed(t *testing.T) {
	sb := defaultSession(t)
	time.AfterFunc(500*time.Millisecond, func() { _ = sb.init.Process.Kill() })
	_, err := sb.Exec(context.Background(), sandbox.Command{Shell: "sleep 5", Timeout: 20 * time.Second})
	if !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Exec returned %v, want sandbox.ErrClosed", err)
	}
}

// connPair is a connected pair of Conns: the host's end, and the peer's,
// closed when the test ends.
func connPair(t *testing.T) (host, peer *wire.Conn) {
	h, p, err := wire.SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	if host, err = wire.FileConn(h); err != nil {
		t.Fatal(err)
	}
	if peer, err = wire.FileConn(p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	return host, peer
}

// defaultSession is a session under the default policy, closed when the
// test ends.
func defaultSession(t *testing.T) *Sandbox {
	if err := Supported(); err != nil {
		testenv.Missing(t, "the isolated tier: %v", err)
	}
	sb, err := New(context.Background(), Options{Policy: policy.Default()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// An answer that passes descriptors (a lent runner's socket) after its
// caller gave up is not left holding them: a runner whose socket stays
// open in this process would never see end-of-file, and the init would
// lend no other. The peer here passes a pipe's write end; the test sees
// this process's copy closed as end-of-file on the read end.
func TestAnswerAfterACancelledCallHasItsDescriptorsClosed(t *testing.T) {
	host, init := connPair(t)
	s := &Sandbox{conn: host, pending: map[uint64]chan reply{}, done: make(chan struct{})}
	go s.readLoop()
	defer host.Close()
	ctx, cancel := context.WithCancel(context.Background())
	called := make(chan error, 1)
	go func() {
		_, files, err := s.callFiles(ctx, wire.Request{Op: "runner"})
		wire.CloseFiles(files)
		called <- err
	}()
	var req wire.Request
	if _, err := init.Recv(&req); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-called; !errors.Is(err, context.Canceled) {
		t.Fatalf("callFiles returned %v, want context.Canceled", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	err = init.Send(wire.Response{ID: req.ID}, w)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	_ = r.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("the late answer's descriptor is still open in this process: read %d, %v", n, err)
	}
}

// A process's flags are read from its stat line whatever its command name
// holds; a line not of that form is no answer.
func TestStatFlagsReadsTheFlagsField(t *testing.T) {
	cases := []struct {
		line  string
		flags uint64
		ok    bool
	}{
		{"42 (init) S 1 42 42 0 -1 4194560 100 0 0 0", 4194560, true},
		{"42 (a) b) c) R 1 42 42 0 -1 4202756 1 2 3", 4202756, true},
		{"42 (sp ace (x)) S 1 42 42 0 -1 4 0", 4, true},
		{"42 (\n)) Z 1 42 42 0 -1 4 0", 4, true},
		{"42 (init) S 1 42 42 0 -1", 0, false},
		{"42 init S 1 42 42 0 -1 4 0", 0, false},
		{"42 (init) S 1 42 42 0 -1 -4 0", 0, false},
		{"42 (init) S 1 42 42 0 -1 0x4 0", 0, false},
		{"", 0, false},
	}
	for _, c := range cases {
		flags, ok := statFlags(c.line)
		if flags != c.flags || ok != c.ok {
			t.Errorf("statFlags(%q) = %d, %v; want %d, %v", c.line, flags, ok, c.flags, c.ok)
		}
	}
}

// Whatever the command name, the flags written after it are the ones read.
func FuzzStatFlags(f *testing.F) {
	f.Add("init", uint64(4))
	f.Add("a) b (c", uint64(0))
	f.Fuzz(func(t *testing.T, comm string, flags uint64) {
		if strings.ContainsRune(comm, 0) {
			return // the kernel's names hold no NUL
		}
		_, _ = statFlags(comm) // any bytes at all: an answer, never a panic
		line := "7 (" + comm + ") S 1 7 7 0 -1 " + strconv.FormatUint(flags, 10) + " 0 0"
		if got, ok := statFlags(line); !ok || got != flags {
			t.Fatalf("statFlags(%q) = %d, %v; want %d, true", line, got, ok, flags)
		}
	})
}

// A process is seen exiting from the moment it is killed, before it is
// reaped, and once it is gone; a live one is not.
func TestExitingSeesAKilledProcessBeforeItIsReaped(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if exiting(pid) {
		t.Fatal("a running process is seen exiting")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !exiting(pid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a killed process, not reaped, is not seen exiting")
		}
	}
	_ = cmd.Wait()
	if !exiting(pid) {
		t.Error("a reaped process is not seen gone")
	}
}

// At most one runner of a session is lent at a time: while the host still
// holds the last one, the init lends no other (and says why), and once
// the host lets it go, the init lends the next.
func TestInitLendsOneRunnerAtATime(t *testing.T) {
	sb := defaultSession(t)
	ctx := context.Background()
	first, err := sb.borrow(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("the first runner: %v", err)
	}
	second, err := sb.borrow(ctx, 10*time.Second)
	if err == nil {
		second.close()
		first.close()
		t.Fatal("the init lent a second runner while the first was still held")
	}
	if !strings.Contains(err.Error(), "still running") {
		t.Errorf("the second runner's refusal says %q, want it to say the first is still running", err)
	}
	if rc, _ := first.pidfd.SyscallConn(); rc != nil {
		_ = rc.Control(func(fd uintptr) {
			if exited(int(fd), 0) {
				t.Error("the first runner exited when a second was asked for")
			}
		})
	}
	first.close()
	third, err := sb.borrow(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("no runner lent after the first was let go: %v", err)
	}
	third.close()
}
