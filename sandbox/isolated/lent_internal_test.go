package isolated

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/internal/wire"
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
		// runner plays the runner's side for the request it got.
		runner func(c *wire.Conn, req wire.Request)
		want   want
	}{
		{"answers", 0, false, func(c *wire.Conn, req wire.Request) {
			_ = c.Send(wire.Response{ID: req.ID, Taken: true})
			_ = c.Send(wire.Response{ID: req.ID, Status: &wire.Status{Exited: true, ExitCode: 3}})
		}, want{ran: true, keep: true, code: 3}},
		{"answers and retires", 0, false, func(c *wire.Conn, req wire.Request) {
			_ = c.Send(wire.Response{ID: req.ID, Taken: true})
			_ = c.Send(wire.Response{ID: req.ID, Status: &wire.Status{Exited: true}, Done: true})
		}, want{ran: true}},
		{"refuses (no such directory)", 0, false, func(c *wire.Conn, req wire.Request) {
			_ = c.Send(wire.Response{ID: req.ID, Err: wire.ToWire(sandbox.ErrNotDir)})
		}, want{ran: true, keep: true, err: "not a directory"}},
		{"goes before taking it", 0, false, func(c *wire.Conn, req wire.Request) {
			_ = c.Close()
		}, want{}},
		{"goes with it in hand", 0, false, func(c *wire.Conn, req wire.Request) {
			_ = c.Send(wire.Response{ID: req.ID, Taken: true})
			_ = c.Close()
		}, want{ran: true, err: "runner died"}},
		{"answers another request", 0, false, func(c *wire.Conn, req wire.Request) {
			_ = c.Send(wire.Response{ID: req.ID + 1, Taken: true})
		}, want{ran: true, err: "answered request", killed: true}},
		{"answers without a status", 0, false, func(c *wire.Conn, req wire.Request) {
			_ = c.Send(wire.Response{ID: req.ID, Taken: true})
			_ = c.Send(wire.Response{ID: req.ID})
		}, want{ran: true, err: "without a status", killed: true}},
		{"outlives the timeout", 200 * time.Millisecond, false, func(c *wire.Conn, req wire.Request) {
			_ = c.Send(wire.Response{ID: req.ID, Taken: true})
		}, want{ran: true, timedOut: true, signal: int(syscall.SIGKILL), killed: true}},
		{"never takes it before the timeout", 200 * time.Millisecond, false, func(c *wire.Conn, req wire.Request) {},
			want{ran: true, timedOut: true, signal: int(syscall.SIGKILL), killed: true}},
		{"is cancelled", 0, true, func(c *wire.Conn, req wire.Request) {
			_ = c.Send(wire.Response{ID: req.ID, Taken: true})
		}, want{ran: true, err: "context canceled", killed: true}},
	}
	defer func(d time.Duration) { lentGoneWait = d }(lentGoneWait)
	lentGoneWait = 500 * time.Millisecond // a runner that died from outside is, here, a sleep that lives on
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
			host, peer, err := wire.SocketPair()
			if err != nil {
				t.Fatal(err)
			}
			hc, err := wire.FileConn(host)
			if err != nil {
				t.Fatal(err)
			}
			pc, err := wire.FileConn(peer)
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			l := &lentRunner{conn: hc, pidfd: os.NewFile(uintptr(pidfd), "pidfd")}
			defer l.close()
			go func() {
				var req wire.Request
				files, err := pc.Recv(&req)
				for _, f := range files {
					f.Close()
				}
				if err == nil {
					tc.runner(pc, req)
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
			s := &Sandbox{}
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
