// Package streamserver is the serving end of hutch's helper stream
// (internal/wire's framed, multiplexed protocol): it reads a client's
// frames, runs each operation on a Backend, and answers. The helper inside
// a container and `hutch serve` are both this server over different
// backends (the container's own files and reapers; any sandbox).
//
// It guarantees that every operation it accepts gets exactly one response
// while the stream lasts, that a client cannot make it hold more than
// MaxOps operations or one write's declared size at once, and that every
// operation's context ends when the client cancels it, when its deadline
// (sent with the request) passes, or when the stream ends. It does not
// authenticate: whoever reaches the stream is the client.
package streamserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Files is what file operations act on; paths are as the client sent
// them, and the backend resolves and guards them where the files are.
type Files interface {
	ReadStat(ctx context.Context, path string, max int64) ([]byte, sandbox.FileInfo, error)
	Write(ctx context.Context, path string, data []byte) error
	Stat(ctx context.Context, path string) (sandbox.FileInfo, error)
	Glob(ctx context.Context, pattern string) ([]string, error)
	List(ctx context.Context, path string) ([]sandbox.FileInfo, error)
	Search(ctx context.Context, req sandbox.SearchRequest) (sandbox.SearchResult, error)
	Mkdir(ctx context.Context, path string) error
	Remove(ctx context.Context, path string, recursive bool) error
	Rename(ctx context.Context, from, to string) error
}

// Stdio is one command's streams on the server's side: Stdin (nil when
// the request sends none) holds the client's input frames, to be credited
// back as they are used; Stdout and Stderr are the windows output frames
// are sent within. Send writes frames of the operation.
type Stdio struct {
	ID             uint64
	Stdin          *wire.Inbox
	Stdout, Stderr *wire.Window
	W              *wire.FrameWriter
}

// Backend serves one session's operations.
type Backend interface {
	Files
	// Exec runs the command req describes with io as its streams and
	// answers how it ended; it returns only after its last output frame
	// is sent. ctx ends when the client cancels the command or the
	// stream ends.
	Exec(ctx context.Context, req wire.StreamRequest, io Stdio) wire.StreamResponse
}

// Transfer is implemented by backends that move whole trees in one
// operation (see package server); others answer ErrUnsupported.
type Transfer interface {
	// Pack writes the regular files under dir (a directory, "." the
	// root) changed after since (all when zero) to w as a tar stream,
	// paths relative to dir.
	Pack(ctx context.Context, dir string, since time.Time, w io.Writer) error
	// Unpack writes the files of the tar stream r below dir and says how
	// many it wrote.
	Unpack(ctx context.Context, dir string, r io.Reader) (int, error)
	// Changed describes the regular files under dir changed after since.
	Changed(ctx context.Context, dir string, since time.Time) ([]sandbox.FileInfo, error)
}

var errNoTransfer = fmt.Errorf("bulk transfer: %w", sandbox.ErrUnsupported)

// MaxOps bounds the operations one stream may have in flight; a client
// that starts more is refused (each extra request gets an error response,
// nothing runs).
const MaxOps = 256

// ErrBusy answers a request over MaxOps.
var ErrBusy = errors.New("too many operations in flight on this session")

// Server answers one client over frames.
type Server struct {
	b    Backend
	fw   *wire.FrameWriter
	ctx  context.Context
	stop context.CancelFunc

	mu  sync.Mutex
	ops map[uint64]*op
	wg  sync.WaitGroup
}

// op is one operation in progress.
type op struct {
	req    wire.StreamRequest
	data   []byte // write: content received so far
	sealed bool   // write: its close came; the content is being written
	cancel context.CancelFunc
	ctx    context.Context
	// exec only:
	stdin          *wire.Inbox
	stdout, stderr *wire.Window
}

// Serve sends hello, then answers frames from in on out until in ends
// (nil), ctx ends, or the client breaks the protocol (an error naming
// what it sent). Operations still running when it returns are cancelled
// and waited for.
func Serve(ctx context.Context, in io.Reader, out io.Writer, b Backend, hello wire.Hello) error {
	ctx, stop := context.WithCancel(ctx)
	s := &Server{b: b, fw: wire.NewFrameWriter(out), ctx: ctx, stop: stop, ops: map[uint64]*op{}}
	defer s.wg.Wait()
	defer s.release()
	defer stop()
	hello.Version = wire.StreamVersion
	if err := s.fw.WriteJSON(wire.FrameHello, 0, hello); err != nil {
		return err
	}
	frames := make(chan error, 1)
	fr := wire.NewFrameReader(in)
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err == nil {
				err = s.dispatch(f)
			}
			if err != nil {
				frames <- err
				return
			}
		}
	}()
	select {
	case err := <-frames:
		if errors.Is(err, io.EOF) {
			return nil // the client let go: the session ends
		}
		return err
	case <-ctx.Done():
		return nil
	}
}

// release wakes every command waiting on the client: its output windows
// close (what it prints is dropped) and its input ends.
func (s *Server) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.ops {
		if o.stdout != nil {
			o.stdout.Close()
			o.stderr.Close()
		}
		if o.stdin != nil {
			o.stdin.Abort()
		}
	}
}

func (s *Server) op(id uint64) *op {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ops[id]
}

// dispatch handles one frame from the client. Frames for an operation
// that has already ended are dropped (they crossed its response).
func (s *Server) dispatch(f wire.Frame) error {
	switch f.Type {
	case wire.FrameRequest:
		return s.request(f)
	case wire.FrameData:
		o := s.op(f.ID)
		if o == nil {
			return nil
		}
		if !uploads(o.req.Op) || o.sealed || int64(len(o.data)+len(f.Payload)) > o.req.Size {
			return wire.ProtoErr("unexpected data for operation %d", f.ID)
		}
		o.data = append(o.data, f.Payload...)
	case wire.FrameClose:
		o := s.op(f.ID)
		if o == nil {
			return nil
		}
		switch {
		case wire.FrameType(f.Payload[0]) == wire.FrameData && uploads(o.req.Op) && !o.sealed && int64(len(o.data)) == o.req.Size:
			o.sealed = true // the content is complete: nothing may follow
			s.run(f.ID, o, func() wire.StreamResponse {
				return wire.StreamResponse{Err: wire.ToWire(s.b.Write(o.ctx, string(o.req.Path), o.data))}
			})
		case wire.FrameType(f.Payload[0]) == wire.FrameStdin && o.stdin != nil:
			o.stdin.End()
		case wire.FrameType(f.Payload[0]) == wire.FrameStdout && o.stdout != nil:
			o.stdout.Refuse() // the client's reader failed: the command gets SIGPIPE
		case wire.FrameType(f.Payload[0]) == wire.FrameStderr && o.stderr != nil:
			o.stderr.Refuse()
		default:
			return wire.ProtoErr("unexpected close for operation %d", f.ID)
		}
	case wire.FrameStdin:
		if o := s.op(f.ID); o != nil {
			if o.stdin == nil {
				return wire.ProtoErr("stdin for operation %d, which takes none", f.ID)
			}
			return o.stdin.Put(f.Payload)
		}
	case wire.FrameCredit:
		if o := s.op(f.ID); o != nil && o.stdout != nil {
			stream, n := wire.Credit(f)
			switch stream {
			case wire.FrameStdout:
				return o.stdout.Add(n)
			case wire.FrameStderr:
				return o.stderr.Add(n)
			}
			return wire.ProtoErr("credit for %v from the client", stream)
		}
	case wire.FrameCancel:
		if o := s.op(f.ID); o != nil {
			o.cancel()
		}
	default:
		return wire.ProtoErr("%v frame from the client", f.Type)
	}
	return nil
}

func (s *Server) request(f wire.Frame) error {
	var req wire.StreamRequest
	if err := wire.DecodeJSON(f.Payload, &req); err != nil {
		return err
	}
	o := &op{req: req}
	switch req.Op {
	case "read", "stat", "glob", "list", "search", "mkdir", "remove", "rename", "pack", "changed":
	case "write":
		if req.Size < 0 || req.Size > sandbox.MaxFileSize {
			return wire.ProtoErr("write of %d bytes", req.Size)
		}
	case "unpack":
		// The archive streams as the operation's input, within its
		// window, and is unpacked as it comes.
		if !req.Stdin {
			return wire.ProtoErr("unpack without its input stream")
		}
		o.stdin = wire.NewInboxSize(wire.UploadWindow)
	case "exec":
		o.stdout, o.stderr = wire.NewWindow(), wire.NewWindow()
		if req.Stdin {
			o.stdin = wire.NewInbox()
		}
	default:
		return wire.ProtoErr("unknown operation %q", req.Op)
	}
	if req.TimeoutMS < 0 {
		return wire.ProtoErr("negative timeout %d ms", req.TimeoutMS)
	}
	// A file operation's deadline comes with it; a command's timeout is
	// the command's own (the backend stops it), so its context only ends
	// with a cancel or the stream.
	if req.TimeoutMS > 0 && req.Op != "exec" {
		o.ctx, o.cancel = context.WithTimeout(s.ctx, time.Duration(req.TimeoutMS)*time.Millisecond)
	} else {
		o.ctx, o.cancel = context.WithCancel(s.ctx)
	}
	s.mu.Lock()
	if s.ops[f.ID] != nil {
		s.mu.Unlock()
		o.cancel()
		return wire.ProtoErr("operation id %d is in use", f.ID)
	}
	if len(s.ops) >= MaxOps {
		s.mu.Unlock()
		o.cancel()
		if uploads(req.Op) {
			// Its content follows and cannot be told apart from a
			// finished operation's late frames: the client broke the
			// bound it was given.
			return wire.ProtoErr("more than %d operations in flight", MaxOps)
		}
		return s.fw.WriteJSON(wire.FrameResponse, f.ID, wire.StreamResponse{Err: wire.ToWire(fmt.Errorf("%w (at most %d): wait for some to end", ErrBusy, MaxOps))})
	}
	if uploads(req.Op) {
		o.data = make([]byte, 0, req.Size)
	}
	s.ops[f.ID] = o
	s.mu.Unlock()
	switch req.Op {
	case "read":
		s.run(f.ID, o, func() wire.StreamResponse {
			data, fi, err := s.b.ReadStat(o.ctx, string(req.Path), req.Max)
			if err != nil {
				return wire.StreamResponse{Err: wire.ToWire(err)}
			}
			if err := s.fw.WriteData(wire.FrameData, f.ID, data, wire.MaxFramePayload, false); err != nil {
				return wire.StreamResponse{Err: wire.ToWire(err)}
			}
			return wire.StreamResponse{Info: &fi, Size: int64(len(data))}
		})
	case "stat":
		s.run(f.ID, o, func() wire.StreamResponse {
			fi, err := s.b.Stat(o.ctx, string(req.Path))
			return wire.StreamResponse{Info: &fi, Err: wire.ToWire(err)}
		})
	case "glob":
		s.run(f.ID, o, func() wire.StreamResponse {
			files, err := s.b.Glob(o.ctx, string(req.Pattern))
			if err != nil {
				return wire.StreamResponse{Err: wire.ToWire(err)}
			}
			return s.stream(f.ID, func(w io.Writer) error { _, err := w.Write(wire.JoinNames(files)); return err })
		})
	case "list":
		s.run(f.ID, o, func() wire.StreamResponse {
			ents, err := s.b.List(o.ctx, string(req.Path))
			if err != nil {
				return wire.StreamResponse{Err: wire.ToWire(err)}
			}
			return s.stream(f.ID, func(w io.Writer) error { return wire.WriteListing(w, ents) })
		})
	case "search":
		s.run(f.ID, o, func() wire.StreamResponse {
			if req.Search == nil {
				return wire.StreamResponse{Err: wire.ToWire(errors.New("search without a request"))}
			}
			res, err := s.b.Search(o.ctx, *req.Search)
			if err != nil {
				return wire.StreamResponse{Err: wire.ToWire(err)}
			}
			return s.stream(f.ID, func(w io.Writer) error { return wire.WriteSearch(w, res) })
		})
	case "mkdir", "remove", "rename":
		s.run(f.ID, o, func() wire.StreamResponse { return wire.StreamResponse{Err: wire.ToWire(s.manage(o.ctx, req))} })
	case "exec":
		s.run(f.ID, o, func() wire.StreamResponse {
			defer func() {
				o.stdout.Close()
				o.stderr.Close()
				if o.stdin != nil {
					o.stdin.Abort()
				}
			}()
			res := s.b.Exec(o.ctx, req, Stdio{ID: f.ID, Stdin: o.stdin, Stdout: o.stdout, Stderr: o.stderr, W: s.fw})
			return s.tails(f.ID, res)
		})
	case "pack":
		s.run(f.ID, o, func() wire.StreamResponse {
			t, ok := s.b.(Transfer)
			if !ok {
				return wire.StreamResponse{Err: wire.ToWire(errNoTransfer)}
			}
			return s.stream(f.ID, func(w io.Writer) error { return t.Pack(o.ctx, string(req.Path), sinceOf(req), w) })
		})
	case "changed":
		s.run(f.ID, o, func() wire.StreamResponse {
			t, ok := s.b.(Transfer)
			if !ok {
				return wire.StreamResponse{Err: wire.ToWire(errNoTransfer)}
			}
			ents, err := t.Changed(o.ctx, string(req.Path), sinceOf(req))
			if err != nil {
				return wire.StreamResponse{Err: wire.ToWire(err)}
			}
			return s.stream(f.ID, func(w io.Writer) error { return wire.WriteListing(w, ents) })
		})
	case "unpack":
		s.run(f.ID, o, func() wire.StreamResponse { return s.unpack(o, f.ID) })
	case "write":
		// The content follows; its close frame runs the operation.
	}
	return nil
}

// uploads reports the operations whose request is followed by content
// as data frames.
func uploads(op string) bool { return op == "write" }

func sinceOf(req wire.StreamRequest) time.Time {
	if req.Since == 0 {
		return time.Time{}
	}
	return time.Unix(0, req.Since)
}

// unpack writes the archive the client streams into the backend as it
// comes; an input cut off (the stream ended) is an error, never a short
// archive taken for a whole one.
func (s *Server) unpack(o *op, id uint64) wire.StreamResponse {
	defer o.stdin.Abort() // what the client still sends is dropped (and credited)
	t, ok := s.b.(Transfer)
	if !ok {
		return wire.StreamResponse{Err: wire.ToWire(errNoTransfer)}
	}
	n, err := t.Unpack(o.ctx, string(o.req.Path), Stdio{ID: id, Stdin: o.stdin, W: s.fw}.Reader())
	return wire.StreamResponse{Count: n, Err: wire.ToWire(err)}
}

// run answers operation id with what fn returns, from a goroutine of its
// own, and forgets the operation. An error response carries no file
// information.
func (s *Server) run(id uint64, o *op, fn func() wire.StreamResponse) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		res := fn()
		o.cancel()
		if res.Err != nil {
			res.Info = nil
		}
		s.mu.Lock()
		delete(s.ops, id)
		s.mu.Unlock()
		if err := s.fw.WriteJSON(wire.FrameResponse, id, res); errors.Is(err, sandbox.ErrTooLarge) {
			// An answer that does not fit in a frame is an error the
			// client gets, never a response it waits for in vain.
			_ = s.fw.WriteJSON(wire.FrameResponse, id, wire.StreamResponse{Err: wire.ToWire(fmt.Errorf("the answer to %s: %w", o.req.Op, err))})
		}
	}()
}

// tails sends the server's own tails of a command's output (see
// wire.StreamResponse.StdoutTail) as the operation's data, and counts
// them in the response.
func (s *Server) tails(id uint64, res wire.StreamResponse) wire.StreamResponse {
	for _, tail := range [][]byte{res.Stdout, res.Stderr} {
		if err := s.fw.WriteData(wire.FrameData, id, tail, wire.MaxFramePayload, false); err != nil {
			return wire.StreamResponse{Err: wire.ToWire(err)}
		}
	}
	res.StdoutTail, res.StderrTail = len(res.Stdout), len(res.Stderr)
	return res
}

// stream sends what write writes as the operation's data while it is
// written (in frames of up to streamChunk: a tree's archive is unpacked
// as it comes), and the response that counts it. After an error the data
// sent is void.
func (s *Server) stream(id uint64, write func(io.Writer) error) wire.StreamResponse {
	fw := &dataFrames{fw: s.fw, id: id}
	bw := bufio.NewWriterSize(fw, streamChunk)
	err := write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return wire.StreamResponse{Err: wire.ToWire(err)}
	}
	return wire.StreamResponse{Size: fw.n}
}

// streamChunk is the data frame size of a streamed answer.
const streamChunk = 256 << 10

// dataFrames sends each write as data frames of one operation.
type dataFrames struct {
	fw *wire.FrameWriter
	id uint64
	n  int64
}

func (d *dataFrames) Write(p []byte) (int, error) {
	if err := d.fw.WriteData(wire.FrameData, d.id, p, wire.MaxFramePayload, false); err != nil {
		return 0, err
	}
	d.n += int64(len(p))
	return len(p), nil
}

// manage is mkdir, remove and rename.
func (s *Server) manage(ctx context.Context, req wire.StreamRequest) error {
	switch req.Op {
	case "mkdir":
		return s.b.Mkdir(ctx, string(req.Path))
	case "remove":
		return s.b.Remove(ctx, string(req.Path), req.Recursive)
	}
	return s.b.Rename(ctx, string(req.Path), string(req.To))
}
