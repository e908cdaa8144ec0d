package local_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
)

// The stalled live writer and the blocking stdin reader, which once hung
// Exec, are cases of the conformance suite ("stalled live writer",
// "blocking stdin"), which every tier runs.

// A secret in hutch's own environment does not reach a double-forked,
// setsid'd daemon (which sees the command's environment, not hutch's),
// and the daemon is gone when Exec returns.
// Origin: review 7.
func TestExecSecretsNotInheritedByDaemon(t *testing.T) {
	shellOK(t)
	t.Setenv("HUTCH_TEST_DAEMON_SECRET", "s3cr3t-daemon")
	e := newAttackEnv(t, local.Options{})
	e.file(t, "probe.sh", "")
	script := `(setsid sh -c 'env > daemon.env; sleep 30' &) ; sleep 0.3; cat daemon.env`
	r, err := e.sb.Exec(bg, sandbox.Command{Shell: script, Timeout: 10 * time.Second})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("%+v, %v", r, err)
	}
	if strings.Contains(string(r.Stdout), "s3cr3t-daemon") {
		t.Errorf("the daemon saw hutch's secret:\n%s", r.Stdout)
	}
	if !strings.Contains(string(r.Stdout), "PATH=") {
		t.Errorf("the daemon's environment was not captured: %q", r.Stdout)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A live writer that fails stops the copy, and the command then gets
// SIGPIPE on its next write, as with a closed pipe (Command.Stdout's
// doc): the tier closes that pipe's read end when the copy stops, so a
// command that keeps writing ends at once (exit 141, 128+SIGPIPE, from
// sh), well before its timeout, rather than block on a full pipe.
// Origin: review 8.
func TestExecLiveWriterErrorGivesSIGPIPE(t *testing.T) {
	if err := local.Check(); err != nil {
		testenv.Missing(t, "the local tier's shell: %v", err)
	}
	sb, err := local.New(context.Background(), local.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	fail := writerFunc(func([]byte) (int, error) { return 0, errors.New("client went away") })
	start := time.Now()
	r, err := sb.Exec(context.Background(), sandbox.Command{Shell: "yes", Stdout: fail, Timeout: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// 141 (128+SIGPIPE) is how sh reports its child killed by SIGPIPE.
	if r.TimedOut || r.Signal != "SIGPIPE" && r.ExitCode != 141 {
		t.Fatalf("after %v: timed out %v, exit %d, signal %q; want SIGPIPE at once", time.Since(start).Round(time.Millisecond), r.TimedOut, r.ExitCode, r.Signal)
	}
}

// The command of TestExecEscapedPipeDoesNotHang, inside the sandbox.
func init() {
	testenv.RegisterProgram("send-stdout", func(args []string) { os.Exit(sendStdout(args[0])) })
}

// A command's output pipe that outlives the command (here it hands its
// stdout to a process outside, as `systemd-run --pipe` or any host
// daemon that accepts descriptors would) does not hold Exec: once PID 1
// is gone (or ctx is done), Pipes.Ended waits a bounded time for the
// pipes, then closes them and returns.
// Origin: review 8.
func TestExecEscapedPipeDoesNotHang(t *testing.T) {
	if err := local.Check(); err != nil {
		testenv.Missing(t, "the local tier's shell: %v", err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := make(chan []int, 1)
	go func() {
		c, err := l.AcceptUnix()
		if err != nil {
			return
		}
		defer c.Close()
		oob := make([]byte, unix.CmsgSpace(4))
		_, oobn, _, _, err := c.ReadMsgUnix(make([]byte, 1), oob)
		if err != nil {
			return
		}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if fds, err := unix.ParseUnixRights(&m); err == nil {
				held <- fds // a "host daemon" holding the command's stdout
				return
			}
		}
	}()
	defer func() {
		select {
		case fds := <-held:
			for _, fd := range fds {
				unix.Close(fd)
			}
		default:
		}
	}()
	sb, err := local.New(context.Background(), local.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(ctx, sandbox.Command{
			Args:    testenv.ProgramArgv(sock),
			Env:     map[string]string{testenv.ProgramEnvKey: "send-stdout"},
			Timeout: 3 * time.Second,
		})
		done <- err
	}()
	select {
	case <-done:
		select {
		case fds := <-held:
			held <- fds
		case <-time.After(5 * time.Second):
			t.Fatal("control: the command never handed its stdout out, so the test proves nothing")
		}
	case <-time.After(15 * time.Second):
		select {
		case fds := <-held:
			held <- fds
		default:
			t.Fatal("control: the command never handed its stdout out, so the hang is something else")
		}
		t.Fatal("Exec still waits 15s after its timeout and its ctx: an escaped stdout holds it forever")
	}
}

// sendStdout is the command of TestExecEscapedPipeDoesNotHang: it sends
// its stdout to the socket and exits.
func sendStdout(sock string) int {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return 1
	}
	defer c.Close()
	if _, _, err := c.WriteMsgUnix([]byte{0}, unix.UnixRights(1), nil); err != nil {
		return 1
	}
	return 0
}
