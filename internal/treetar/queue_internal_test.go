package treetar

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// gatedTarget is a Target whose writes wait for release and are recorded
// in the order they start.
type gatedTarget struct {
	mu      sync.Mutex
	started []string
	first   chan struct{} // closed when the first write starts
	release chan struct{}
	fail    string // a destination whose write fails
}

func (g *gatedTarget) target(workers int) Target {
	return Target{
		Write: func(_ context.Context, f File) error {
			g.mu.Lock()
			g.started = append(g.started, f.Dst)
			if len(g.started) == 1 && g.first != nil {
				close(g.first)
			}
			g.mu.Unlock()
			<-g.release
			if f.Dst == g.fail {
				return errors.New("write failed: " + f.Dst)
			}
			return nil
		},
		Workers: workers,
	}
}

func (g *gatedTarget) order() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return strings.Join(g.started, " ")
}

// The writers take queued files from their directories in turn: writes
// into one directory wait on each other in the kernel.
func TestQueueTakesDirectoriesInTurn(t *testing.T) {
	g := &gatedTarget{first: make(chan struct{}), release: make(chan struct{})}
	q := newQueue(context.Background(), g.target(1))
	put := func(dst string) {
		if err := q.put(File{Dst: dst}); err != nil {
			t.Fatal(err)
		}
	}
	put("x/1")
	<-g.first // the writer holds x/1 while the rest are queued
	for _, dst := range []string{"x/2", "x/3", "y/1", "y/2", "z/1"} {
		put(dst)
	}
	close(g.release)
	if err := q.drain(); err != nil {
		t.Fatal(err)
	}
	q.stop()
	if got, want := g.order(), "x/1 x/2 y/1 z/1 x/3 y/2"; got != want {
		t.Errorf("writes in the order %q, want %q", got, want)
	}
	if q.written() != 6 {
		t.Errorf("%d written, want 6", q.written())
	}
}

// The queue holds at most queueFiles files, and at most queueBytes bytes
// unless one file alone is more: put waits for the writers.
func TestQueueBoundsWhatItHolds(t *testing.T) {
	for _, c := range []struct {
		name  string
		size  int
		files int // how many put before one waits
	}{
		{"small files", 10, queueFiles},
		{"big files", queueBytes / 4, 4},
		{"a file over the bound alone", queueBytes + 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &gatedTarget{release: make(chan struct{})}
			q := newQueue(context.Background(), g.target(2))
			data := make([]byte, c.size)
			put := make(chan int)
			go func() {
				for i := 0; ; i++ {
					if err := q.put(File{Dst: fmt.Sprintf("d/%d", i), Data: data}); err != nil {
						close(put)
						return
					}
					put <- i
				}
			}()
			n := 0
			for range c.files {
				<-put
				n++
			}
			// The putter has its chance to go past the bound: a check
			// that looked at once could pass before it tried.
			select {
			case i := <-put:
				t.Fatalf("put %d files without a write done, want at most %d", i+1, c.files)
			case <-time.After(100 * time.Millisecond):
			}
			q.mu.Lock()
			q.setErr(errors.New("stop"))
			q.mu.Unlock()
			close(g.release)
			for range put {
			}
			q.stop()
		})
	}
}

// A failed write ends the unpack with its error; the queue's other
// writers stop taking files.
func TestQueueStopsAtTheFirstFailedWrite(t *testing.T) {
	g := &gatedTarget{release: make(chan struct{}), fail: "d/1"}
	q := newQueue(context.Background(), g.target(1))
	for i := range 5 {
		if err := q.put(File{Dst: fmt.Sprintf("d/%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	close(g.release)
	if err := q.drain(); err == nil || err.Error() != "write failed: d/1" {
		t.Fatalf("drain: %v, want the failed write", err)
	}
	q.stop()
	if q.written() != 1 || g.order() != "d/0 d/1" {
		t.Errorf("written %d, writes %q: want d/0 written and nothing after d/1", q.written(), g.order())
	}
}

// A cancel ends a put and a drain that wait.
func TestQueueEndsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	g := &gatedTarget{release: make(chan struct{})}
	q := newQueue(ctx, g.target(1))
	if err := q.put(File{Dst: "a"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- q.drain() }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("drain after cancel: %v", err)
	}
	if err := q.put(File{Dst: "b"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("put after cancel: %v", err)
	}
	close(g.release)
	q.stop()
}
