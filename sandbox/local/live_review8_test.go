package local_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
)

type review8Writer func([]byte) (int, error)

func (f review8Writer) Write(p []byte) (int, error) { return f(p) }

// Command.Stdout's doc: "A write error stops the copy, and the command
// then gets SIGPIPE on its next write, as with a closed pipe." With the
// tier's own Pipes the copy stops but the pipe's read end stays open
// until Exec returns, so a command that keeps writing blocks on a full
// pipe until its timeout (os/exec, used before these commits, closed the
// read end when its copy stopped: SIGPIPE at once).
//
// Right behaviour: exit 141 (SIGPIPE) well before the timeout.
func TestReview8LiveWriterErrorGivesSIGPIPE(t *testing.T) {
	if err := local.Check(); err != nil {
		testenv.Missing(t, "the local tier's shell: %v", err)
	}
	sb, err := local.New(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	fail := review8Writer(func([]byte) (int, error) { return 0, errors.New("client went away") })
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

// A command's output pipe that outlives the command's namespace (here it
// hands its stdout to a process outside, as `systemd-run --pipe` or any
// host daemon that accepts descriptors would) keeps Pipes.Ended waiting
// for end-of-file without bound: Exec never returns, and cancelling ctx
// does not help (the command is already gone). Before these commits
// os/exec's WaitDelay (5 s) bounded it.
//
// Right behaviour: once PID 1 is gone (or ctx is done), Ended waits a
// bounded time for the pipes, then closes them and returns.
func TestReview8EscapedPipeDoesNotHangExec(t *testing.T) {
	if sock := os.Getenv("HUTCH_REVIEW8_SENDFD"); sock != "" {
		os.Exit(review8SendStdout(sock)) // the command, inside the sandbox
	}
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
	sb, err := local.New(dir, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	self, _ := os.Executable()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(ctx, sandbox.Command{
			Args:    []string{self, "-test.run=^TestReview8EscapedPipeDoesNotHangExec$"},
			Env:     map[string]string{"HUTCH_REVIEW8_SENDFD": sock},
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

// review8SendStdout is the command of TestReview8EscapedPipeDoesNotHangExec:
// it sends its stdout to the socket and exits.
func review8SendStdout(sock string) int {
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
