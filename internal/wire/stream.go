package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hutchsandbox/hutch/sandbox"
)

// The stream protocol: how a host talks to the helper over one byte stream
// (the container tier's `docker exec -i`, where no socket or descriptor
// passing is available). Everything — requests, answers, file contents,
// and every command's standard streams — travels as frames, multiplexed
// by operation id:
//
//	+----------------+--------+----------------+-----------------+
//	| length: uint32 | type:1 | id: uint64     | payload: length |
//	+----------------+--------+----------------+-----------------+
//
// big-endian, with a payload of at most MaxFramePayload bytes. The helper
// speaks first: a Hello frame (id 0) naming the protocol version. The host
// sends one Request frame per operation with a fresh id; the helper ends
// each operation with one Response frame carrying that id. Between them:
//
//   - read and glob: the helper sends the content (for glob, the matches
//     separated by NUL bytes) as Data frames before the Response, which
//     says how many bytes came;
//   - write: the host sends the content as Data frames after the Request
//     and ends it with a Close frame for the Data stream;
//   - exec: the host sends the command's input as Stdin frames and a Close
//     frame; the helper sends Stdout and Stderr frames, all of them before
//     the Response. The host may send Cancel for a running exec.
//
// Command streams are flow-controlled so that one slow reader never stalls
// the shared stream: each direction of each stream may have at most
// StreamWindow bytes in flight; the receiver returns Credit frames as it
// consumes them, and a sender that exceeds its window is a protocol error.
// Decoding is strict: an unknown type, an oversized or malformed frame,
// or a JSON payload with unknown fields or trailing bytes is an error, and
// the stream is then unusable (both sides drop it).

// StreamVersion is the stream protocol's version, sent in Hello. A host
// and a helper of different versions do not talk.
const StreamVersion = 3

// Frame sizes.
const (
	FrameHeaderSize = 13      // length, type, id
	MaxFramePayload = 1 << 20 // one frame's payload, at most
	// StreamChunk is the largest Stdin, Stdout or Stderr payload a sender
	// makes (frames may be smaller).
	StreamChunk = 32 << 10
	// StreamWindow is how many bytes of one command stream may be sent
	// and not yet credited.
	StreamWindow = 256 << 10
	// UploadWindow is the window of an archive streamed as an
	// operation's input (unpack): a tree's copy is bulk, and a window of
	// a command's size would cap it at StreamWindow per round trip.
	UploadWindow = 8 << 20
)

// FrameType says what a frame carries.
type FrameType uint8

// The frame types.
const (
	FrameHello    FrameType = 1  // helper → host, id 0: JSON Hello
	FrameRequest  FrameType = 2  // host → helper: JSON StreamRequest
	FrameResponse FrameType = 3  // helper → host: JSON StreamResponse, ends the id
	FrameData     FrameType = 4  // file content or glob matches, either way
	FrameStdin    FrameType = 5  // host → helper: command input
	FrameStdout   FrameType = 6  // helper → host
	FrameStderr   FrameType = 7  // helper → host
	FrameClose    FrameType = 8  // end of a stream: payload is its type (Data or Stdin; host → helper also Stdout or Stderr: the host stopped reading it)
	FrameCredit   FrameType = 9  // payload: stream type, then uint32 bytes consumed
	FrameCancel   FrameType = 10 // host → helper: stop the exec with this id
)

// String names the type ("request", "stdout"...).
func (t FrameType) String() string {
	names := [...]string{"", "hello", "request", "response", "data", "stdin", "stdout", "stderr", "close", "credit", "cancel"}
	if int(t) < len(names) && t != 0 {
		return names[t]
	}
	return fmt.Sprintf("frame type %d", uint8(t))
}

// Frame is one decoded frame. Payload is only valid until the next
// ReadFrame on the same reader.
type Frame struct {
	Type    FrameType
	ID      uint64
	Payload []byte
}

// ErrProtocol: the other side sent something the protocol does not allow.
// The stream cannot be used after it.
var ErrProtocol = errors.New("stream protocol violation")

// ProtoErr is an [ErrProtocol] that says what was wrong.
func ProtoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// FrameReader decodes frames from a byte stream. It is for one reader.
type FrameReader struct {
	r   *bufio.Reader
	hdr [FrameHeaderSize]byte
	buf []byte
}

// NewFrameReader reads frames from r.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// ReadFrame returns the next frame. io.EOF means the stream ended cleanly
// between frames; a stream cut inside a frame is io.ErrUnexpectedEOF; a
// malformed frame is ErrProtocol.
func (fr *FrameReader) ReadFrame() (Frame, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(fr.hdr[0:4])
	f := Frame{Type: FrameType(fr.hdr[4]), ID: binary.BigEndian.Uint64(fr.hdr[5:13])}
	if n > MaxFramePayload {
		return Frame{}, ProtoErr("%v frame of %d bytes is over the %d byte limit", f.Type, n, MaxFramePayload)
	}
	if cap(fr.buf) < int(n) {
		fr.buf = make([]byte, n)
	}
	f.Payload = fr.buf[:n]
	if _, err := io.ReadFull(fr.r, f.Payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	return f, CheckFrame(f)
}

// CheckFrame validates a frame's type, id and payload shape.
func CheckFrame(f Frame) error {
	n := len(f.Payload)
	if (f.Type == FrameHello) != (f.ID == 0) {
		return ProtoErr("%v frame with id %d: id 0 is for hello only", f.Type, f.ID)
	}
	switch f.Type {
	case FrameHello, FrameRequest, FrameResponse:
		if n < 2 || f.Payload[0] != '{' {
			return ProtoErr("%v frame does not hold a JSON object", f.Type)
		}
	case FrameData, FrameStdin, FrameStdout, FrameStderr:
		if n == 0 {
			return ProtoErr("empty %v frame", f.Type)
		}
		if f.Type != FrameData && n > StreamChunk {
			return ProtoErr("%v frame of %d bytes is over the %d byte chunk", f.Type, n, StreamChunk)
		}
	case FrameClose:
		if n != 1 {
			return ProtoErr("close frame must name one stream")
		}
		switch FrameType(f.Payload[0]) {
		case FrameData, FrameStdin, FrameStdout, FrameStderr:
		default:
			return ProtoErr("close frame must name the data, stdin, stdout or stderr stream")
		}
	case FrameCredit:
		if n != 5 {
			return ProtoErr("credit frame of %d bytes, want 5", n)
		}
		if s := FrameType(f.Payload[0]); s != FrameStdin && s != FrameStdout && s != FrameStderr {
			return ProtoErr("credit for %v, which is not a command stream", s)
		}
		if c := binary.BigEndian.Uint32(f.Payload[1:]); c == 0 || c > StreamWindow {
			return ProtoErr("credit of %d bytes is outside 1..%d", c, StreamWindow)
		}
	case FrameCancel:
		if n != 0 {
			return ProtoErr("cancel frame with a payload")
		}
	default:
		return ProtoErr("unknown frame type %d", uint8(f.Type))
	}
	return nil
}

// Credit decodes a Credit frame's stream and amount (the frame must have
// passed CheckFrame).
func Credit(f Frame) (FrameType, int) {
	return FrameType(f.Payload[0]), int(binary.BigEndian.Uint32(f.Payload[1:]))
}

// CreditPayload encodes a credit of n bytes (1..StreamWindow) for stream.
func CreditPayload(stream FrameType, n int) []byte {
	b := []byte{byte(stream), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(n))
	return b
}

// DecodeJSON decodes a Hello, Request or Response payload strictly:
// unknown fields and trailing bytes are errors.
func DecodeJSON(payload []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return ProtoErr("bad JSON payload: %v", err)
	}
	if dec.More() {
		return ProtoErr("trailing bytes after the JSON payload")
	}
	return nil
}

// FrameWriter encodes frames onto a byte stream. It is safe for concurrent
// use: each frame is written whole, in one Write call.
type FrameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	err error
}

// NewFrameWriter writes frames to w.
func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w} }

// WriteFrame sends one frame. After a write error every later call fails
// with the same error.
func (fw *FrameWriter) WriteFrame(t FrameType, id uint64, payload []byte) error {
	if len(payload) > MaxFramePayload {
		return fmt.Errorf("%w: frame payload of %d bytes is over %d", sandbox.ErrTooLarge, len(payload), MaxFramePayload)
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.err != nil {
		return fw.err
	}
	b := fw.buf[:0]
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	b = append(b, byte(t))
	b = binary.BigEndian.AppendUint64(b, id)
	b = append(b, payload...)
	_, fw.err = fw.w.Write(b)
	if cap(b) <= 64<<10 {
		fw.buf = b // keep small buffers; let big ones go
	}
	return fw.err
}

// WriteJSON sends v as the JSON payload of a frame.
func (fw *FrameWriter) WriteJSON(t FrameType, id uint64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return fw.WriteFrame(t, id, b)
}

// WriteData sends data as frames of type t (at most chunk bytes each),
// then, when closeAfter, a Close frame for t.
func (fw *FrameWriter) WriteData(t FrameType, id uint64, data []byte, chunk int, closeAfter bool) error {
	for len(data) > 0 {
		n := min(len(data), chunk)
		if err := fw.WriteFrame(t, id, data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	if closeAfter {
		return fw.WriteFrame(FrameClose, id, []byte{byte(t)})
	}
	return nil
}

// Hello is the helper's first frame.
type Hello struct {
	Version int `json:"version"`
	// PID is the helper's process id inside the container.
	PID int `json:"pid"`
	// Root is the directory file operations are rooted at, resolved.
	Root string `json:"root"`
	// What `hutch serve` says of the sandbox it serves (the container's
	// helper leaves them empty): the tier's name, its Instructions, its
	// Scope, and the features it supports.
	Tier         string            `json:"tier,omitempty"`
	Instructions string            `json:"instructions,omitempty"`
	Scope        string            `json:"scope,omitempty"`
	Features     []sandbox.Feature `json:"features,omitempty"`
}

// StreamRequest is one operation. Paths, patterns, arguments and
// environment entries are byte strings (JSON base64), so names that are
// not valid UTF-8 arrive intact.
type StreamRequest struct {
	Op   string `json:"op"` // read, write, stat, glob, list, mkdir, remove, rename, search, exec, pack, unpack, changed
	Path []byte `json:"path,omitempty"`
	// To is a rename's new path; Recursive a remove's.
	To        []byte `json:"to,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
	// Search is a search's request (its answer comes as data, see
	// WriteSearch; a list's as WriteListing).
	Search  *sandbox.SearchRequest `json:"search,omitempty"`
	Max     int64                  `json:"max,omitempty"`  // read: at most this many bytes (0: all)
	Size    int64                  `json:"size,omitempty"` // write: the content's length
	Pattern []byte                 `json:"pattern,omitempty"`
	Argv    [][]byte               `json:"argv,omitempty"`
	// Env is added to the helper's base environment (PATH, HOME, LANG).
	Env       [][]byte `json:"env,omitempty"`
	Dir       []byte   `json:"dir,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"`
	// Stdin says Stdin frames follow; without it the command's input is
	// empty.
	Stdin bool `json:"stdin,omitempty"`
	// Since, for pack and changed, is a time in Unix nanoseconds: only
	// files changed after it (0: all).
	Since int64 `json:"since,omitempty"`
	// MaxOutput is how much of each output stream the caller keeps (0:
	// the default), so a server that captures too reports the same.
	MaxOutput int `json:"max_output,omitempty"`
}

// StreamResponse ends one operation.
type StreamResponse struct {
	Err  *WireError        `json:"err,omitempty"`
	Info *sandbox.FileInfo `json:"info,omitempty"`
	// Size is how many Data bytes came before this response (read, glob).
	Size     int64   `json:"size,omitempty"`
	Status   *Status `json:"status,omitempty"`
	TimedOut bool    `json:"timed_out,omitempty"`
	// Limit names the container's cgroup limit ("memory", "pids") whose
	// counter moved while the command ran, for an exec that did not time
	// out.
	Limit string `json:"limit,omitempty"`
	// Count is how many files an unpack wrote.
	Count int `json:"count,omitempty"`
	// Signal names the signal that ended the command, from a server
	// that knows it by name (Status then carries ExitCode 128+N alone).
	Signal string `json:"signal,omitempty"`
	// Blocked lists the network destinations the sandbox refused while
	// the command ran.
	Blocked []string `json:"blocked,omitempty"`
	// BlockedOmitted counts the refusals Blocked could not list.
	BlockedOmitted int `json:"blocked_omitted,omitempty"`
	// StdoutSize and StderrSize count everything the command printed,
	// from a server that counts it; when they are more than the output
	// frames carried (a server's live copy was cut short), the server's
	// own tails of them come as Data frames before the response, stdout's
	// StdoutTail bytes, then stderr's StderrTail (a tail of up to the
	// command's MaxOutput would not fit in one response frame).
	StdoutSize int64 `json:"stdout_size,omitempty"`
	StderrSize int64 `json:"stderr_size,omitempty"`
	StdoutTail int   `json:"stdout_tail,omitempty"`
	StderrTail int   `json:"stderr_tail,omitempty"`
	// Stdout and Stderr are those tails inside each end: a backend gives
	// them to the stream server, which sends them as Data; the client
	// puts them back from the Data. They are never in the JSON.
	Stdout []byte `json:"-"`
	Stderr []byte `json:"-"`
	// Quoted, on the wire only, says Info.Path and Err's words are in Go's
	// quoted form (see quoteWords).
	Quoted bool `json:"quoted,omitempty"`
}

// Window tracks one flow-controlled stream on the sending side: how many
// bytes may still be sent. It is safe for concurrent use.
type Window struct {
	mu      sync.Mutex
	cond    *sync.Cond
	size    int
	avail   int
	closed  bool
	refused bool
}

// NewWindow starts with StreamWindow bytes available.
func NewWindow() *Window { return NewWindowSize(StreamWindow) }

// NewWindowSize starts with size bytes available (a receiver must hold as
// much: see NewInboxSize).
func NewWindowSize(size int) *Window {
	w := &Window{size: size, avail: size}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// Take waits until some bytes may be sent and takes up to want of them;
// 0 once the window is closed.
func (w *Window) Take(want int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.avail == 0 && !w.closed {
		w.cond.Wait()
	}
	if w.closed {
		return 0
	}
	n := min(want, w.avail)
	w.avail -= n
	return n
}

// Add returns n credited bytes. Credit beyond the window is a protocol
// error.
func (w *Window) Add(n int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.avail+n > w.size {
		return ProtoErr("credit of %d bytes overflows the window", n)
	}
	w.avail += n
	w.cond.Broadcast()
	return nil
}

// Close wakes every Take: nothing more will be sent.
func (w *Window) Close() {
	w.mu.Lock()
	w.closed = true
	w.cond.Broadcast()
	w.mu.Unlock()
}

// Refuse is Close because the receiver stopped reading the stream (a
// Close frame for it): the sender should end the stream at its source
// rather than drain it.
func (w *Window) Refuse() {
	w.mu.Lock()
	w.refused = true
	w.mu.Unlock()
	w.Close()
}

// Refused reports whether Refuse was called.
func (w *Window) Refused() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refused
}

// Inbox queues one flow-controlled stream on the receiving side. Put never
// blocks (the sender's window bounds what it holds: at most StreamWindow
// bytes); Next hands the chunks to one consumer in order.
type Inbox struct {
	mu      sync.Mutex
	cond    *sync.Cond
	limit   int
	chunks  [][]byte
	held    int
	closed  bool
	aborted bool
	err     error // what Reader returns once aborted
}

// NewInbox makes an empty inbox for a sender's window of StreamWindow.
func NewInbox() *Inbox { return NewInboxSize(StreamWindow) }

// NewInboxSize makes an empty inbox for a sender's window of limit bytes.
func NewInboxSize(limit int) *Inbox {
	q := &Inbox{limit: limit}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Put queues a copy of p. More than the inbox's limit held is a protocol
// error: the sender ignored its window.
func (q *Inbox) Put(p []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.aborted {
		return nil // the consumer is gone: drop
	}
	if q.closed {
		return ProtoErr("stream data after its close")
	}
	if q.held+len(p) > q.limit {
		return ProtoErr("%d bytes sent over the window", q.held+len(p)-q.limit)
	}
	q.held += len(p)
	q.chunks = append(q.chunks, bytes.Clone(p))
	q.cond.Signal()
	return nil
}

// End says no more chunks will come; Next returns what is queued, then
// false.
func (q *Inbox) End() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// ErrCut is what an aborted inbox's Reader returns: the stream was cut
// off before its end.
var ErrCut = errors.New("the stream was cut off before its end")

// Abort drops what is queued and everything put later: the consumer is
// gone, or the stream. Next returns false from then on, and Reader
// ErrCut.
func (q *Inbox) Abort() { q.Fail(ErrCut) }

// Fail is Abort with err as what Reader returns.
func (q *Inbox) Fail(err error) {
	q.mu.Lock()
	if !q.aborted {
		q.closed, q.aborted, q.err = true, true, err
		q.chunks, q.held = nil, 0
		q.cond.Broadcast()
	}
	q.mu.Unlock()
}

// Reader reads the inbox's chunks in order, for one consumer, calling
// taken (when not nil) with each chunk's length as it takes it (the
// sender's credit). It ends with io.EOF once the inbox has ended, and
// with the inbox's failure once it was aborted: a stream cut off is an
// error, never a short stream taken for a whole one.
func (q *Inbox) Reader(taken func(n int)) io.Reader {
	return &inboxReader{q: q, taken: taken}
}

type inboxReader struct {
	q     *Inbox
	taken func(int)
	rest  []byte
}

func (r *inboxReader) Read(p []byte) (int, error) {
	if len(r.rest) == 0 {
		chunk, ok := r.q.Next()
		if !ok {
			r.q.mu.Lock()
			defer r.q.mu.Unlock()
			if r.q.aborted {
				return 0, r.q.err
			}
			return 0, io.EOF
		}
		if r.taken != nil {
			r.taken(len(chunk))
		}
		r.rest = chunk
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

// Next waits for the next chunk; false once the inbox has ended and is
// empty. The caller credits len(chunk) back to the sender when done.
func (q *Inbox) Next() ([]byte, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.chunks) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.chunks) == 0 {
		return nil, false
	}
	c := q.chunks[0]
	q.chunks[0] = nil
	q.chunks = q.chunks[1:]
	q.held -= len(c)
	return c, true
}
