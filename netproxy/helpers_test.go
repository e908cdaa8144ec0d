package netproxy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostsResolver answers from hosts-file text, as /etc/hosts does ("ADDR
// NAME..." lines, "#" comments), and records the names looked up.
type hostsResolver struct {
	m map[string][]netip.Addr

	mu    sync.Mutex
	calls []string
}

func newHostsResolver(text string) *hostsResolver {
	r := &hostsResolver{m: make(map[string][]netip.Addr)}
	for line := range strings.Lines(text) {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		a := netip.MustParseAddr(f[0])
		for _, name := range f[1:] {
			name = strings.ToLower(name)
			r.m[name] = append(r.m[name], a)
		}
	}
	return r
}

func (r *hostsResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.calls = append(r.calls, host)
	r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a, ok := r.m[strings.ToLower(host)]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return append([]netip.Addr(nil), a...), nil
}

// takeLookups returns the names looked up since the last call.
func (r *hostsResolver) takeLookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	calls := r.calls
	r.calls = nil
	return calls
}

// origin is a test HTTP server on a loopback address of its own. Every
// answer starts with its name.
type origin struct {
	name  string
	srv   *httptest.Server
	port  string
	conns sync.Map // remote addr -> true: the connections it accepted
}

// startOrigin starts an HTTP (or, with tlsOn, HTTPS) server on ip:0. Paths:
//
//	/big?n=N        N bytes of the test stream, with Content-Length
//	/chunked?n=N    N bytes of the test stream, chunked
//	/close?n=N      N bytes of the test stream, ended by closing (HTTP/1.0 style)
//	/sum            reads the request body, answers "<bytes> <sha256>"
//	/headers        the request's headers, one "Key: value" a line, sorted
//	anything else   "<name> <method> <path> host=<Host>"
func startOrigin(t testing.TB, ip, name string, tlsOn bool) *origin {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	o := &origin{name: name}
	o.srv = httptest.NewUnstartedServer(http.HandlerFunc(o.serve))
	o.srv.Listener.Close()
	o.srv.Listener = ln
	o.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	o.srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			o.conns.Store(c.RemoteAddr().String(), true)
		}
	}
	if tlsOn {
		o.srv.StartTLS()
	} else {
		o.srv.Start()
	}
	t.Cleanup(o.srv.Close)
	_, o.port, _ = net.SplitHostPort(ln.Addr().String())
	return o
}

func (o *origin) connCount() int {
	n := 0
	o.conns.Range(func(any, any) bool { n++; return true })
	return n
}

func (o *origin) serve(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	switch r.URL.Path {
	case "/big":
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		io.Copy(w, io.LimitReader(newStream(), n))
	case "/chunked":
		w.WriteHeader(200)
		io.Copy(w, io.LimitReader(newStream(), n))
	case "/close":
		w.Header().Set("Transfer-Encoding", "identity") // Go's server: no chunks, the body ends at close
		io.Copy(w, io.LimitReader(newStream(), n))
	case "/sum":
		h := sha256.New()
		got, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintf(w, "%d %x", got, h.Sum(nil))
	case "/headers":
		var lines []string
		for k, v := range r.Header {
			lines = append(lines, k+": "+strings.Join(v, ","))
		}
		lines = append(lines, "Host: "+r.Host, "RequestURI: "+r.RequestURI)
		slices.Sort(lines)
		fmt.Fprint(w, strings.Join(lines, "\n"))
	default:
		fmt.Fprintf(w, "%s %s %s host=%s", o.name, r.Method, r.URL.Path, r.Host)
	}
}

// newStream is the deterministic test byte stream.
func newStream() io.Reader {
	return rand.NewChaCha8([32]byte{'h', 'u', 't', 'c', 'h'})
}

// streamSum is the sha256 of the first n bytes of the test stream.
func streamSum(n int64) string {
	h := sha256.New()
	io.Copy(h, io.LimitReader(newStream(), n))
	return hex.EncodeToString(h.Sum(nil))
}

// serveProxy starts a Proxy for allow and deny serving a fresh 127.0.0.1
// listener; served gets what Serve returns.
func serveProxy(t testing.TB, allow, deny []string, opts Options) (p *Proxy, addr string, served <-chan error) {
	t.Helper()
	p, err := New(mustList(t, allow, deny), opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(context.Background(), ln) }()
	return p, ln.Addr().String(), done
}

// startProxy is serveProxy with Close at cleanup.
func startProxy(t testing.TB, allow, deny []string, opts Options) (*Proxy, string) {
	t.Helper()
	p, addr, done := serveProxy(t, allow, deny, opts)
	t.Cleanup(func() {
		p.Close()
		if err := <-done; err != ErrClosed {
			t.Errorf("Serve returned %v after Close, want ErrClosed", err)
		}
	})
	return p, addr
}

// serveEach starts a TCP server on ip:0 running handle in a goroutine for
// each connection (and closing it after); it stops at cleanup.
func serveEach(t testing.TB, ip string, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// unixClient serves one end of a unix socket pair with p.ServeConn, as the
// sandbox's bridge does, and returns the other end.
func unixClient(t testing.TB, p *Proxy) net.Conn {
	t.Helper()
	srvSide, c := unixPair(t)
	go p.ServeConn(context.Background(), srvSide)
	c.SetDeadline(time.Now().Add(60 * time.Second))
	return c
}

// unixPair returns two connected unix stream sockets.
func unixPair(t testing.TB) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	path := t.TempDir() + "/p.sock"
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.UnixConn, 1)
	go func() {
		c, _ := ln.AcceptUnix()
		accepted <- c
	}()
	b, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	a := <-accepted
	if a == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// proxyClient is an http.Client sending everything through the proxy.
func proxyClient(proxyAddr string) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:              http.ProxyURL(&url.URL{Scheme: "http", Host: proxyAddr}),
			DisableCompression: true,
		},
		Timeout: 30 * time.Second,
	}
}

// dialProxy connects to the proxy with a deadline for the whole exchange.
func dialProxy(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(60 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// rawConnect sends CONNECT target and returns the proxy's response and
// the connection's reader (the tunnel, after a 200).
func rawConnect(t testing.TB, c net.Conn, target string) (*http.Response, *bufio.Reader) {
	t.Helper()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: reading the response: %v", target, err)
	}
	return resp, br
}

// tunnelTo sends CONNECT target on c, fails unless the proxy answers 200,
// and returns the tunnel's reader.
func tunnelTo(t testing.TB, c net.Conn, target string) *bufio.Reader {
	t.Helper()
	resp, br := rawConnect(t, c, target)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %s", target, resp.Status)
	}
	return br
}

// getOver sends a GET with Connection: close on an open tunnel and
// returns the status and body.
func getOver(t testing.TB, c net.Conn, br *bufio.Reader, host, path string) (int, string) {
	t.Helper()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, host)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s over the tunnel: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s over the tunnel: body: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// socksDial runs a SOCKS5 exchange for a CONNECT to host:port (a name is
// sent as a domain, an IP literal as an address) and returns the reply
// code. methods are the offered methods (nil: no-auth only).
func socksDial(t testing.TB, c net.Conn, host string, port int, methods []byte) (byte, *bufio.Reader) {
	t.Helper()
	if methods == nil {
		methods = []byte{socksNoAuth}
	}
	br := bufio.NewReader(c)
	greeting := append([]byte{5, byte(len(methods))}, methods...)
	if _, err := c.Write(greeting); err != nil {
		t.Fatal(err)
	}
	var sel [2]byte
	if _, err := io.ReadFull(br, sel[:]); err != nil {
		t.Fatalf("SOCKS5 method selection: %v", err)
	}
	if sel[1] != socksNoAuth {
		return sel[1], br
	}
	req := []byte{5, socksConnect, 0}
	if a, err := netip.ParseAddr(host); err == nil && a.Is4() {
		req = append(req, socksAtypIPv4)
		req = append(req, a.AsSlice()...)
	} else if err == nil {
		req = append(req, socksAtypIPv6)
		req = append(req, a.AsSlice()...)
	} else {
		req = append(req, socksAtypDomain, byte(len(host)))
		req = append(req, host...)
	}
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	return readSocksReply(t, br), br
}

func readSocksReply(t testing.TB, br *bufio.Reader) byte {
	t.Helper()
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		t.Fatalf("SOCKS5 reply: %v", err)
	}
	n := 4
	if hdr[3] == socksAtypIPv6 {
		n = 16
	}
	if _, err := io.ReadFull(br, make([]byte, n+2)); err != nil {
		t.Fatalf("SOCKS5 reply address: %v", err)
	}
	return hdr[1]
}

// pipeDials records the dials a Proxy or Dialer makes and never touches
// the network: each dial gets one end of a pipe whose other end swallows
// what it is sent.
type pipeDials struct {
	mu  sync.Mutex
	got []string
}

func (d *pipeDials) dial(_ context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.got = append(d.got, network+" "+address)
	d.mu.Unlock()
	a, b := net.Pipe()
	go func() { io.Copy(io.Discard, b); b.Close() }()
	return a, nil
}

func (d *pipeDials) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	got := d.got
	d.got = nil
	return got
}
