package sandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
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
	l := sandbox.NewLive(&out)
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
	l := sandbox.NewLive(writerFunc(func([]byte) (int, error) { return 0, boom }))
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
	l := sandbox.NewLive(writerFunc(func(p []byte) (int, error) { <-release; return len(p), nil }))
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
	var l *sandbox.Live = sandbox.NewLive(nil)
	if n, err := l.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("nil Live: %d %v", n, err)
	}
	l.Unblock()
	l.Close(time.Second)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
