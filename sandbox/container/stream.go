package container

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

// errLost: the stream to the helper ended under an operation.
var errLost = errors.New("the connection to hutch's helper in the container was lost")

// isLost reports an error that may mean the container went away: the
// helper's stream ended, or the runtime's exec failed.
func isLost(err error) bool { return errors.Is(err, errLost) || errors.Is(err, errRuntime) }

// helloTimeout bounds the wait for the helper's first frame.
const helloTimeout = 30 * time.Second

// streamConn is the host's end of one helper session: the runtime's
// `exec -i` process, whose stdin and stdout carry the frames.
type streamConn struct {
	cmd    *exec.Cmd
	fw     *wire.FrameWriter
	stderr *tierkit.TailBuffer // the helper's own messages, for errors
	errMu  sync.Mutex

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
	// exec only:
	stdout, stderr *wire.Inbox
	stdin          *wire.Window
}

// dial starts the helper with args and waits for its hello.
func dial(ctx context.Context, prog string, args []string, root string) (*streamConn, error) {
	c := exec.Command(prog, args...)
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	sc := &streamConn{cmd: c, fw: wire.NewFrameWriter(in), stderr: &tierkit.TailBuffer{Max: 4096},
		ops: map[uint64]*clientOp{}, done: make(chan struct{})}
	c.Stderr = writerFunc(func(p []byte) (int, error) {
		sc.errMu.Lock()
		defer sc.errMu.Unlock()
		return sc.stderr.Write(p)
	})
	if err := c.Start(); err != nil {
		return nil, err
	}
	fr := wire.NewFrameReader(out)
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
			err = fmt.Errorf("the helper in the container speaks protocol %d, this program %d (a container made by another hutch version?)", h.Version, wire.StreamVersion)
		}
		hello <- err
		if err == nil {
			sc.readLoop(fr)
		}
	}()
	timer := time.NewTimer(helloTimeout)
	defer timer.Stop()
	select {
	case err = <-hello:
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = errors.New("no answer from the helper")
	}
	if err != nil {
		_ = c.Process.Kill()
		_ = c.Wait()
		if msg := sc.helperSays(); msg != "" {
			err = fmt.Errorf("%v: %s", err, msg)
		}
		return nil, err
	}
	go func() {
		werr := c.Wait()
		sc.fail(fmt.Errorf("%w: the helper exited (%v)", errLost, werr))
	}()
	return sc, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// helperSays is the last line the helper (or the runtime) printed on
// stderr.
func (sc *streamConn) helperSays() string {
	sc.errMu.Lock()
	defer sc.errMu.Unlock()
	msg := strings.TrimSpace(string(sc.stderr.Bytes()))
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[i+1:]
	}
	return msg
}

func (sc *streamConn) alive() bool {
	if sc == nil {
		return false
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.dead == nil
}

// fail ends the session: every waiting operation gets err.
func (sc *streamConn) fail(err error) {
	sc.mu.Lock()
	if sc.dead != nil {
		sc.mu.Unlock()
		return
	}
	if msg := sc.helperSays(); msg != "" && !errors.Is(err, sandbox.ErrClosed) {
		err = fmt.Errorf("%w: %s", err, msg)
	}
	sc.dead = err
	close(sc.done)
	sc.mu.Unlock()
	_ = sc.cmd.Process.Kill() // the helper sees EOF and ends its commands
}

func (sc *streamConn) close(err error) { sc.fail(err) }

// readLoop hands every frame to its operation, in order.
func (sc *streamConn) readLoop(fr *wire.FrameReader) {
	for {
		f, err := fr.ReadFrame()
		if err == nil {
			err = sc.deliver(f)
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrClosed) {
				err = fmt.Errorf("%w: the stream ended", errLost)
			} else {
				err = fmt.Errorf("%w: %v", errLost, err)
			}
			sc.fail(err)
			return
		}
	}
}

func (sc *streamConn) op(id uint64) *clientOp {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.ops[id]
}

// deliver routes one frame. Frames of an operation the host gave up on are
// dropped; anything the helper must never send is a protocol error.
func (sc *streamConn) deliver(f wire.Frame) error {
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
			if op.dataMax == 0 || len(op.data)+len(f.Payload) > op.dataMax {
				return fmt.Errorf("%w: unexpected data for operation %d", wire.ErrProtocol, f.ID)
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
func (sc *streamConn) start(op *clientOp, req wire.StreamRequest) (uint64, error) {
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
		sc.fail(fmt.Errorf("%w: %v", errLost, err))
		return 0, sc.deadErr()
	}
	return id, nil
}

func (sc *streamConn) deadErr() error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.dead
}

// wait waits for op's response; a cancelled context abandons the
// operation (its late frames are dropped).
func (sc *streamConn) wait(ctx context.Context, id uint64, op *clientOp) (wire.StreamResponse, error) {
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
func (sc *streamConn) call(ctx context.Context, req wire.StreamRequest, dataMax int, content []byte) (wire.StreamResponse, []byte, error) {
	op := &clientOp{dataMax: dataMax}
	id, err := sc.start(op, req)
	if err != nil {
		return wire.StreamResponse{}, nil, err
	}
	if req.Op == "write" {
		if err := sc.fw.WriteData(wire.FrameData, id, content, wire.MaxFramePayload, true); err != nil {
			sc.fail(fmt.Errorf("%w: %v", errLost, err))
			return wire.StreamResponse{}, nil, sc.deadErr()
		}
	}
	res, err := sc.wait(ctx, id, op)
	if err != nil {
		return res, nil, err
	}
	if int64(len(op.data)) != res.Size {
		err := fmt.Errorf("%w: %d data bytes for a response of %d", wire.ErrProtocol, len(op.data), res.Size)
		sc.fail(fmt.Errorf("%w: %v", errLost, err))
		return res, nil, sc.deadErr()
	}
	return res, op.data, nil
}

func (sc *streamConn) readStat(ctx context.Context, rel string, max int64) ([]byte, sandbox.FileInfo, error) {
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

func (sc *streamConn) write(ctx context.Context, rel string, data []byte) error {
	_, _, err := sc.call(ctx, wire.StreamRequest{Op: "write", Path: []byte(rel), Size: int64(len(data))}, 0, data)
	return err
}

func (sc *streamConn) stat(ctx context.Context, rel string) (sandbox.FileInfo, error) {
	res, _, err := sc.call(ctx, wire.StreamRequest{Op: "stat", Path: []byte(rel)}, 0, nil)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	if res.Info == nil {
		return sandbox.FileInfo{}, fmt.Errorf("%w: stat answered without file information", wire.ErrProtocol)
	}
	return *res.Info, nil
}

func (sc *streamConn) glob(ctx context.Context, pattern string, dirsOnly bool) ([]string, error) {
	if dirsOnly {
		pattern += "/"
	}
	_, data, err := sc.call(ctx, wire.StreamRequest{Op: "glob", Pattern: []byte(pattern)}, wire.MaxNamesBytes, nil)
	if err != nil {
		return nil, err
	}
	return wire.SplitNames(data), nil
}

func (sc *streamConn) list(ctx context.Context, rel string) ([]sandbox.FileInfo, error) {
	_, data, err := sc.call(ctx, wire.StreamRequest{Op: "list", Path: []byte(rel)}, wire.MaxAnswerBytes, nil)
	if err != nil {
		return nil, err
	}
	return wire.ReadListing(data)
}

func (sc *streamConn) search(ctx context.Context, req sandbox.SearchRequest) (sandbox.SearchResult, error) {
	_, data, err := sc.call(ctx, wire.StreamRequest{Op: "search", Search: &req}, wire.MaxAnswerBytes, nil)
	if err != nil {
		return sandbox.SearchResult{}, err
	}
	return wire.ReadSearch(data)
}

func (sc *streamConn) mkdir(ctx context.Context, rel string) error {
	_, _, err := sc.call(ctx, wire.StreamRequest{Op: "mkdir", Path: []byte(rel)}, 0, nil)
	return err
}

func (sc *streamConn) remove(ctx context.Context, rel string, recursive bool) error {
	_, _, err := sc.call(ctx, wire.StreamRequest{Op: "remove", Path: []byte(rel), Recursive: recursive}, 0, nil)
	return err
}

func (sc *streamConn) rename(ctx context.Context, from, to string) error {
	_, _, err := sc.call(ctx, wire.StreamRequest{Op: "rename", Path: []byte(from), To: []byte(to)}, 0, nil)
	return err
}

// exec runs one command over the stream: its input is sent within the
// window the helper credits, its output is credited as it is consumed,
// and its result comes after the last output frame.
func (sc *streamConn) exec(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	argv := cmd.Args
	if cmd.Shell != "" {
		argv = []string{"/bin/sh", "-c", cmd.Shell}
	}
	req := wire.StreamRequest{Op: "exec", Dir: []byte(cmd.Dir), TimeoutMS: cmd.Timeout.Milliseconds(), Stdin: cmd.Stdin != nil}
	for _, a := range argv {
		req.Argv = append(req.Argv, []byte(a))
	}
	for _, kv := range tierkit.EnvList(cmd.Env) {
		req.Env = append(req.Env, []byte(kv))
	}
	op := &clientOp{stdout: wire.NewInbox(), stderr: wire.NewInbox(), stdin: wire.NewWindow()}
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
	guard := time.NewTimer(cmd.Timeout + StopGrace)
	defer guard.Stop()
	var res wire.StreamResponse
	var stop error
	select {
	case res = <-op.res:
	case <-sc.done:
		end()
		return sandbox.Result{}, sc.deadErr()
	case <-guard.C:
		stop = fmt.Errorf("%w: the command's timeout came and hutch's helper did not report its end within %v (is the container paused? the helper stops it once the container runs again)", ErrNotStopped, StopGrace)
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
	return out, nil
}

// consume feeds one output stream into its bounded buffer (and the live
// writer while the caller listens), crediting each chunk back.
func (sc *streamConn) consume(wg *sync.WaitGroup, id uint64, t wire.FrameType, in *wire.Inbox, buf *tierkit.TailBuffer, live *tierkit.Live) {
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
func (sc *streamConn) sendStdin(id uint64, win *wire.Window, r io.Reader) {
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
