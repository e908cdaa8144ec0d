package sandbox_test

import (
	"errors"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Close's grace is the most a live writer may take of the caller's time:
// once Close has returned (Exec returns right after), the caller owns its
// writer again, and the doc says what the writer has not taken "is
// dropped from the live copy". But the forwarder goes on delivering the
// whole queue (up to liveEnded, 8 MiB) to a writer that is merely slow,
// long after Exec has returned: writes into a buffer the caller is
// already reading (a data race) or a response already finished.
//
// Right behaviour: when the grace runs out, the queue is dropped; at most
// the one Write already under way may still return later.
func TestReview8LiveNoWritesAfterCloseGrace(t *testing.T) {
	var writes atomic.Int64
	l := sandbox.NewLive(writerFunc(func(p []byte) (int, error) {
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

// Pipes.Close (every Exec's deferred cleanup) lets the live writers go,
// but the same way: a slow writer keeps being fed after Exec returned.
func TestReview8PipesCloseStopsLiveWrites(t *testing.T) {
	var writes atomic.Int64
	slow := writerFunc(func(p []byte) (int, error) {
		time.Sleep(100 * time.Millisecond)
		writes.Add(1)
		return len(p), nil
	})
	p, err := sandbox.NewPipes(sandbox.Command{Stdout: slow}, &sandbox.TailBuffer{Max: 1 << 20}, &sandbox.TailBuffer{Max: 1 << 20}, nil)
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

// A live writer that fails: the doc (Command.Stdout, Live) says the copy
// stops and the command gets SIGPIPE on its next write, as with a closed
// pipe. Pipes stops its copy but keeps the read end open until Close, so
// a command that goes on writing blocks on a full pipe until its
// timeout instead (os/exec, which the local tier used before, closed the
// read end when its copy stopped).
//
// Right behaviour: when a copy stops on its writer's error, close that
// stream's read end (the command gets EPIPE/SIGPIPE at once).
func TestReview8PipesLiveErrorBreaksPipe(t *testing.T) {
	boom := errors.New("client gone")
	p, err := sandbox.NewPipes(sandbox.Command{Stdout: writerFunc(func([]byte) (int, error) { return 0, boom })},
		&sandbox.TailBuffer{Max: 1 << 20}, &sandbox.TailBuffer{Max: 1 << 20}, nil)
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

// Exec must not return before the output is complete: with a healthy
// live writer, everything written reaches both the capture and the
// writer, in order, by the time Ended returns.
func TestReview8PipesCompleteAtEnded(t *testing.T) {
	var live syncBuffer
	stdout := &sandbox.TailBuffer{Max: 8 << 20}
	p, err := sandbox.NewPipes(sandbox.Command{Stdout: &live}, stdout, &sandbox.TailBuffer{Max: 1 << 20}, nil)
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
