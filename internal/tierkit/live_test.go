package tierkit_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
	"golang.org/x/sys/unix"
)

// syncBuffer is a bytes.Buffer safe for the forwarder and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Everything written reaches the live writer, in order, by Close.
func TestLiveDeliversInOrder(t *testing.T) {
	var out syncBuffer
	l := tierkit.NewLive(&out)
	var want bytes.Buffer
	for i := range 2000 {
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		if _, err := l.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	l.Unblock()
	l.Close(10 * time.Second)
	if out.String() != want.String() {
		t.Fatalf("live got %d bytes, want %d", len(out.String()), want.Len())
	}
}

// A live writer's error comes back from Write (so a tier's copy stops, as
// on a closed pipe).
func TestLiveWriterError(t *testing.T) {
	boom := errors.New("boom")
	l := tierkit.NewLive(writerFunc(func([]byte) (int, error) { return 0, boom }))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := l.Write([]byte("x")); errors.Is(err, boom) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the live writer's error never came back")
		}
		time.Sleep(time.Millisecond)
	}
	l.Close(time.Second)
}

// While the command runs a stalled writer holds Write up (a pipe's
// backpressure); after Unblock nothing waits, and Close gives up after
// its grace.
func TestLiveStalledWriter(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	l := tierkit.NewLive(writerFunc(func(p []byte) (int, error) { <-release; return len(p), nil }))
	chunk := make([]byte, 64<<10)
	wrote := make(chan int)
	go func() {
		n := 0
		for range 64 { // 4 MiB: past what is queued while running
			if _, err := l.Write(chunk); err != nil {
				break
			}
			n++
		}
		wrote <- n
	}()
	select {
	case n := <-wrote:
		t.Fatalf("all %d writes returned while the writer stalled: no backpressure", n)
	case <-time.After(300 * time.Millisecond):
	}
	l.Unblock()
	select {
	case <-wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("Write still waits after Unblock")
	}
	start := time.Now()
	l.Close(200 * time.Millisecond)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close waited %v for a stalled writer", d)
	}
	if _, err := l.Write(chunk); err != nil {
		t.Fatalf("Write after Close: %v", err)
	}
}

// A nil Live (no live writer) takes everything.
func TestLiveNil(t *testing.T) {
	var l *tierkit.Live = tierkit.NewLive(nil)
	if n, err := l.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("nil Live: %d %v", n, err)
	}
	l.Unblock()
	l.Close(time.Second)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Close's grace is the most a live writer may take of the caller's time:
// once Close has returned (Exec returns right after), the caller owns its
// writer again, and what the writer has not taken is dropped from the
// live copy. A writer that is merely slow is not fed the rest of the
// queue after the grace ran out (into a buffer the caller is already
// reading, or a response already finished): at most the one Write
// already under way returns later.
// Origin: review 8.
func TestLiveNoWritesAfterCloseGrace(t *testing.T) {
	var writes atomic.Int64
	l := tierkit.NewLive(writerFunc(func(p []byte) (int, error) {
		time.Sleep(20 * time.Millisecond) // slow, never stalled
		writes.Add(1)
		return len(p), nil
	}))
	chunk := make([]byte, 4<<10)
	l.Unblock() // the command has ended: its output is queued without waiting
	for range 100 {
		if _, err := l.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	l.Close(50 * time.Millisecond)
	after := writes.Load()
	time.Sleep(500 * time.Millisecond)
	if late := writes.Load() - after; late > 1 {
		t.Fatalf("%d writes reached the live writer after Close returned (its grace was over)", late)
	}
}

// Pipes.Close (every Exec's deferred cleanup) lets the live writers go
// the same way: a slow writer is not fed after Exec returned.
// Origin: review 8.
func TestPipesCloseStopsLiveWrites(t *testing.T) {
	var writes atomic.Int64
	slow := writerFunc(func(p []byte) (int, error) {
		time.Sleep(100 * time.Millisecond)
		writes.Add(1)
		return len(p), nil
	})
	p, err := tierkit.NewPipes(sandbox.Command{Stdout: slow}, &tierkit.TailBuffer{Max: 1 << 20}, &tierkit.TailBuffer{Max: 1 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The "command": writes 200 KiB in small pieces, then ends.
	go func() {
		b := make([]byte, 1024)
		for range 200 {
			if _, err := p.Child[1].Write(b); err != nil {
				break
			}
			time.Sleep(time.Millisecond) // small reads: many queued chunks
		}
		p.Child[1].Close()
	}()
	time.Sleep(200 * time.Millisecond)
	p.Unblock()
	p.Close()
	after := writes.Load()
	time.Sleep(500 * time.Millisecond)
	if late := writes.Load() - after; late > 1 {
		t.Fatalf("%d writes reached the live writer after Pipes.Close", late)
	}
}

// A live writer that fails stops the copy and closes that stream's read
// end, as the doc (Command.Stdout, Live) says: the command gets SIGPIPE
// on its next write, as with a closed pipe, rather than block on a full
// pipe until its timeout.
// Origin: review 8.
func TestPipesLiveErrorBreaksPipe(t *testing.T) {
	boom := errors.New("client gone")
	p, err := tierkit.NewPipes(sandbox.Command{Stdout: writerFunc(func([]byte) (int, error) { return 0, boom })},
		&tierkit.TailBuffer{Max: 1 << 20}, &tierkit.TailBuffer{Max: 1 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// yes writes forever; only a broken pipe (or the kill below) ends it.
	c := exec.Command("yes")
	c.Stdin, c.Stdout, c.Stderr = p.Child[0], p.Child[1], p.Child[2]
	if err := c.Start(); err != nil {
		testenv.Missing(t, "cannot start yes: %v", err)
	}
	p.Started()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGPIPE {
			t.Fatalf("yes ended with %v, want SIGPIPE", err)
		}
	case <-time.After(5 * time.Second):
		_ = c.Process.Kill()
		<-done
		t.Fatal("the command never got SIGPIPE after its live writer failed: it blocks on a pipe nobody reads")
	}
	p.Ended()
}

// Exec does not return before the output is complete: with a healthy
// live writer, everything written reaches both the capture and the
// writer, in order, by the time Ended returns.
// Origin: review 8.
func TestPipesCompleteAtEnded(t *testing.T) {
	var live syncBuffer
	stdout := &tierkit.TailBuffer{Max: 8 << 20}
	p, err := tierkit.NewPipes(sandbox.Command{Stdout: &live}, stdout, &tierkit.TailBuffer{Max: 1 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := make([]byte, 3<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	fd, err := syscall.Dup(int(p.Child[1].Fd())) // the command's own copy
	if err != nil {
		t.Fatal(err)
	}
	w := os.NewFile(uintptr(fd), "cmd-stdout")
	go func() { _, _ = w.Write(want); w.Close() }()
	p.Started()
	p.Ended()
	if got := live.String(); got != string(want) {
		t.Fatalf("live got %d bytes, want %d", len(got), len(want))
	}
	if got := stdout.Bytes(); string(got) != string(want) {
		t.Fatalf("captured %d bytes, want %d", len(got), len(want))
	}
}

// The command's ends of its streams are blocking from the start, however
// a tier hands them on: a command that inherits a non-blocking stdin or
// stdout gets EAGAIN where it expects to wait. Its stdin carries
// Command.Stdin, or ends at once without one.
func TestPipesGiveTheCommandBlockingEnds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stdin *strings.Reader
		want  string
	}{
		{"no stdin", nil, "in:\n"},
		{"stdin", strings.NewReader("abc"), "in:abc\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := sandbox.Command{}
			if tc.stdin != nil {
				cmd.Stdin = tc.stdin
			}
			stdout, stderr := &tierkit.TailBuffer{}, &tierkit.TailBuffer{}
			p, err := tierkit.NewPipes(cmd, stdout, stderr, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for i, f := range p.Child {
				// Through Control: Fd would make it blocking.
				rc, err := f.SyscallConn()
				if err != nil {
					t.Fatal(err)
				}
				var flags int
				if err := rc.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
					t.Fatal(err)
				}
				if err != nil {
					t.Fatal(err)
				}
				if flags&unix.O_NONBLOCK != 0 {
					t.Errorf("the command's stream %d is non-blocking", i)
				}
			}
			c := exec.Command("sh", "-c", `printf 'in:%s\n' "$(cat)"; echo err >&2`)
			c.Stdin, c.Stdout, c.Stderr = p.Child[0], p.Child[1], p.Child[2]
			if err := c.Start(); err != nil {
				testenv.Missing(t, "cannot start sh: %v", err)
			}
			p.Started()
			if err := c.Wait(); err != nil {
				t.Fatal(err)
			}
			p.Ended()
			if got := string(stdout.Bytes()); got != tc.want {
				t.Errorf("stdout %q, want %q", got, tc.want)
			}
			if got := string(stderr.Bytes()); got != "err\n" {
				t.Errorf("stderr %q, want %q", got, "err\n")
			}
		})
	}
}

// BenchmarkPipes is what a tier's host side spends on a command's
// streams, apart from the command: make the pipes, start the copies, see
// the command's side close, collect the output.
func BenchmarkPipes(b *testing.B) {
	for b.Loop() {
		p, err := tierkit.NewPipes(sandbox.Command{}, &tierkit.TailBuffer{}, &tierkit.TailBuffer{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		p.Started()
		p.Ended()
		p.Close()
	}
}
