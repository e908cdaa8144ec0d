package netproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults for the zero fields of Options, and the bound on reports.
const (
	// DefaultHeadTimeout bounds reading one request head (HTTP request
	// line and headers, or the SOCKS5 greeting and request), counted from
	// when the proxy starts waiting for it.
	DefaultHeadTimeout = 30 * time.Second
	// DefaultMaxHeadBytes bounds one request head.
	DefaultMaxHeadBytes = 64 << 10
	// MaxBlocked is how many distinct refused host:port strings a Proxy
	// (and each Recording) keeps; later new ones are not listed.
	MaxBlocked = 1000
	// DefaultHalfClosedTimeout bounds how long a tunnel stays open, once
	// one side has finished sending, while nothing comes from the other.
	DefaultHalfClosedTimeout = 60 * time.Second
)

// maxResponseHead bounds the head of an upstream HTTP response.
const maxResponseHead = 1 << 20

// errorWriteTimeout bounds writing an error reply to a client that does
// not read.
const errorWriteTimeout = 5 * time.Second

// ErrClosed is returned by Serve and ServeConn once the Proxy is closed. It
// matches net.ErrClosed.
var ErrClosed = fmt.Errorf("netproxy: proxy closed: %w", net.ErrClosed)

// Options configure a Proxy; zero fields take the defaults.
type Options struct {
	// Resolver resolves requested names; nil means net.DefaultResolver (so
	// /etc/hosts counts).
	Resolver Resolver
	// Dial connects to a checked "ip:port" over "tcp"; nil means a
	// net.Dialer. Meant for tests and for routing through another stack.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// DialTimeout bounds resolving and connecting for one request; zero
	// means DefaultDialTimeout.
	DialTimeout time.Duration
	// HeadTimeout bounds reading one request head; zero means
	// DefaultHeadTimeout. A keep-alive connection idle for this long is
	// closed.
	HeadTimeout time.Duration
	// MaxHeadBytes bounds one request head; zero means
	// DefaultMaxHeadBytes.
	MaxHeadBytes int
	// HalfClosedTimeout bounds how long a tunnel (CONNECT or SOCKS5) stays
	// open after one side has finished sending (a half-close, or a client
	// that went away) while nothing comes from the other side; each read
	// from it starts the bound anew. Zero means DefaultHalfClosedTimeout.
	// Without it, a client that is gone and an upstream that never closes
	// would hold the tunnel, and a descriptor for each side, for ever.
	HalfClosedTimeout time.Duration
}

// Proxy is a filtering egress proxy. On every connection it detects the
// protocol from the first byte: SOCKS5 (no authentication, CONNECT only,
// domain, IPv4 and IPv6 targets), or HTTP, where it serves CONNECT
// tunnels and forwards absolute-form http:// requests (keep-alive, each
// request checked on its own). Every target goes through a Dialer over
// the List: refused targets get 403 (SOCKS5: reply 0x02) with the reason,
// and their host:port is reported by Blocked and by each active
// Recording. A tunnel lives as long as both sides do; once one side has
// finished sending, it is closed when the other stays quiet for
// Options.HalfClosedTimeout (a client that is gone cannot otherwise be
// told from one that half-closed).
//
// What it does not do: authenticate clients (whoever reaches the listener
// may use it), forward https:// URIs without CONNECT, upgrade plain HTTP
// connections (Upgrade headers are dropped), UDP, or SOCKS4. It sees only
// the host a client asks for: a CONNECT tunnel to an allowed host carries
// whatever the client sends (the TLS SNI is not checked).
//
// A Proxy is safe for concurrent use. Close stops it.
type Proxy struct {
	list        *List
	dialer      Dialer
	headTimeout time.Duration
	maxHead     int
	halfClosed  time.Duration

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // Serve loops and connections

	mu         sync.Mutex
	closed     bool
	blocked    refusalLog
	recordings map[*Recording]struct{}
}

// New returns a Proxy deciding with list (nil allows nothing). A negative
// option is an error.
func New(list *List, opts Options) (*Proxy, error) {
	switch {
	case opts.DialTimeout < 0:
		return nil, fmt.Errorf("netproxy: negative DialTimeout %v; use 0 for the default %v", opts.DialTimeout, DefaultDialTimeout)
	case opts.HeadTimeout < 0:
		return nil, fmt.Errorf("netproxy: negative HeadTimeout %v; use 0 for the default %v", opts.HeadTimeout, DefaultHeadTimeout)
	case opts.MaxHeadBytes < 0:
		return nil, fmt.Errorf("netproxy: negative MaxHeadBytes %d; use 0 for the default %d", opts.MaxHeadBytes, DefaultMaxHeadBytes)
	case opts.HalfClosedTimeout < 0:
		return nil, fmt.Errorf("netproxy: negative HalfClosedTimeout %v; use 0 for the default %v", opts.HalfClosedTimeout, DefaultHalfClosedTimeout)
	}
	p := &Proxy{
		list:        list,
		dialer:      Dialer{List: list, Resolver: opts.Resolver, Dial: opts.Dial, Timeout: opts.DialTimeout},
		headTimeout: opts.HeadTimeout,
		maxHead:     opts.MaxHeadBytes,
		halfClosed:  opts.HalfClosedTimeout,
		recordings:  make(map[*Recording]struct{}),
	}
	if p.halfClosed == 0 {
		p.halfClosed = DefaultHalfClosedTimeout
	}
	if p.headTimeout == 0 {
		p.headTimeout = DefaultHeadTimeout
	}
	if p.maxHead == 0 {
		p.maxHead = DefaultMaxHeadBytes
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// List returns the list the proxy decides with.
func (p *Proxy) List() *List { return p.list }

// begin counts a Serve loop or connection in, unless the proxy is closed:
// then it closes c and returns false.
func (p *Proxy) begin(c io.Closer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.wg.Add(1)
	return true
}

// Serve accepts connections on ln and serves each in its own goroutine
// until ctx ends, Close is called or ln fails; it closes ln when ctx ends
// or at Close. It returns ErrClosed after Close, ctx's error when ctx
// ended, or the listener's error. Connections accepted by Serve end by
// themselves, when ctx ends or at Close, not when Serve returns for a
// failed listener; Serve does not wait for them, Close does. Serve may be
// called on several listeners at once. A temporary Accept error (out of
// file descriptors, say) is waited out, up to a second at a time.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	if !p.begin(ln) {
		return ErrClosed
	}
	defer p.wg.Done()
	loop, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)()
	defer context.AfterFunc(loop, func() { ln.Close() })()

	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			switch {
			case p.ctx.Err() != nil:
				return ErrClosed
			case ctx.Err() != nil:
				return ctx.Err()
			case !acceptRetryable(err):
				return err
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
			case <-loop.Done():
			}
			continue
		}
		delay = 0
		if !p.begin(c) {
			return ErrClosed
		}
		go func() {
			defer p.wg.Done()
			p.serve(ctx, c)
		}()
	}
}

// acceptRetryable reports whether an Accept error is worth waiting out
// (out of file descriptors or memory, an aborted handshake, a timeout).
func acceptRetryable(err error) bool {
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// ServeConn serves one client connection (a TCP, unix or any other
// stream) until the client is done, ctx ends or Close is called, and
// closes it. It returns nil, or ErrClosed (having closed c) when the proxy
// is closed.
func (p *Proxy) ServeConn(ctx context.Context, c net.Conn) error {
	if !p.begin(c) {
		return ErrClosed
	}
	defer p.wg.Done()
	p.serve(ctx, c)
	return nil
}

// Close stops every Serve loop (closing their listeners) and every
// connection, and waits for them. It is idempotent and always returns
// nil. Blocked and the recordings stay readable.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

// refusalLog is a bounded, duplicate-free list of refused host:port
// strings in the order first refused, and a count of the refusals it
// could not list once full (omitted): a command that floods the list
// first cannot hide a later refusal without that showing.
type refusalLog struct {
	seen    map[string]struct{}
	order   []string
	omitted int
}

func (l *refusalLog) add(hp string) {
	if _, ok := l.seen[hp]; ok {
		return
	}
	if len(l.order) >= MaxBlocked {
		l.omitted++
		return
	}
	if l.seen == nil {
		l.seen = make(map[string]struct{})
	}
	l.seen[hp] = struct{}{}
	l.order = append(l.order, hp)
}

func (l *refusalLog) take() []string {
	out := l.order
	*l = refusalLog{}
	return out
}

// record reports a refused host:port to the proxy's log and every active
// recording.
func (p *Proxy) record(hp string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked.add(hp)
	for r := range p.recordings {
		r.log.add(hp)
	}
}

// Blocked returns the host:port strings ("example.com:443", "[::1]:80")
// the proxy refused by policy since it was made or since the last
// TakeBlocked, in the order first refused, without duplicates, at most
// MaxBlocked of them. Malformed requests and hosts that could not be
// resolved or reached are not listed: only policy refusals are.
func (p *Proxy) Blocked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.blocked.order)
}

// TakeBlocked returns what Blocked would and empties the list, atomically:
// a refusal is in exactly one TakeBlocked result. It does not affect
// recordings.
func (p *Proxy) TakeBlocked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blocked.take()
}

// Recording collects the refusals a Proxy makes from Record until Stop:
// the way to give each of several commands sharing one proxy its own list.
// The proxy cannot tell which command opened a connection, so while
// recordings overlap, each sees every refusal made during its span.
type Recording struct {
	p   *Proxy
	log refusalLog
}

// Record starts a Recording. Stop it when done: an active recording costs
// a little on every refusal.
func (p *Proxy) Record() *Recording {
	r := &Recording{p: p}
	p.mu.Lock()
	p.recordings[r] = struct{}{}
	p.mu.Unlock()
	return r
}

// Blocked returns the host:port strings refused since Record (and before
// Stop), in the order first refused, without duplicates, at most
// MaxBlocked.
func (r *Recording) Blocked() []string {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	return slices.Clone(r.log.order)
}

// Omitted is how many refusals since Record (and before Stop) Blocked
// does not list because it was full: each refused request for a
// host:port not among the listed ones counts, so one host asked for
// twice counts twice.
func (r *Recording) Omitted() int {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	return r.log.omitted
}

// Stop ends the recording and returns Blocked. Refusals after Stop are not
// recorded; Stop may be called again and returns the same list.
func (r *Recording) Stop() []string {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	delete(r.p.recordings, r)
	return slices.Clone(r.log.order)
}

// session is one client connection.
type session struct {
	p      *Proxy
	client net.Conn
	lim    headLimiter // under br: bounds request heads
	br     *bufio.Reader
	bw     *bufio.Writer

	mu      sync.Mutex
	up      net.Conn // the current upstream connection, closed by abort
	aborted bool

	// clientEnded is set when the client ends its side while a forwarded
	// request waits for its response (see watchClient); from then on the
	// upstream must send something at least every halfClosed.
	clientEnded atomic.Bool
	unwatch     func() // stops watchClient; nil when it is not running
}

func (p *Proxy) serve(ctx context.Context, c net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)()
	s := &session{p: p, client: c}
	defer context.AfterFunc(ctx, s.abort)()
	defer s.abort()

	s.lim.r = c
	b := getBufs(&s.lim, c)
	defer b.put()
	s.br, s.bw = b.r, b.w

	s.startHead()
	first, err := s.br.Peek(1)
	if err != nil {
		return
	}
	switch first[0] {
	case socks5Version:
		s.serveSOCKS5(ctx)
	case 4: // SOCKS4: "request rejected"
		s.client.SetWriteDeadline(time.Now().Add(errorWriteTimeout))
		s.client.Write([]byte{0, 0x5b, 0, 0, 0, 0, 0, 0})
	default:
		if !isTokenChar(first[0]) {
			// Not a method's first letter (a TLS hello, say): do not
			// wait for a line that will never parse.
			s.reply(http.StatusBadRequest, "not an HTTP proxy request or a SOCKS5 greeting", true)
			return
		}
		s.serveHTTP(ctx)
	}
}

// isTokenChar reports whether c may appear in an HTTP method (RFC 9110
// tchar).
func isTokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// abort closes the client and the upstream connection, ending every
// blocked read, write and copy of the session.
func (s *session) abort() {
	s.mu.Lock()
	s.aborted = true
	up := s.up
	s.mu.Unlock()
	s.client.Close()
	if up != nil {
		up.Close()
	}
}

// setUpstream makes c the session's upstream connection, or closes it and
// returns false when the session is being aborted.
func (s *session) setUpstream(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aborted {
		c.Close()
		return false
	}
	s.up = c
	return true
}

// startHead starts reading a request head: bounded in size and time.
func (s *session) startHead() {
	s.lim.start(int64(s.p.maxHead))
	s.client.SetReadDeadline(time.Now().Add(s.p.headTimeout))
}

// endHead lifts the head's bounds for what follows (a body, a tunnel).
func (s *session) endHead() {
	s.lim.stop()
	s.client.SetReadDeadline(time.Time{})
}

// errHeadTooLarge ends a head read past the size bound.
var errHeadTooLarge = errors.New("request head too large")

// headLimiter bounds how much is read while it is on, and keeps the
// first read error since start: a parser may drop the error that cut a
// line short and report the short line instead.
type headLimiter struct {
	r   io.Reader
	n   int64
	on  bool
	err error
}

func (l *headLimiter) start(n int64) { l.n, l.on, l.err = n, true, nil }
func (l *headLimiter) stop()         { l.on = false }

// readSince reports whether anything was read since start(n).
func (l *headLimiter) readSince(n int64) bool { return l.n < n }

func (l *headLimiter) Read(b []byte) (int, error) {
	if !l.on {
		return l.r.Read(b)
	}
	if l.n <= 0 {
		if l.err == nil {
			l.err = errHeadTooLarge
		}
		return 0, errHeadTooLarge
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.r.Read(b)
	l.n -= int64(n)
	if err != nil && l.err == nil {
		l.err = err
	}
	return n, err
}

// tunnel sends what the client already sent past its request to up, then
// copies both ways until both sides are done.
func (s *session) tunnel(up net.Conn) {
	if n := s.br.Buffered(); n > 0 {
		early, _ := s.br.Peek(n)
		if _, err := up.Write(early); err != nil {
			return
		}
		s.br.Discard(n)
	}
	pipe(s.client, up, s.p.halfClosed)
}

// pipe copies a to b and b to a. When one side stops sending, the other
// is told (half-close) and the copy the other way goes on, for as long as
// something comes at least every idle; when a copy fails, both
// connections are closed.
func pipe(a, b net.Conn, idle time.Duration) {
	var halfClosed atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		if copyHalf(b, a, idleReader{a, &halfClosed, idle}) {
			halfClosed.Store(true)
			b.SetReadDeadline(time.Now().Add(idle)) // wakes the other copy's read
		}
	}()
	if copyHalf(a, b, idleReader{b, &halfClosed, idle}) {
		halfClosed.Store(true)
		a.SetReadDeadline(time.Now().Add(idle))
	}
	<-done
}

// idleReader reads from c; once halfClosed is set, each read must come
// within idle.
type idleReader struct {
	c          net.Conn
	halfClosed *atomic.Bool
	idle       time.Duration
}

func (r idleReader) Read(b []byte) (int, error) {
	if r.halfClosed.Load() {
		r.c.SetReadDeadline(time.Now().Add(r.idle))
	}
	return r.c.Read(b)
}

// copyHalf copies src (read through r) to dst, then closes dst for
// writing and reports true. When the copy fails (or dst cannot be
// half-closed), it closes both and reports false.
//
// It copies through a pooled 64 KiB buffer, hiding ReadFrom and WriteTo so
// that io.CopyBuffer does not splice(2): measured on Linux 6.18 over
// loopback (BenchmarkRelay, TCP to TCP, on a shared 2-CPU machine, so
// noisy), the buffer moved about 1.2 to 2 times the bytes per second that
// splice did in most runs, and a unix-socket client about 1.5 times. A
// tunnel holds one buffer per direction while it lives.
func copyHalf(dst, src net.Conn, r io.Reader) bool {
	bp := copyBuffers.Get().(*[]byte)
	_, err := io.CopyBuffer(plainWriter{dst}, r, *bp)
	copyBuffers.Put(bp)
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return true
		}
	}
	dst.Close()
	src.Close()
	return false
}

// plainWriter hides every method but Write (idleReader, on the other
// side, has only Read).
type plainWriter struct{ io.Writer }

var copyBuffers = sync.Pool{New: func() any {
	b := make([]byte, 64<<10)
	return &b
}}

// bufs is a pooled pair of 4 KiB buffers for one connection.
type bufs struct {
	r *bufio.Reader
	w *bufio.Writer
}

var bufPool = sync.Pool{New: func() any {
	return &bufs{bufio.NewReaderSize(nil, 4096), bufio.NewWriterSize(nil, 4096)}
}}

func getBufs(r io.Reader, w io.Writer) *bufs {
	b := bufPool.Get().(*bufs)
	b.r.Reset(r)
	b.w.Reset(w)
	return b
}

func (b *bufs) put() {
	b.r.Reset(nil)
	b.w.Reset(nil)
	bufPool.Put(b)
}
