package netproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"syscall"
	"time"
)

// serveHTTP serves HTTP requests on the session until the client or an
// error ends it: CONNECT requests become tunnels, absolute-form http://
// requests are forwarded.
func (s *session) serveHTTP(ctx context.Context) {
	var up *upstream
	defer func() { up.close() }()
	for first := true; ; first = false {
		if !first {
			s.startHead()
		}
		req, err := http.ReadRequest(s.br)
		if err != nil {
			s.headError(err)
			return
		}
		s.endHead()
		if req.Method == http.MethodConnect {
			if !s.serveConnect(ctx, req) {
				return
			}
			continue
		}
		if !s.forward(ctx, req, &up) {
			return
		}
	}
}

// headError answers a request head that could not be read, unless the
// client simply went away. The read error, when there was one, says more
// than the parser's.
func (s *session) headError(err error) {
	if s.lim.err != nil {
		err = s.lim.err
	}
	var ne net.Error
	switch {
	case errors.Is(err, errHeadTooLarge):
		s.reply(http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("request head larger than %d bytes", s.p.maxHead), true)
	case errors.As(err, &ne) && ne.Timeout():
		s.reply(http.StatusRequestTimeout, fmt.Sprintf("request head not received within %v", s.p.headTimeout), true)
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNRESET):
	default:
		s.reply(http.StatusBadRequest, "malformed request: "+oneLine(err.Error()), true)
	}
}

// reply writes a plain-text response, one line of body. It reports
// whether the connection may carry another request.
func (s *session) reply(code int, msg string, closeConn bool) bool {
	s.client.SetWriteDeadline(time.Now().Add(errorWriteTimeout))
	defer s.client.SetWriteDeadline(time.Time{})
	fmt.Fprintf(s.bw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n", code, http.StatusText(code), len(msg)+1)
	if closeConn {
		s.bw.WriteString("Connection: close\r\n")
	}
	s.bw.WriteString("\r\n")
	s.bw.WriteString(msg)
	s.bw.WriteString("\n")
	if err := s.bw.Flush(); err != nil {
		return false
	}
	if closeConn {
		s.lingerClose()
	}
	return !closeConn
}

// lingerClose ends the session's sending side and reads (and drops) what
// the client still sends, for a moment: closing with unread input makes
// the kernel reset the connection, and the client may lose the answer it
// was sent.
func (s *session) lingerClose() {
	cw, ok := s.client.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	s.client.SetReadDeadline(time.Now().Add(lingerTime))
	io.CopyN(io.Discard, s.client, lingerBytes)
}

// How long and how much lingerClose reads.
const (
	lingerTime  = 500 * time.Millisecond
	lingerBytes = 256 << 10
)

// refuse answers a request whose target could not be reached: 403 for a
// policy refusal (and reports it), 400 for a malformed target, 504 for a
// timeout, 502 otherwise. It reports whether the connection may carry
// another request: only when the request has no body to skip and the
// client did not ask to close.
func (s *session) refuse(req *http.Request, err error) bool {
	keep := !req.Close && (req.Body == nil || req.Body == http.NoBody)
	code := http.StatusBadGateway
	var r *Refusal
	var ne net.Error
	switch {
	case errors.As(err, &r):
		s.p.record(r.HostPort())
		code = http.StatusForbidden
	case errors.Is(err, ErrBadHost):
		code = http.StatusBadRequest
	case errors.As(err, &ne) && ne.Timeout():
		code = http.StatusGatewayTimeout
	}
	return s.reply(code, oneLine(err.Error()), !keep)
}

// serveConnect serves a CONNECT request: a tunnel to an allowed target, or
// a refusal. It reports whether the connection may carry another request
// (after a refusal).
func (s *session) serveConnect(ctx context.Context, req *http.Request) bool {
	host, port, err := splitHostPort(req.RequestURI)
	if err != nil {
		return s.refuse(req, fmt.Errorf("CONNECT needs host:port: %w", err))
	}
	up, err := s.p.dialer.DialHost(ctx, host, port)
	if err != nil {
		return s.refuse(req, err)
	}
	if !s.setUpstream(up) {
		return false
	}
	s.bw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n")
	if s.bw.Flush() != nil {
		return false
	}
	s.tunnel(up)
	return false
}

// upstream is a forwarding connection kept between requests to the same
// host:port.
type upstream struct {
	conn net.Conn
	key  string // normalized host:port it was opened for
	lim  headLimiter
	*bufs
}

func (u *upstream) close() {
	if u == nil {
		return
	}
	u.conn.Close()
	u.put()
}

// forward checks and forwards one absolute-form request and relays the
// response. *up is the upstream connection kept from earlier requests; it
// is reused only for the same host:port. forward reports whether the
// client connection may carry another request.
func (s *session) forward(ctx context.Context, req *http.Request, up **upstream) bool {
	u := req.URL
	switch {
	case u.Scheme == "" || u.Host == "":
		return s.refuse(req, &HostError{Host: req.RequestURI, Reason: "this is a proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port"})
	case u.Scheme != "http":
		return s.refuse(req, &HostError{Host: u.Host, Reason: fmt.Sprintf("only http:// URLs are forwarded, not %s://; use CONNECT for TLS", u.Scheme)})
	}
	port := 80
	if p := u.Port(); p != "" {
		n, ok := parsePort(p)
		if !ok {
			return s.refuse(req, &HostError{Host: u.Host, Reason: fmt.Sprintf("port %q is not a number from 1 to 65535", p)})
		}
		port = n
	}
	// Every request is checked on its own, whatever the connection carried
	// before.
	if err := s.p.list.Check(u.Hostname(), port); err != nil {
		return s.refuse(req, err)
	}
	name, _, _ := normalizeHost(u.Hostname())
	key := hostPort(name, port)
	if *up != nil && (*up).key != key {
		(*up).close()
		*up = nil
	}

	defer s.stopWatching()
	clientClose := req.Close
	prepareRequest(req)
	expectContinue := strings.EqualFold(req.Header.Get("Expect"), "100-continue") && req.ProtoAtLeast(1, 1)
	req.Header.Del("Expect")
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		reused := *up != nil
		if !reused {
			conn, err := s.p.dialer.DialHost(ctx, u.Hostname(), port)
			if err != nil {
				return s.refuse(req, err)
			}
			if !s.setUpstream(conn) {
				return false
			}
			*up = s.newUpstream(conn, key)
		}
		if expectContinue {
			// The client waits for this before sending the body; the
			// upstream gets the request without the expectation.
			expectContinue = false
			s.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			if s.bw.Flush() != nil {
				return false
			}
		}
		r, started, err := s.roundTrip(*up, req)
		if err == nil {
			resp = r
			break
		}
		s.stopWatching()
		(*up).close()
		*up = nil
		// A kept connection the upstream closed while idle: try once
		// more on a new one, when nothing was received and nothing of
		// the client's is lost.
		if attempt == 0 && reused && !started && req.Body == http.NoBody && staleConnError(err) {
			continue
		}
		if started {
			return false
		}
		s.reply(http.StatusBadGateway, oneLine(fmt.Sprintf("upstream %s: %v", key, err)), true)
		return false
	}

	bodyless := req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
	chunked := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
	if chunked && !req.ProtoAtLeast(1, 1) {
		// An HTTP/1.0 client does not read chunks: end the body by
		// closing instead.
		resp.TransferEncoding, resp.ContentLength, chunked = nil, -1, false
	}
	untilClose := !bodyless && !chunked && resp.ContentLength < 0
	upstreamDone := resp.Close || untilClose
	clientClose = clientClose || untilClose
	resp.Close = clientClose
	if err := writeResponse(s.bw, resp); err != nil {
		// Close the connection first: closing the body of a live one
		// would read the rest of it. The buffers go back to the pool
		// only after the body is done with them.
		(*up).conn.Close()
		resp.Body.Close()
		(*up).close()
		*up = nil
		return false
	}
	resp.Body.Close()
	if upstreamDone {
		(*up).close()
		*up = nil
	}
	// A client that ended its side may have sent more requests before
	// it did: they are served, with the upstream bounded as above, and
	// the session ends at the end of its stream.
	return !clientClose
}

// newUpstream wraps a new forwarding connection. Its reads are bounded by
// the half-closed timeout once the client has ended its side.
func (s *session) newUpstream(conn net.Conn, key string) *upstream {
	u := &upstream{conn: conn, key: key}
	u.lim.r = idleReader{conn, &s.clientEnded, s.p.halfClosed}
	u.bufs = getBufs(&u.lim, conn)
	return u
}

// watchClient watches the client while a forwarded request waits for its
// response and the response is relayed, when nothing is read from the
// client: a client that went away would otherwise hold its session (and
// its slot) for as long as the upstream stays silent. On a reset the
// session is aborted; on an end of stream (a client may end its side and
// still read) the upstream must send something at least every
// halfClosed, as in a tunnel. Whatever the client sent ahead (a pipelined
// request) stays where it is: the kernel tells the peer's end apart from
// its data (see peerState). Clients that are not sockets, and systems
// without that distinction, are not watched.
//
// Watching starts only after watchDelay: at once, its goroutine and
// wake-ups cost about 175 µs per forwarded request here (BenchmarkConnLatency
// /http-forward, 375 → 550 µs), while a timer that is stopped costs
// nothing measurable.
func (s *session) watchClient(up net.Conn) {
	sc, ok := s.client.(syscall.Conn)
	if !ok || !canWatch {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	done := make(chan struct{})
	timer := time.AfterFunc(watchDelay, func() {
		defer close(done)
		var st peer
		// The callback only looks: closing the client from inside it
		// would wait for this very read.
		if rc.Read(func(fd uintptr) bool {
			st = peerState(fd)
			return st != peerThere // else wait for the next event
		}) != nil {
			return // stopped, or the session is being aborted
		}
		switch st {
		case peerGone:
			s.abort()
		case peerEnded:
			s.clientEnded.Store(true)
			up.SetReadDeadline(time.Now().Add(s.p.halfClosed)) // the read under way
		}
	})
	s.unwatch = func() {
		if timer.Stop() {
			return // it never started
		}
		s.client.SetReadDeadline(time.Unix(1, 0)) // ends rc.Read, or has it return at once
		<-done
		s.client.SetReadDeadline(time.Time{})
	}
}

// peer is what watchClient learns of the client.
type peer int

const (
	peerThere peer = iota // nothing new, or only data
	peerEnded             // it ended its side (FIN): it may still read
	peerGone              // reset, or closed both ways
)

// watchDelay is how long a forwarded request waits for its response
// before watchClient starts looking at the client.
const watchDelay = 500 * time.Millisecond

// stopWatching stops watchClient, if it runs.
func (s *session) stopWatching() {
	if s.unwatch != nil {
		s.unwatch()
		s.unwatch = nil
	}
}

// staleConnError reports whether err looks like a kept connection the
// other side had closed.
func staleConnError(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// roundTrip writes req to up and reads the response, relaying 1xx
// interim responses to the client. started reports whether anything came
// back from up (or went to the client).
func (s *session) roundTrip(up *upstream, req *http.Request) (resp *http.Response, started bool, err error) {
	if err := req.Write(up.w); err != nil {
		return nil, false, err
	}
	if err := up.w.Flush(); err != nil {
		return nil, false, err
	}
	s.watchClient(up.conn)
	for {
		up.lim.start(maxResponseHead)
		resp, err := http.ReadResponse(up.r, req)
		started = started || up.lim.readSince(maxResponseHead)
		up.lim.stop()
		switch {
		case err != nil:
			return nil, started, err
		case resp.StatusCode == http.StatusSwitchingProtocols:
			resp.Body.Close()
			return nil, true, errors.New("switched protocols though the proxy sent no Upgrade")
		case resp.StatusCode >= 200:
			return resp, started, nil
		}
		if err := writeResponse(s.bw, resp); err != nil {
			return nil, true, err
		}
	}
}

// writeResponse relays resp to the client as HTTP/1.1 without its
// hop-by-hop headers.
func writeResponse(bw *bufio.Writer, resp *http.Response) error {
	removeHopHeaders(resp.Header)
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	if err := resp.Write(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// prepareRequest turns a client's request into the one sent upstream:
// origin-form (req.Write does that), the client's own headers without
// hop-by-hop and Proxy-* ones, no added User-Agent, keep-alive upstream.
func prepareRequest(req *http.Request) {
	removeHopHeaders(req.Header)
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = nil // req.Write would add Go's own
	}
	req.Close = false
}

// hopHeaders are the connection's own headers, never forwarded.
var hopHeaders = []string{"Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopHeaders deletes hop-by-hop headers: the fixed ones, those the
// Connection header names, and every Proxy-* header.
func removeHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
	for k := range h {
		if strings.HasPrefix(k, "Proxy-") {
			delete(h, k)
		}
	}
}
