package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/sandbox"
)

// The host and the sandbox's init talk over one SOCK_SEQPACKET socket pair:
// each message is one JSON record (so message boundaries are the kernel's),
// and file contents and command streams travel through pipes whose ends
// ride along as SCM_RIGHTS. Control records stay small; data never goes
// through JSON.

// MaxRecord bounds one control record (a command line and its environment
// included).
const MaxRecord = 1 << 20

// Request is one operation the host asks of the init.
type Request struct {
	ID      uint64 `json:"id"`
	Op      string `json:"op"` // start, read, write, stat, glob, list, mkdir, remove, rename, search, exec, cancel, pack, unpack
	Path    string `json:"path,omitempty"`
	Max     int64  `json:"max,omitempty"`
	Pattern string `json:"pattern,omitempty"`
	// To is a rename's new path; Recursive a remove's.
	To        string `json:"to,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
	// Search is a search's request.
	Search  *sandbox.SearchRequest `json:"search,omitempty"`
	Job     *Job                   `json:"job,omitempty"`     // start: the sandbox; exec: the command
	Timeout int64                  `json:"timeout,omitempty"` // exec, in milliseconds
	Target  uint64                 `json:"target,omitempty"`  // cancel: the exec's request id
	// Since, for pack, is a time in Unix nanoseconds: only files changed
	// after it (0: all).
	Since int64 `json:"since,omitempty"`
	// Final, on an exec, says it is the sandbox's only command (a one-shot
	// run): the init confines itself and runs it directly, sparing one
	// process start, and the sandbox ends with it.
	Final bool `json:"final,omitempty"`
	// Quoted, on the wire only, says Path and Pattern are in Go's quoted
	// form (see quoteWords).
	Quoted bool      `json:"quoted,omitempty"`
	Sent   time.Time `json:"-"`
}

// Response answers the Request with the same ID.
type Response struct {
	ID       uint64            `json:"id"`
	Err      *WireError        `json:"err,omitempty"`
	Info     *sandbox.FileInfo `json:"info,omitempty"`
	Status   *Status           `json:"status,omitempty"`
	TimedOut bool              `json:"timed_out,omitempty"`
	// Count is how many files an unpack wrote.
	Count int `json:"count,omitempty"`
	// Done, from a runner or a container helper's reaper, says it takes no
	// further command.
	Done bool `json:"done,omitempty"`
	// Taken, from a runner, says it has the command and starts it now:
	// its answer follows. A runner gone before it said so never started
	// the command.
	Taken bool `json:"taken,omitempty"`
	// Quoted, on the wire only, says Info.Path is in Go's quoted form (see
	// quoteWords).
	Quoted bool `json:"quoted,omitempty"`
}

// WireError carries a sandbox error across the boundary so that errors.Is
// still works on the host, and a path error is a *fs.PathError there too
// (Op and Path set; Msg is then what went wrong with the path).
type WireError struct {
	Kind string `json:"kind"`
	Msg  string `json:"msg"`
	Op   string `json:"op,omitempty"`
	Path string `json:"path,omitempty"`
}

var errKinds = []struct {
	kind string
	err  error
}{
	{"escape", sandbox.ErrEscape}, {"not_found", sandbox.ErrNotFound}, {"invalid_path", sandbox.ErrInvalidPath},
	{"is_dir", sandbox.ErrIsDir}, {"not_dir", sandbox.ErrNotDir}, {"not_empty", sandbox.ErrNotEmpty}, {"too_large", sandbox.ErrTooLarge},
	{"unsupported", sandbox.ErrUnsupported}, {"config", sandbox.ErrConfig}, {"closed", sandbox.ErrClosed},
	{"protected", sandbox.ErrProtected}, // before permission, which it matches too
	{"permission", fs.ErrPermission},
}

// ToWire describes err for the host.
func ToWire(err error) *WireError {
	if err == nil {
		return nil
	}
	w := &WireError{Kind: "other", Msg: err.Error()}
	for _, k := range errKinds {
		if errors.Is(err, k.err) {
			w.Kind = k.kind
			break
		}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Error() == err.Error() { // nothing said around it
		w.Op, w.Path, w.Msg = pe.Op, pe.Path, pe.Err.Error()
	}
	return w
}

// Error turns the wire form back into an error matching the same sentinel.
func (w *WireError) Error() error {
	if w == nil {
		return nil
	}
	err := errors.New(w.Msg)
	for _, k := range errKinds {
		if k.kind == w.Kind {
			err = &remoteError{msg: w.Msg, is: k.err}
			break
		}
	}
	if w.Op != "" {
		return &fs.PathError{Op: w.Op, Path: w.Path, Err: err}
	}
	return err
}

type remoteError struct {
	msg string
	is  error
}

func (e *remoteError) Error() string        { return e.msg }
func (e *remoteError) Is(target error) bool { return target == e.is || errors.Is(e.is, target) }

// Conn is one end of the socket pair. Send is safe for concurrent use,
// also with Close; Recv is for one reader at a time. Close may come while
// a Recv or Send waits: the waiting call then fails, and the descriptor is
// released only after it has returned, so no later descriptor is touched.
//
// The socket is non-blocking and waits go through Go's poller, so a
// waiting Recv holds no OS thread. That matters inside sandboxes: the
// helper's processes share the sandbox's process limit with its commands,
// and a fork bomb that fills it leaves the Go runtime no thread to create
// (see reserveThreads).
type Conn struct {
	f      *os.File
	rc     syscall.RawConn
	wmu    sync.Mutex  // one Send at a time: records never interleave
	closed atomic.Bool // no Send starts after Close
	rmu    sync.Mutex
	buf    []byte
	oob    []byte
	wait   int // MSG_DONTWAIT when the poller waits; 0 when calls block
}

// NewConn wraps a SOCK_SEQPACKET socket and takes ownership of fd: Close
// closes it. fd is made non-blocking (with every descriptor that shares
// its open file description).
func NewConn(fd int) *Conn { return newConn(fd, true) }

// NewBlockingConn is NewConn for a process that does one thing at a time
// from one locked thread (a session's runner): fd is made blocking and
// stays out of Go's poller, so a Recv or Send blocks that thread in the
// system call. A waiting call then holds its thread, which such a process
// holds anyway; what it saves is the poller's hand-off of a locked
// goroutine between threads (some four context switches a call).
func NewBlockingConn(fd int) *Conn { return newConn(fd, false) }

// newConn wraps fd, through Go's poller when poll is set and the poller
// takes it, else with calls that block.
func newConn(fd int, poll bool) *Conn {
	_ = unix.SetNonblock(fd, poll)
	f := os.NewFile(uintptr(fd), "hutch-conn")
	c := &Conn{f: f, buf: make([]byte, MaxRecord), oob: make([]byte, unix.CmsgSpace(8*4))}
	if poll && f.SetDeadline(time.Time{}) == nil {
		c.wait = unix.MSG_DONTWAIT
	} else if poll {
		// Not in the poller (it refused the descriptor): calls block
		// a thread each, as they would on any blocking socket.
		_ = unix.SetNonblock(fd, false)
	}
	c.rc, _ = f.SyscallConn() // never fails for a file just made
	return c
}

// FileConn is NewConn for a socket held as a file: it takes ownership of
// f, which must not be used or closed by the caller afterwards.
func FileConn(f *os.File) (*Conn, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	fd, err := dupCloexec(rc)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("taking over the socket: %w", err)
	}
	return NewConn(fd), nil
}

// dupCloexec is a new close-on-exec descriptor of rc's.
func dupCloexec(rc syscall.RawConn) (int, error) {
	var fd int
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return 0, err
	}
	return fd, derr
}

// SocketPair makes a connected pair, close-on-exec.
func SocketPair() (host, sandbox *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	// A record is one message, and a message must fit the sender's
	// buffer: make room for MaxRecord where this process may (root gets
	// it whatever net.core.wmem_max says; others up to it).
	for _, fd := range fds {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 2*MaxRecord) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 2*MaxRecord)
		}
	}
	return os.NewFile(uintptr(fds[0]), "hutch-host"), os.NewFile(uintptr(fds[1]), "hutch-sandbox"), nil
}

// Send writes one record, passing files along (they stay open here).
func (c *Conn) Send(v any, files ...*os.File) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > MaxRecord {
		return fmt.Errorf("%w: request of %d bytes is over %d (a command line or environment too long?)", sandbox.ErrTooLarge, len(b), MaxRecord)
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed.Load() {
		return fs.ErrClosed
	}
	if rerr := c.io(false, func(fd int) error {
		err = unix.Sendmsg(fd, b, oob, nil, c.wait|unix.MSG_NOSIGNAL)
		return err
	}); rerr != nil {
		return rerr
	}
	if errors.Is(err, unix.EMSGSIZE) {
		return fmt.Errorf("%w: request of %d bytes does not fit the socket's buffer (raise net.core.wmem_max, or run hutch as root)", sandbox.ErrTooLarge, len(b))
	}
	return err
}

// Recv reads one record into v and returns the files that came with it.
func (c *Conn) Recv(v any) ([]*os.File, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	var n, oobn int
	var err error
	if rerr := c.io(true, func(fd int) error {
		n, oobn, _, _, err = unix.Recvmsg(fd, c.buf, c.oob, unix.MSG_CMSG_CLOEXEC|c.wait)
		return err
	}); rerr != nil {
		return nil, rerr
	}
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fs.ErrClosed // the other end went away
	}
	var files []*os.File
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(c.oob[:oobn])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "passed"))
			}
		}
	}
	if err := json.Unmarshal(c.buf[:n], v); err != nil {
		CloseFiles(files)
		return nil, fmt.Errorf("bad record: %w", err)
	}
	return files, nil
}

// CloseFiles closes every file of files (as Recv returns them, or as a
// caller gathers them to pass), ignoring errors: for descriptors that are
// done with, on every path.
func CloseFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// Dup returns a new descriptor of the socket, close-on-exec, to pass to
// another process (which then speaks on it in this Conn's stead: records
// of the two would interleave). Close the Conn once it is passed on.
func (c *Conn) Dup() (*os.File, error) {
	fd, err := dupCloexec(c.rc)
	if err != nil {
		return nil, fmt.Errorf("passing on the socket: %w", err)
	}
	return os.NewFile(uintptr(fd), "hutch-conn"), nil
}

// Close closes the socket once; later sends fail with fs.ErrClosed.
//
// It does not wait for a Send or Recv in progress: closing the file wakes
// them in the poller and they fail; the descriptor is released once they
// have returned, so no later file is touched.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.f.Close()
}

// io runs op on the socket, again when interrupted, and waits in the
// poller while it would block. Its error is the poller's (the Conn was
// closed); op's own is op's to keep.
func (c *Conn) io(read bool, op func(fd int) error) error {
	retry := func(fd uintptr) bool {
		for {
			err := op(int(fd))
			if !errors.Is(err, unix.EINTR) {
				return !errors.Is(err, unix.EAGAIN)
			}
		}
	}
	if read {
		return c.rc.Read(retry)
	}
	return c.rc.Write(retry)
}

// MaxNamesBytes bounds a glob answer in bytes: MaxGlobResults matches at
// the longest path, each with its separator.
const MaxNamesBytes = sandbox.MaxGlobResults * (sandbox.MaxPathLen + 1)

// JoinNames is how a glob answer travels, outside the JSON records (whose
// size it could exceed, and which carry UTF-8 only): the names as they
// are, NUL-separated (no name holds a NUL).
func JoinNames(names []string) []byte {
	var b bytes.Buffer
	_ = WriteNames(&b, names, nil) // a bytes.Buffer takes every write
	return b.Bytes()
}

// WriteNames writes names to w in JoinNames' form, name by name (no
// joined copy first), leaving out those skip reports (nil: none).
func WriteNames(w io.Writer, names []string, skip func(string) bool) error {
	bw := bufio.NewWriter(w)
	first := true
	for _, n := range names {
		if skip != nil && skip(n) {
			continue
		}
		if !first {
			_ = bw.WriteByte(0)
		}
		first = false
		_, _ = bw.WriteString(n)
	}
	return bw.Flush()
}

// SplitNames undoes JoinNames; no bytes are no names.
func SplitNames(b []byte) []string {
	if len(b) == 0 {
		return []string{}
	}
	return strings.Split(string(b), "\x00")
}
