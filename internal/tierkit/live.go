package tierkit

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
	"golang.org/x/sys/unix"
)

const (
	// liveRunning bounds the bytes queued for a live writer while the
	// command runs: past it, the command waits for the writer, as on a
	// pipe.
	liveRunning = 1 << 20
	// liveEnded bounds them once the command has ended, while the rest
	// of its output (what its pipes still hold) is read: past it, the
	// live copy drops output rather than wait.
	liveEnded = 8 << 20
)

// Live carries a command's output to a caller's live writer from a
// goroutine of its own, in order. While the command runs, a writer that
// is slow holds the command up as a pipe would (Write waits for room).
// Once the command has ended nothing waits for the writer any more: a
// writer that stalls — a client that stopped reading — delays Exec by at
// most sandbox.LiveGrace, never holds it forever, and what it has not taken is
// dropped from the live copy, never from the captured sandbox.Result.
//
// A tier calls Unblock when the command has ended or its timeout has
// come (its copies then read the rest of the output without waiting: a
// runtime or helper that must drain the output before it can report the
// end is not held up either), and Close once they have.
//
// A write error of the live writer ends the copy to it; Write returns
// that error from then on, so the tier's copy stops and the command gets
// SIGPIPE on its next write, as with a closed pipe. A nil *Live (no live
// writer) takes everything and does nothing.
type Live struct {
	w    io.Writer
	done chan struct{} // closed when the forwarder has stopped

	mu        sync.Mutex
	cond      *sync.Cond
	queue     [][]byte
	queued    int
	unblocked bool
	closed    bool
	given     bool  // Close's grace ran out: nothing more is delivered
	err       error // the live writer's
}

// NewLive starts carrying output to w; nil when w is nil.
func NewLive(w io.Writer) *Live {
	if w == nil {
		return nil
	}
	l := &Live{w: w, done: make(chan struct{})}
	l.cond = sync.NewCond(&l.mu)
	go l.forward()
	return l
}

func (l *Live) forward() {
	defer close(l.done)
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		for len(l.queue) == 0 && !l.closed {
			l.cond.Wait()
		}
		if len(l.queue) == 0 || l.given {
			return // closed and all delivered, or given up on
		}
		p := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		l.queued -= len(p)
		l.cond.Broadcast() // room
		l.mu.Unlock()
		_, err := l.w.Write(p)
		l.mu.Lock()
		if err != nil {
			l.err = err
			l.queue, l.queued = nil, 0
			l.cond.Broadcast()
			return
		}
	}
}

// Write queues a copy of p for the live writer: it waits for room while
// the command runs, and drops p past the larger bound once it has ended
// (or when Close has come). It fails only with the live writer's error.
func (l *Live) Write(p []byte) (int, error) {
	if l == nil {
		return len(p), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.unblocked && l.err == nil && l.queued >= liveRunning {
		l.cond.Wait()
	}
	switch {
	case l.err != nil:
		return 0, l.err
	case l.closed || l.queued >= liveEnded:
		return len(p), nil // dropped from the live copy only
	}
	l.queue = append(l.queue, append([]byte(nil), p...))
	l.queued += len(p)
	l.cond.Broadcast()
	return len(p), nil
}

// Unblock says the command has ended: Write no longer waits.
func (l *Live) Unblock() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.unblocked = true
	l.cond.Broadcast()
	l.mu.Unlock()
}

// Close says the output has ended, and waits at most grace for the live
// writer to take what is queued. Later writes are dropped, and so is what
// the writer has not taken when the grace runs out: after Close returns,
// at most the one write then under way reaches the writer.
func (l *Live) Close(grace time.Duration) {
	l.end()
	l.waitUntil(time.Now().Add(grace))
}

// end says the output has ended: Write no longer waits, and drops what
// comes after.
func (l *Live) end() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.unblocked, l.closed = true, true
	l.cond.Broadcast()
	l.mu.Unlock()
}

// waitUntil waits, at most until deadline, for the live writer to take
// what is queued, and then gives up on what it has not.
func (l *Live) waitUntil(deadline time.Time) {
	if l == nil {
		return
	}
	select {
	case <-l.done:
		return
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
		l.mu.Lock()
		l.given, l.queue, l.queued = true, nil, 0
		l.mu.Unlock()
	}
}

// Lives are a command's two live writers, stdout's and stderr's.
type Lives [2]*Live

// NewLives starts carrying cmd's output to its live writers (nil entries
// for those it lacks).
func NewLives(cmd sandbox.Command) Lives { return Lives{NewLive(cmd.Stdout), NewLive(cmd.Stderr)} }

// Unblock unblocks both (see Live.Unblock).
func (ls Lives) Unblock() {
	for _, l := range ls {
		l.Unblock()
	}
}

// Close closes both (see Live.Close), waiting at most grace in all: the
// two writers drain at the same time, so two stalled ones cost one
// grace, not two.
func (ls Lives) Close(grace time.Duration) {
	deadline := time.Now().Add(grace)
	for _, l := range ls {
		l.end()
	}
	for _, l := range ls {
		l.waitUntil(deadline)
	}
}

// Pipes are a command's three standard streams as pipes of the tier's
// own, with goroutines copying them: stdin from sandbox.Command.Stdin (never
// waited for), stdout and stderr into their capture buffers and live
// writers. Give Child to the command, call Started once it runs, Ended
// once it has ended (this waits for the output to end, then at most
// sandbox.LiveGrace for the live writers), and Close in every case.
type Pipes struct {
	// Child are the command's ends: stdin, stdout, stderr.
	Child   [3]*os.File
	parent  [3]*os.File
	live    Lives
	copied  sync.WaitGroup
	refused atomic.Bool
}

// NewPipes makes the pipes and starts the copies. wrap, when set, is put
// in front of stdout's (stream 1) and stderr's (stream 2) buffer and live
// writer (a tier that reads a header of its own off the streams).
//
// The command's ends are blocking and never enter Go's poller: they are
// only handed on. Without stdin to feed, its pipe's write end is closed
// at once (the command reads end-of-file), with no goroutine.
func NewPipes(cmd sandbox.Command, stdout, stderr *TailBuffer, wrap func(stream int, w io.Writer) io.Writer) (*Pipes, error) {
	p := &Pipes{}
	for i := range p.Child {
		child, parent, err := pipe(i == 0)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.Child[i], p.parent[i] = child, parent
	}
	if cmd.Stdin != nil {
		go FeedStdin(p.parent[0], cmd.Stdin)
	} else {
		p.parent[0].Close()
	}
	p.live = NewLives(cmd)
	sinks := [2]io.Writer{stdout.Tee(p.live[0]), stderr.Tee(p.live[1])}
	if wrap != nil {
		sinks[0], sinks[1] = wrap(1, sinks[0]), wrap(2, sinks[1])
	}
	for i, sink := range sinks {
		p.copied.Add(1)
		go func() {
			defer p.copied.Done()
			buf := copyBufs.Get().(*[copyBufSize]byte)
			defer copyBufs.Put(buf)
			// Wrapped, so that io.CopyBuffer uses buf rather than a
			// buffer of its own each time (os.File's WriteTo).
			if _, err := io.CopyBuffer(struct{ io.Writer }{sink}, struct{ io.Reader }{p.parent[i+1]}, buf[:]); err != nil {
				// The live writer failed (or the read end was cut):
				// close it, so the command gets EPIPE (SIGPIPE) on its
				// next write, as on a closed pipe, rather than block.
				if !errors.Is(err, os.ErrClosed) {
					p.refused.Store(true)
				}
				p.parent[i+1].Close()
			}
		}()
	}
	return p, nil
}

// copyBufSize is the size of the buffers the output copies read into:
// half a pipe's default capacity.
const copyBufSize = 32 << 10

// copyBufs are the output copies' buffers, reused from one command to the
// next.
var copyBufs = sync.Pool{New: func() any { return new([copyBufSize]byte) }}

// pipe makes one pipe of a command's: child is the command's end (the
// read end when childReads), blocking and outside the poller; parent is
// this process's end, in the poller. Both are close-on-exec.
func pipe(childReads bool) (child, parent *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	c, p := fds[1], fds[0]
	if childReads {
		c, p = fds[0], fds[1]
	}
	if err := unix.SetNonblock(p, true); err != nil {
		unix.Close(c)
		unix.Close(p)
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(c), "|0"), os.NewFile(uintptr(p), "|1"), nil
}

// Refused reports whether a live writer failed, so that the command's
// output pipe was closed under it (its next write got SIGPIPE).
func (p *Pipes) Refused() bool { return p.refused.Load() }

// Started closes this process's copies of the command's ends, so the
// output ends when the command's last process lets go of it.
func (p *Pipes) Started() {
	for _, f := range p.Child {
		f.Close()
	}
}

// Unblock lets the copies go on without waiting for the live writers
// (see Live.Unblock): for a tier whose way of ending a command on its
// timeout needs the output drained.
func (p *Pipes) Unblock() { p.live.Unblock() }

// Ended waits for the output to end — at most sandbox.OutputGrace, then it cuts
// the pipes — and then at most sandbox.LiveGrace for the live writers.
func (p *Pipes) Ended() {
	p.Unblock()
	copied := make(chan struct{})
	go func() { p.copied.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(sandbox.OutputGrace):
		p.parent[1].Close()
		p.parent[2].Close()
		<-copied
	}
	p.live.Close(sandbox.LiveGrace)
}

// Close closes every end still open and lets the live writers go (a copy
// still running sees its pipe closed).
func (p *Pipes) Close() {
	for _, f := range append(p.Child[:], p.parent[:]...) {
		if f != nil {
			f.Close()
		}
	}
	p.live.Close(0)
}

// FeedStdin copies r (nil: nothing) into the command's stdin w and closes
// w. Nothing waits for it: a reader that blocks keeps this goroutine
// until its read returns, and holds up nothing else; a command that ends
// without reading it all makes the copy fail, and it stops.
func FeedStdin(w *os.File, r io.Reader) {
	if r != nil {
		_, _ = io.Copy(w, r)
	}
	w.Close()
}
