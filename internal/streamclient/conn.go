// Package streamclient is the client end of hutch's helper stream: framed,
// multiplexed file operations and commands (internal/wire's stream
// protocol) over one byte stream to a hutch that serves them where the
// files are — the helper inside a container, or `hutch serve` on another
// machine. It guarantees that every operation ends: with its response,
// with its context, or with ErrLost when the stream ends under it; it does
// not retry or reconnect (its callers decide that).
package streamclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/sandbox"
)

// ErrLost means the stream to the helper ended under an operation.
var ErrLost = errors.New("the connection to hutch's helper was lost")

// ErrNotStopped means a command's timeout came and the helper did not
// report the command's end within StopGrace.
var ErrNotStopped = errors.New("could not confirm the command was stopped")

// Gone says the peer of a tier went away for good (a container removed,
// a remote session ended): it matches Kind (the tier's ErrGone) and
// sandbox.ErrClosed, and says to make a new sandbox.
type Gone struct {
	Kind        error
	Who, Detail string
}

func (e *Gone) Error() string {
	return fmt.Sprintf("%s: %v (%s): make a new sandbox", e.Who, e.Kind, e.Detail)
}

// Is matches Kind and sandbox.ErrClosed.
func (e *Gone) Is(target error) bool { return target == e.Kind || target == sandbox.ErrClosed }

// StopGrace is how long past its deadline a call waits for the helper's
// answer (a file operation's, or a command's report once ExecGrace has
// run out).
const StopGrace = 5 * time.Second

// ExecGrace is how long after a command's timeout Exec waits for the
// helper to report its end before it returns ErrNotStopped: what the
// serving tier may itself take by its contract (sandbox.OutputGrace for
// the output of a child that outlived the command, then
// sandbox.LiveGrace for the live writers), plus StopGrace.
const ExecGrace = sandbox.OutputGrace + sandbox.LiveGrace + StopGrace

// helloTimeout bounds the wait for the helper's first frame.
const helloTimeout = 30 * time.Second

// Conn is the client's end of one helper session over a byte stream: a
// process's stdin and stdout (a runtime's `exec -i`, ssh, kubectl exec,
// `hutch serve --stdio`) or a network connection to `hutch serve
// --listen`. It is safe for concurrent use.
type Conn struct {
	rwc   io.ReadWriteCloser
	peer  string // who serves, for errors ("the helper in the container")
	hello wire.Hello
	fw    *wire.FrameWriter

	mu     sync.Mutex
	ops    map[uint64]*clientOp
	nextID uint64
	dead   error
	done   chan struct{}
}

// clientOp is one operation waiting for its response.
type clientOp struct {
	res     chan wire.StreamResponse
	data    []byte // read, glob
	dataMax int
	got     int         // data bytes received
	sink    *wire.Inbox // pack: the data goes here instead, as it comes
	// exec only:
	stdout, stderr *wire.Inbox
	stdin          *wire.Window
}

// Sayer is implemented by streams that know what the other end printed
// on the side (a process's stderr): Conn adds its last line to errors.
type Sayer interface {
	Says() string
}

// Open waits for the server's hello on rwc (at most 30 s, or until ctx
// ends) and returns the session. peer names the server in errors. rwc is
// closed when the Conn closes or fails, or when Open fails.
func Open(ctx context.Context, rwc io.ReadWriteCloser, peer string) (*Conn, error) {
	sc := &Conn{rwc: rwc, peer: peer, fw: wire.NewFrameWriter(rwc), ops: map[uint64]*clientOp{}, done: make(chan struct{})}
	fr := wire.NewFrameReader(rwc)
	hello := make(chan error, 1)
	go func() {
		f, err := fr.ReadFrame()
		if err == nil && f.Type != wire.FrameHello {
			err = fmt.Errorf("%w: first frame is %v, not hello", wire.ErrProtocol, f.Type)
		}
		var h wire.Hello
		if err == nil {
			err = wire.DecodeJSON(f.Payload, &h)
		}
		if err == nil && h.Version != wire.StreamVersion {
			err = fmt.Errorf("%s speaks protocol %d, this program %d: run the same hutch version on both ends", peer, h.Version, wire.StreamVersion)
		}
		sc.hello = h
		hello <- err
		if err == nil {
			sc.readLoop(fr)
		}
	}()
	timer := time.NewTimer(helloTimeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-hello:
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("no answer from %s within %v", peer, helloTimeout)
	}
	if err != nil {
		_ = rwc.Close()
		if msg := sc.Says(); msg != "" {
			err = fmt.Errorf("%v: %s", err, msg)
		}
		return nil, err
	}
	return sc, nil
}

// Dial starts c, a command whose stdin and stdout reach a helper stream
// server, and opens the session over them (see Open). The process is
// killed when the Conn closes or fails; c's Stdin, Stdout and Stderr
// must be unset.
func Dial(ctx context.Context, c *exec.Cmd, peer string) (*Conn, error) {
	cs, err := StartCommand(c)
	if err != nil {
		return nil, err
	}
	sc, err := Open(ctx, cs, peer)
	if err != nil {
		return nil, err
	}
	go func() {
		werr := cs.Wait()
		sc.fail(fmt.Errorf("%w: %s exited (%v)", ErrLost, peer, werr))
	}()
	return sc, nil
}

// CommandStream is a started command's stdin and stdout as one stream;
// Close kills the command. Its Says is the last line the command printed
// on stderr.
type CommandStream struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    io.ReadCloser
	errMu  sync.Mutex
	stderr *tierkit.TailBuffer
	waited chan struct{}
	werr   error
}

// StartCommand starts c with pipes for its stdin and stdout (and a bounded
// tail of its stderr); c's Stdin, Stdout and Stderr must be unset.
func StartCommand(c *exec.Cmd) (*CommandStream, error) {
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cs := &CommandStream{cmd: c, in: in, out: out, stderr: &tierkit.TailBuffer{Max: 4096}, waited: make(chan struct{})}
	c.Stderr = writerFunc(func(p []byte) (int, error) {
		cs.errMu.Lock()
		defer cs.errMu.Unlock()
		return cs.stderr.Write(p)
	})
	if err := c.Start(); err != nil {
		return nil, err
	}
	go func() {
		cs.werr = c.Wait()
		close(cs.waited)
	}()
	return cs, nil
}

func (cs *CommandStream) Read(p []byte) (int, error)  { return cs.out.Read(p) }
func (cs *CommandStream) Write(p []byte) (int, error) { return cs.in.Write(p) }

// Close kills the command (it sees EOF first when it still reads).
func (cs *CommandStream) Close() error {
	_ = cs.in.Close()
	return cs.cmd.Process.Kill()
}

// Wait waits for the command to end.
func (cs *CommandStream) Wait() error {
	<-cs.waited
	return cs.werr
}

// Says is the last line the command printed on stderr.
func (cs *CommandStream) Says() string {
	cs.errMu.Lock()
	defer cs.errMu.Unlock()
	return lastLine(cs.stderr.Bytes())
}

func lastLine(b []byte) string {
	msg := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[i+1:]
	}
	return msg
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Root is the directory the server roots file operations at, resolved
// on its side.
func (sc *Conn) Root() string { return sc.hello.Root }

// Says is the last line the helper (or the program that reaches it)
// printed on stderr, when the stream knows it.
func (sc *Conn) Says() string {
	if sy, ok := sc.rwc.(Sayer); ok {
		return sy.Says()
	}
	return ""
}

// Hello is what the server said of itself when the session began.
func (sc *Conn) Hello() wire.Hello { return sc.hello }

// Alive reports whether the session still carries operations.
func (sc *Conn) Alive() bool {
	if sc == nil {
		return false
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.dead == nil
}

// fail ends the session: every waiting operation gets err.
func (sc *Conn) fail(err error) {
	sc.mu.Lock()
	if sc.dead != nil {
		sc.mu.Unlock()
		return
	}
	if msg := sc.Says(); msg != "" && !errors.Is(err, sandbox.ErrClosed) {
		err = fmt.Errorf("%w: %s", err, msg)
	}
	sc.dead = err
	close(sc.done)
	sc.mu.Unlock()
	_ = sc.rwc.Close() // the helper sees EOF and ends its commands
}

// Close ends the session with err (sandbox.ErrClosed when the caller
// closes it): operations waiting get err, the process is killed.
func (sc *Conn) Close(err error) { sc.fail(err) }

// readLoop hands every frame to its operation, in order.
func (sc *Conn) readLoop(fr *wire.FrameReader) {
	for {
		f, err := fr.ReadFrame()
		if err == nil {
			err = sc.deliver(f)
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrClosed) {
				err = fmt.Errorf("%w: the stream ended", ErrLost)
			} else {
				err = fmt.Errorf("%w: %v", ErrLost, err)
			}
			sc.fail(err)
			return
		}
	}
}

func (sc *Conn) op(id uint64) *clientOp {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.ops[id]
}

// deliver routes one frame. Frames of an operation the host gave up on are
// dropped; anything the helper must never send is a protocol error.
func (sc *Conn) deliver(f wire.Frame) error {
	switch f.Type {
	case wire.FrameResponse:
		var r wire.StreamResponse
		if err := wire.DecodeJSON(f.Payload, &r); err != nil {
			return err
		}
		sc.mu.Lock()
		op := sc.ops[f.ID]
		delete(sc.ops, f.ID)
		sc.mu.Unlock()
		if op != nil {
			op.res <- r
		}
	case wire.FrameData:
		if op := sc.op(f.ID); op != nil {
			if op.dataMax == 0 || op.got+len(f.Payload) > op.dataMax {
				return fmt.Errorf("%w: unexpected data for operation %d", wire.ErrProtocol, f.ID)
			}
			op.got += len(f.Payload)
			if op.sink != nil {
				return op.sink.Put(f.Payload)
			}
			op.data = append(op.data, f.Payload...)
		}
	case wire.FrameStdout, wire.FrameStderr:
		if op := sc.op(f.ID); op != nil {
			if op.stdout == nil {
				return fmt.Errorf("%w: output for operation %d, which runs no command", wire.ErrProtocol, f.ID)
			}
			q := op.stdout
			if f.Type == wire.FrameStderr {
				q = op.stderr
			}
			return q.Put(f.Payload)
		}
	case wire.FrameCredit:
		if op := sc.op(f.ID); op != nil {
			stream, n := wire.Credit(f)
			if op.stdin == nil || stream != wire.FrameStdin {
				return fmt.Errorf("%w: credit for %v of operation %d", wire.ErrProtocol, stream, f.ID)
			}
			return op.stdin.Add(n)
		}
	default:
		return fmt.Errorf("%w: %v frame from the helper", wire.ErrProtocol, f.Type)
	}
	return nil
}

// start registers op under a new id and sends the request.
func (sc *Conn) start(op *clientOp, req wire.StreamRequest) (uint64, error) {
	op.res = make(chan wire.StreamResponse, 1)
	sc.mu.Lock()
	if sc.dead != nil {
		err := sc.dead
		sc.mu.Unlock()
		return 0, err
	}
	sc.nextID++
	id := sc.nextID
	sc.ops[id] = op
	sc.mu.Unlock()
	if err := sc.fw.WriteJSON(wire.FrameRequest, id, req); err != nil {
		sc.fail(fmt.Errorf("%w: %v", ErrLost, err))
		return 0, sc.deadErr()
	}
	return id, nil
}

func (sc *Conn) deadErr() error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.dead
}

// wait waits for op's response; a cancelled context abandons the
// operation (its late frames are dropped).
func (sc *Conn) wait(ctx context.Context, id uint64, op *clientOp) (wire.StreamResponse, error) {
	select {
	case r := <-op.res:
		return r, r.Err.Error()
	case <-sc.done:
		return wire.StreamResponse{}, sc.deadErr()
	case <-ctx.Done():
		sc.mu.Lock()
		delete(sc.ops, id)
		sc.mu.Unlock()
		return wire.StreamResponse{}, ctx.Err()
	}
}

// call runs one file operation: the request, then (for a write) the
// content, then the response.
func (sc *Conn) call(ctx context.Context, req wire.StreamRequest, dataMax int, content []byte) (wire.StreamResponse, []byte, error) {
	req = withDeadline(ctx, req)
	op := &clientOp{dataMax: dataMax}
	id, err := sc.start(op, req)
	if err != nil {
		return wire.StreamResponse{}, nil, err
	}
	if req.Op == "write" {
		if err := sc.fw.WriteData(wire.FrameData, id, content, wire.MaxFramePayload, true); err != nil {
			sc.fail(fmt.Errorf("%w: %v", ErrLost, err))
			return wire.StreamResponse{}, nil, sc.deadErr()
		}
	}
	res, err := sc.wait(ctx, id, op)
	if err != nil {
		return res, nil, err
	}
	if int64(len(op.data)) != res.Size {
		err := fmt.Errorf("%w: %d data bytes for a response of %d", wire.ErrProtocol, len(op.data), res.Size)
		sc.fail(fmt.Errorf("%w: %v", ErrLost, err))
		return res, nil, sc.deadErr()
	}
	return res, op.data, nil
}

// ReadStat reads the file at rel (at most max bytes when max > 0) and its information.
func (sc *Conn) ReadStat(ctx context.Context, rel string, max int64) ([]byte, sandbox.FileInfo, error) {
	limit := int64(sandbox.MaxFileSize)
	if max > 0 && max < limit {
		limit = max
	}
	res, data, err := sc.call(ctx, wire.StreamRequest{Op: "read", Path: []byte(rel), Max: max}, int(limit), nil)
	if err != nil {
		return nil, sandbox.FileInfo{}, err
	}
	if res.Info == nil {
		return nil, sandbox.FileInfo{}, fmt.Errorf("%w: read answered without file information", wire.ErrProtocol)
	}
	if data == nil {
		data = []byte{}
	}
	return data, *res.Info, nil
}

// Write replaces the file at rel with data.
func (sc *Conn) Write(ctx context.Context, rel string, data []byte) error {
	_, _, err := sc.call(ctx, wire.StreamRequest{Op: "write", Path: []byte(rel), Size: int64(len(data))}, 0, data)
	return err
}

// Stat describes the file at rel.
func (sc *Conn) Stat(ctx context.Context, rel string) (sandbox.FileInfo, error) {
	res, _, err := sc.call(ctx, wire.StreamRequest{Op: "stat", Path: []byte(rel)}, 0, nil)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	if res.Info == nil {
		return sandbox.FileInfo{}, fmt.Errorf("%w: stat answered without file information", wire.ErrProtocol)
	}
	return *res.Info, nil
}

// Glob lists the paths pattern matches (directories only when dirsOnly).
func (sc *Conn) Glob(ctx context.Context, pattern string, dirsOnly bool) ([]string, error) {
	if dirsOnly {
		pattern += "/"
	}
	_, data, err := sc.call(ctx, wire.StreamRequest{Op: "glob", Pattern: []byte(pattern)}, wire.MaxNamesBytes, nil)
	if err != nil {
		return nil, err
	}
	return wire.SplitNames(data), nil
}

// List describes the entries of the directory at rel.
func (sc *Conn) List(ctx context.Context, rel string) ([]sandbox.FileInfo, error) {
	_, data, err := sc.call(ctx, wire.StreamRequest{Op: "list", Path: []byte(rel)}, wire.MaxAnswerBytes, nil)
	if err != nil {
		return nil, err
	}
	return wire.ReadListing(data)
}

// Search runs req where the files are.
func (sc *Conn) Search(ctx context.Context, req sandbox.SearchRequest) (sandbox.SearchResult, error) {
	_, data, err := sc.call(ctx, wire.StreamRequest{Op: "search", Search: &req}, wire.MaxAnswerBytes, nil)
	if err != nil {
		return sandbox.SearchResult{}, err
	}
	return wire.ReadSearch(data)
}

// Mkdir creates the directory at rel and its parents.
func (sc *Conn) Mkdir(ctx context.Context, rel string) error {
	_, _, err := sc.call(ctx, wire.StreamRequest{Op: "mkdir", Path: []byte(rel)}, 0, nil)
	return err
}

// Remove removes the file or empty directory at rel (a tree when recursive).
func (sc *Conn) Remove(ctx context.Context, rel string, recursive bool) error {
	_, _, err := sc.call(ctx, wire.StreamRequest{Op: "remove", Path: []byte(rel), Recursive: recursive}, 0, nil)
	return err
}

// Rename moves from to to.
func (sc *Conn) Rename(ctx context.Context, from, to string) error {
	_, _, err := sc.call(ctx, wire.StreamRequest{Op: "rename", Path: []byte(from), To: []byte(to)}, 0, nil)
	return err
}

// Pack streams the regular files under dir changed after since (all when
// zero) as one tar stream, read where the files are in one operation,
// into consume as it comes (the reader ends when the server's answer
// does; it fails with the server's error, or with consume's context).
// When consume fails, the server is told to stop and consume's error is
// Pack's. What consume did before a failure stays done.
func (sc *Conn) Pack(ctx context.Context, dir string, since time.Time, consume func(io.Reader) error) error {
	req := withDeadline(ctx, wire.StreamRequest{Op: "pack", Path: []byte(dir), Since: unixNano(since)})
	op := &clientOp{dataMax: sandbox.MaxFileSize + packOverhead}
	// No window: the answer is bounded by dataMax, as a read's is.
	q := wire.NewInboxSize(op.dataMax)
	op.sink = q
	id, err := sc.start(op, req)
	if err != nil {
		return err
	}
	answered := make(chan error, 1)
	go func() {
		res, err := sc.wait(ctx, id, op)
		if err == nil && int64(op.got) != res.Size {
			err = fmt.Errorf("%w: %d data bytes for a response of %d", wire.ErrProtocol, op.got, res.Size)
		}
		if ctx.Err() != nil {
			_ = sc.fw.WriteFrame(wire.FrameCancel, id, nil)
		}
		if err != nil {
			q.Fail(err)
		} else {
			q.End()
		}
		answered <- err
	}()
	cerr := consume(q.Reader(nil))
	if cerr != nil {
		_ = sc.fw.WriteFrame(wire.FrameCancel, id, nil) // the server stops packing
	}
	q.Abort() // a consumer that stopped early: drop the rest
	err = <-answered
	if cerr != nil {
		return cerr // the consumer's failure, not the cancel's that followed it
	}
	return err
}

// packOverhead bounds a pack's tar headers beyond its content.
const packOverhead = 64 << 20

// Unpack writes the files of the tar stream r below dir, in one
// operation, and says how many it wrote. The archive streams as the
// operation's input, within the window the server credits, while the
// server unpacks what came: r is read as the server takes it, never
// held whole. An error of r ends the input early; the server then fails
// on the archive cut short.
func (sc *Conn) Unpack(ctx context.Context, dir string, r io.Reader) (int, error) {
	req := withDeadline(ctx, wire.StreamRequest{Op: "unpack", Path: []byte(dir), Stdin: true})
	op := &clientOp{stdin: wire.NewWindowSize(wire.UploadWindow)}
	id, err := sc.start(op, req)
	if err != nil {
		return 0, err
	}
	defer op.stdin.Close() // the answer came (or the call is abandoned): stop sending
	go sc.sendStdin(id, op.stdin, r)
	res, err := sc.wait(ctx, id, op)
	if ctx.Err() != nil {
		_ = sc.fw.WriteFrame(wire.FrameCancel, id, nil) // the server stops unpacking
	}
	return res.Count, err
}

// Changed describes the regular files under dir changed after since.
func (sc *Conn) Changed(ctx context.Context, dir string, since time.Time) ([]sandbox.FileInfo, error) {
	_, data, err := sc.call(ctx, wire.StreamRequest{Op: "changed", Path: []byte(dir), Since: unixNano(since)}, wire.MaxAnswerBytes, nil)
	if err != nil {
		return nil, err
	}
	return wire.ReadListing(data)
}

// withDeadline is req carrying ctx's deadline, when it has one: the
// server holds the operation no longer than this side waits.
func withDeadline(ctx context.Context, req wire.StreamRequest) wire.StreamRequest {
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMS = max(1, time.Until(dl).Milliseconds())
	}
	return req
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Exec runs one command over the stream: its input is sent within the
// window the helper credits, its output is credited as it is consumed,
// and its result comes after the last output frame.
func (sc *Conn) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	argv := cmd.Args
	if cmd.Shell != "" {
		argv = []string{"/bin/sh", "-c", cmd.Shell}
	}
	req := wire.StreamRequest{Op: "exec", Dir: []byte(cmd.Dir), TimeoutMS: cmd.Timeout.Milliseconds(), Stdin: cmd.Stdin != nil, MaxOutput: cmd.MaxOutput}
	for _, a := range argv {
		req.Argv = append(req.Argv, []byte(a))
	}
	for _, kv := range tierkit.EnvList(cmd.Env) {
		req.Env = append(req.Env, []byte(kv))
	}
	// The server's own tails of the output, up to MaxOutput each, may
	// come as data (see wire.StreamResponse.StdoutTail).
	tailMax := cmd.MaxOutput
	if tailMax <= 0 {
		tailMax = sandbox.DefaultMaxOutput
	}
	op := &clientOp{stdout: wire.NewInbox(), stderr: wire.NewInbox(), stdin: wire.NewWindow(), dataMax: 2 * tailMax}
	begin := time.Now()
	id, err := sc.start(op, req)
	if err != nil {
		return sandbox.Result{}, err
	}
	stdout := &tierkit.TailBuffer{Max: cmd.MaxOutput}
	stderr := &tierkit.TailBuffer{Max: cmd.MaxOutput}
	live := tierkit.NewLives(cmd)
	var wg sync.WaitGroup
	wg.Add(2)
	go sc.consume(&wg, id, wire.FrameStdout, op.stdout, stdout, live[0])
	go sc.consume(&wg, id, wire.FrameStderr, op.stderr, stderr, live[1])
	// From the timeout on, a stalled live writer holds nothing up: the
	// helper reports the end only once it has sent all the output, which
	// needs this side's credits.
	unblock := time.AfterFunc(cmd.Timeout, live.Unblock)
	defer unblock.Stop()
	if cmd.Stdin != nil {
		go sc.sendStdin(id, op.stdin, cmd.Stdin)
	}
	end := func() {
		op.stdin.Close()
		op.stdout.End()
		op.stderr.End()
	}
	// The helper enforces the timeout; this guard only catches a helper
	// that does not report (a paused container).
	guard := time.NewTimer(cmd.Timeout + ExecGrace)
	defer guard.Stop()
	var res wire.StreamResponse
	var stop error
	select {
	case res = <-op.res:
	case <-sc.done:
		end()
		return sandbox.Result{}, sc.deadErr()
	case <-guard.C:
		stop = fmt.Errorf("%w: the command's timeout came and %s did not report its end within %v (is it paused? it stops the command once it runs again)", ErrNotStopped, sc.peer, ExecGrace)
	case <-ctx.Done():
		stop = ctx.Err()
	}
	if stop != nil {
		// Stop the command; keep crediting its output until its response
		// (or the end of the session), so the helper never waits on us.
		// The caller stops listening: nothing more goes live.
		live.Close(0)
		_ = sc.fw.WriteFrame(wire.FrameCancel, id, nil)
		go func() {
			select {
			case <-op.res:
			case <-sc.done:
			}
			end()
		}()
		return sandbox.Result{}, stop
	}
	end()
	live.Unblock() // the command is over: its output is read without waiting
	wg.Wait()
	live.Close(sandbox.LiveGrace)
	if err := res.Err.Error(); err != nil {
		return sandbox.Result{}, err
	}
	out := tierkit.Captured(begin, stdout, stderr)
	out.TimedOut = res.TimedOut
	if st := res.Status; st != nil {
		st.Report(&out)
	}
	out.Limit = res.Limit
	if res.Signal != "" {
		out.Signal = res.Signal
	}
	out.Blocked, out.BlockedOmitted = res.Blocked, res.BlockedOmitted
	// A server whose live copy was cut short sends its own tails.
	if res.StdoutTail < 0 || res.StderrTail < 0 || res.StdoutTail+res.StderrTail != len(op.data) {
		return sandbox.Result{}, fmt.Errorf("%w: %d bytes of output tails for a response that counts %d and %d", wire.ErrProtocol, len(op.data), res.StdoutTail, res.StderrTail)
	}
	if res.StdoutSize > out.StdoutSize {
		tail := op.data[:res.StdoutTail]
		out.Stdout, out.StdoutSize, out.StdoutTruncated = tail, res.StdoutSize, res.StdoutSize > int64(len(tail))
	}
	if res.StderrSize > out.StderrSize {
		tail := op.data[res.StdoutTail:]
		out.Stderr, out.StderrSize, out.StderrTruncated = tail, res.StderrSize, res.StderrSize > int64(len(tail))
	}
	return out, nil
}

// consume feeds one output stream into its bounded buffer (and the live
// writer while the caller listens), crediting each chunk back.
func (sc *Conn) consume(wg *sync.WaitGroup, id uint64, t wire.FrameType, in *wire.Inbox, buf *tierkit.TailBuffer, live *tierkit.Live) {
	defer wg.Done()
	refused := false
	for {
		chunk, ok := in.Next()
		if !ok {
			return
		}
		_, _ = buf.Write(chunk)
		// A live writer that failed takes nothing more (its Write
		// returns the error at once), and the helper is told to close the
		// stream at its source: the command's next write gets SIGPIPE, as
		// on the tiers where the command writes into hutch's own pipe.
		if _, err := live.Write(chunk); err != nil && !refused {
			refused = true
			_ = sc.fw.WriteFrame(wire.FrameClose, id, []byte{byte(t)})
		}
		_ = sc.fw.WriteFrame(wire.FrameCredit, id, wire.CreditPayload(t, len(chunk)))
	}
}

// sendStdin sends the command's input within its window, then a close.
// A reader that blocks keeps this goroutine until it returns (as with
// os/exec).
func (sc *Conn) sendStdin(id uint64, win *wire.Window, r io.Reader) {
	buf := make([]byte, wire.StreamChunk)
	for {
		n := win.Take(wire.StreamChunk)
		if n == 0 {
			return // the command is over
		}
		k, err := r.Read(buf[:n])
		if k < n {
			_ = win.Add(n - k)
		}
		if k > 0 && sc.fw.WriteFrame(wire.FrameStdin, id, buf[:k]) != nil {
			return
		}
		if err != nil {
			_ = sc.fw.WriteFrame(wire.FrameClose, id, []byte{byte(wire.FrameStdin)})
			return
		}
	}
}
