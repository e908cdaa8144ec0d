package streamserver

import (
	"io"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hutchsandbox/hutch/internal/wire"
)

// Pump sends what r yields as frames of type t (stdout or stderr), within
// the stream's window, until r ends. When the client refuses the stream
// (its reader failed) r is closed, so the command's next write gets
// SIGPIPE as with a closed pipe; when the client stops listening the rest
// is drained and dropped.
func (sio Stdio) Pump(wg *sync.WaitGroup, t wire.FrameType, r io.ReadCloser) {
	defer wg.Done()
	win := sio.window(t)
	buf := make([]byte, wire.StreamChunk)
	for {
		n := win.Take(wire.StreamChunk)
		if n == 0 {
			if win.Refused() {
				r.Close()
				return
			}
			_, _ = io.Copy(io.Discard, r)
			return
		}
		k, err := r.Read(buf[:n])
		if k < n {
			_ = win.Add(n - k)
		}
		if k > 0 {
			if sio.W.WriteFrame(t, sio.ID, buf[:k]) != nil {
				win.Close()
			}
		}
		if err != nil {
			return
		}
	}
}

func (sio Stdio) window(t wire.FrameType) *wire.Window {
	if t == wire.FrameStderr {
		return sio.Stderr
	}
	return sio.Stdout
}

// Feed writes the client's stdin frames into w and credits them back,
// then closes w; once w stops taking them, the rest is dropped (still
// credited, so the client never waits on a dead stream).
func (sio Stdio) Feed(w io.WriteCloser) {
	defer w.Close()
	if sio.Stdin == nil {
		return
	}
	broken := false
	for {
		chunk, ok := sio.Stdin.Next()
		if !ok {
			return
		}
		if !broken {
			if _, err := w.Write(chunk); err != nil {
				broken = true
				w.Close()
			}
		}
		_ = sio.W.WriteFrame(wire.FrameCredit, sio.ID, wire.CreditPayload(wire.FrameStdin, len(chunk)))
	}
}

// Writer is an io.Writer that sends what it is given as frames of type t
// within the stream's window (blocking, as a pipe would, while the client
// has not credited earlier output). Once the client refuses the stream it
// fails with EPIPE; once the client stops listening it takes everything
// and sends nothing.
func (sio Stdio) Writer(t wire.FrameType) *Output { return &Output{io: sio, t: t} }

// Output is the writer of one output stream (see Stdio.Writer).
type Output struct {
	io   Stdio
	t    wire.FrameType
	sent atomic.Int64
}

// Sent counts the bytes sent to the client.
func (w *Output) Sent() int64 { return w.sent.Load() }

func (w *Output) Write(p []byte) (int, error) {
	win := w.io.window(w.t)
	done := 0
	for done < len(p) {
		n := win.Take(min(wire.StreamChunk, len(p)-done))
		if n == 0 {
			if win.Refused() {
				return done, syscall.EPIPE
			}
			return len(p), nil
		}
		if err := w.io.W.WriteFrame(w.t, w.io.ID, p[done:done+n]); err != nil {
			win.Close()
			return len(p), nil
		}
		w.sent.Add(int64(n))
		done += n
	}
	return done, nil
}

// Reader is the client's input as an io.Reader (nil when the request
// sends none), each chunk credited back once read (see wire.Inbox.Reader).
func (sio Stdio) Reader() io.Reader {
	if sio.Stdin == nil {
		return nil
	}
	return sio.Stdin.Reader(func(n int) {
		_ = sio.W.WriteFrame(wire.FrameCredit, sio.ID, wire.CreditPayload(wire.FrameStdin, n))
	})
}
