package netproxy

// Attacks on the allow-list through every protocol path. Each case tries
// to reach origin B (127.0.0.3, never listed) or a loopback service while
// only origin A (127.0.0.2, "api.test") is allowed; B must never see a
// connection, whatever the proxy answers. Positive controls reach A the
// same way.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// attackHosts: api.test is origin A; other.test is origin B.
const attackHosts = `
127.0.0.2 api.test x.wild.test deny.wild.test
127.0.0.3 other.test
127.0.0.1 localhost
`

// attackAllow is the allow-list of the attacks: A by name and address, a
// wildcard with one denied name.
var attackAllow, attackDeny = []string{"api.test", "127.0.0.2", "*.wild.test", "localhost"}, []string{"deny.wild.test"}

// exchange sends raw bytes on a fresh connection to the proxy, half-closes
// (the proxy then ends the connection once it has answered, and a tunnel
// once its upstream is done), and returns everything the proxy sends back.
func exchange(t *testing.T, addr, send string) string {
	t.Helper()
	c := dialProxy(t, addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, send); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v (got %q)", send, err, b)
	}
	return string(b)
}

func TestAttackHTTPForms(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	b := startOrigin(t, "127.0.0.3", "B", false)
	res := newHostsResolver(attackHosts)
	_, addr := startProxy(t, attackAllow, attackDeny, Options{Resolver: res, HeadTimeout: 2 * time.Second})
	A, B := a.port, b.port
	x := func(s string) string { return strings.NewReplacer("%A", A, "%B", B).Replace(s) }
	tests := []struct {
		name string
		send string
		want []string // substrings of the answer, in order ("" skips)
	}{
		// Controls.
		{"control: allowed absolute form", "GET http://api.test:%A/c HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n", []string{"200 OK", "A GET /c host=api.test:%A"}},
		{"control: refused absolute form", "GET http://other.test:%B/ HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n", []string{"403 Forbidden", "other.test:%B is not in the network allow-list"}},

		// The Host header never picks the target, nor what the origin sees.
		{"Host header names B", "GET http://api.test:%A/h HTTP/1.1\r\nHost: other.test:%B\r\nConnection: close\r\n\r\n", []string{"200 OK", "A GET /h host=api.test:%A"}},
		{"URI names B, Host names A", "GET http://other.test:%B/ HTTP/1.1\r\nHost: api.test:%A\r\nConnection: close\r\n\r\n", []string{"403 Forbidden"}},
		{"origin form with Host B", "GET / HTTP/1.1\r\nHost: other.test:%B\r\nConnection: close\r\n\r\n", []string{"400 Bad Request"}},
		{"two Host headers", "GET http://api.test:%A/ HTTP/1.1\r\nHost: api.test\r\nHost: other.test:%B\r\nConnection: close\r\n\r\n", []string{"400 Bad Request"}},

		// Authority tricks.
		{"userinfo naming A", "GET http://api.test:%A@other.test:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"403 Forbidden", "other.test:%B"}},
		{"userinfo naming B", "GET http://other.test:%B@api.test:%A/u HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"200 OK", "A GET /u"}},
		{"backslash before @", "GET http://other.test:%B\\@api.test:%A/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{""}},
		{"fragment before @", "GET http://other.test:%B#@api.test:%A/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{""}},
		{"suffix of an allowed name", "GET http://api.test.other.test:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"403 Forbidden"}},
		{"upper case and a trailing dot", "GET http://OTHER.TEST.:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"403 Forbidden", "other.test:%B is not"}},
		{"percent-encoded dot", "GET http://other%2etest:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"400 Bad Request"}},
		{"percent-encoded NUL", "GET http://api.test%00.other.test:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"400 Bad Request"}},
		{"non-ASCII name", "GET http://\u014dther.test:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"400 Bad Request"}},
		{"punycode name", "GET http://xn--ther-1ta.test:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"403 Forbidden"}},

		// IPv4 in other spellings: refused as names, never resolved.
		{"decimal IPv4", "GET http://2130706435:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"400 Bad Request", "numeric"}},
		{"hex IPv4", "GET http://0x7f000003:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"400 Bad Request"}},
		{"dotted hex IPv4", "GET http://0x7f.0.0.3:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"400 Bad Request"}},
		{"octal IPv4", "GET http://0177.0.0.3:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"400 Bad Request"}},
		{"short IPv4", "GET http://127.3:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"400 Bad Request"}},
		{"IPv4 with a trailing dot", "GET http://127.0.0.3.:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"400 Bad Request"}},

		// IPv6 forms embedding 127.0.0.3.
		{"IPv4-mapped", "GET http://[::ffff:127.0.0.3]:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"403 Forbidden", "127.0.0.3:%B is not"}},
		{"IPv4-mapped in hex", "GET http://[::ffff:7f00:3]:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"403 Forbidden"}},
		{"IPv4-compatible", "GET http://[::127.0.0.3]:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"403 Forbidden"}},
		{"NAT64", "GET http://[64:ff9b::7f00:3]:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"403 Forbidden"}},
		{"6to4", "GET http://[2002:7f00:3::1]:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"403 Forbidden"}},
		{"zone", "GET http://[fe80::1%25lo]:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"400 Bad Request"}},

		// Framing: whatever the proxy makes of it, every request it
		// forwards is checked on its own.
		{"CL and TE", "POST http://api.test:%A/sum HTTP/1.1\r\nHost: api.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET http://other.test:%B/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", []string{""}},
		{"TE and CL", "POST http://api.test:%A/sum HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 60\r\n\r\n0\r\n\r\nGET http://other.test:%B/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", []string{""}},
		{"two lengths", "POST http://api.test:%A/sum HTTP/1.1\r\nHost: api.test\r\nContent-Length: 0\r\nContent-Length: 60\r\n\r\nGET http://other.test:%B/ HTTP/1.1\r\nHost: x\r\n\r\n", []string{"400 Bad Request"}},
		{"TE not chunked", "POST http://api.test:%A/sum HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\nGET http://other.test:%B/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", []string{""}},
		{"obs-fold", "GET http://api.test:%A/f HTTP/1.1\r\nX: a\r\n http://other.test:%B/\r\nConnection: close\r\n\r\n", []string{""}},
		{"bare LF", "GET http://other.test:%B/ HTTP/1.1\nHost: x\nConnection: close\n\n", []string{"403 Forbidden"}},
		{"two URIs on the line", "GET http://api.test:%A/ http://other.test:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"400 Bad Request"}},
		{"pipelined switch", "GET http://api.test:%A/1 HTTP/1.1\r\nHost: api.test\r\n\r\nGET http://other.test:%B/2 HTTP/1.1\r\nHost: api.test\r\n\r\nGET http://api.test:%A/3 HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n",
			[]string{"200 OK", "A GET /1", "403 Forbidden", "200 OK", "A GET /3"}},
		{"https URI", "GET https://other.test:%B/ HTTP/1.1\r\nConnection: close\r\n\r\n", []string{"400 Bad Request"}},
		{"lower-case connect", "connect other.test:%B HTTP/1.1\r\n\r\n", []string{"400 Bad Request"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := exchange(t, addr, x(tt.send))
			rest := got
			for _, w := range tt.want {
				i := strings.Index(rest, x(w))
				if i < 0 {
					t.Fatalf("answer %q; want %q (in order: %q)", got, x(w), tt.want)
				}
				rest = rest[i+len(x(w)):]
			}
			if strings.Contains(got, "B GET") || b.connCount() != 0 {
				t.Fatalf("origin B was reached: %q", got)
			}
		})
	}
	if n := b.connCount(); n != 0 {
		t.Errorf("origin B saw %d connections", n)
	}
}

// socksExchange sends a SOCKS5 greeting offering methods and, when no-auth
// is chosen, req; it returns the method chosen and the reply code (0xff
// when there was no reply).
func socksExchange(t *testing.T, addr string, methods, req []byte) (method, reply byte) {
	t.Helper()
	c := dialProxy(t, addr)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write(append([]byte{5, byte(len(methods))}, methods...))
	br := bufio.NewReader(c)
	var sel [2]byte
	if _, err := io.ReadFull(br, sel[:]); err != nil {
		t.Fatalf("method selection: %v", err)
	}
	if sel[1] != socksNoAuth {
		if n, _ := br.Read(make([]byte, 1)); n != 0 {
			t.Errorf("more after refusing every method")
		}
		return sel[1], 0xff
	}
	c.Write(req)
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return sel[1], 0xff
	}
	return sel[1], hdr[1]
}

// socksReq builds a request: cmd, then a domain (string), an address
// (netip.Addr) or raw address bytes with their type ([]byte, first byte
// the type), and the port.
func socksReq(cmd byte, host any, port string) []byte {
	req := []byte{5, cmd, 0}
	switch h := host.(type) {
	case string:
		req = append(req, socksAtypDomain, byte(len(h)))
		req = append(req, h...)
	case netip.Addr:
		if h.Is4() {
			req = append(req, socksAtypIPv4)
		} else {
			req = append(req, socksAtypIPv6)
		}
		req = append(req, h.AsSlice()...)
	case []byte:
		req = append(req, h...)
	}
	return binary.BigEndian.AppendUint16(req, uint16(atoi(port)))
}

func TestAttackCONNECTAndSOCKS5Forms(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	b := startOrigin(t, "127.0.0.3", "B", false)
	// A loopback service on 127.0.0.1, which no entry names (localhost
	// is listed as a name: its address still needs an entry).
	var loopHits atomic.Int64
	loop := serveEach(t, "127.0.0.1", func(c net.Conn) { loopHits.Add(1) })
	_, loopPort, _ := net.SplitHostPort(loop)
	res := newHostsResolver(attackHosts)
	p, addr := startProxy(t, attackAllow, attackDeny, Options{Resolver: res, HeadTimeout: 2 * time.Second})
	_, proxyPort, _ := net.SplitHostPort(addr)
	A, B := a.port, b.port
	x := func(s string) string {
		return strings.NewReplacer("%A", A, "%B", B, "%L", loopPort, "%P", proxyPort).Replace(s)
	}

	t.Run("CONNECT", func(t *testing.T) {
		for _, tt := range []struct{ target, want string }{
			{"api.test:%A", "200 Connection established"}, // control
			{"other.test:%B", "403 Forbidden"},            // control
			{"api.test:%A@other.test:%B", "400 Bad Request"},
			{"other.test:%B@api.test:%A", "400 Bad Request"},
			{"api.test@other.test:%B", "400 Bad Request"},
			{"api.test.other.test:%B", "403 Forbidden"},
			{"OTHER.TEST.:%B", "403 Forbidden"},
			{"%6fther.test:%B", "400 Bad Request"},
			{"http://other.test:%B", "400 Bad Request"},
			{"other.test:%B/", "400 Bad Request"},
			{"api.test:%A/../other.test:%B", "400 Bad Request"},
			{"api.test:%A:%B", "400 Bad Request"},
			{"[api.test]:%A", "400 Bad Request"},
			{"api.test:+%A", "400 Bad Request"},
			{"2130706435:%B", "400 Bad Request"},
			{"0x7f.1:%L", "400 Bad Request"},
			{"127.0.0.3.:%B", "400 Bad Request"},
			{"127.0.0.3:%B", "403 Forbidden"},
			{"[::ffff:127.0.0.3]:%B", "403 Forbidden"},
			{"[::127.0.0.3]:%B", "403 Forbidden"},
			{"[64:ff9b::7f00:3]:%B", "403 Forbidden"},
			{"[2002:7f00:3::1]:%B", "403 Forbidden"},
			{"[fe80::1%lo]:%B", "400 Bad Request"},
			{"deny.wild.test:%A", "403 Forbidden"},
			// The host's loopback, the proxy's own port among it.
			{"127.0.0.1:%P", "403 Forbidden"},
			{"localhost:%P", "403 Forbidden"},
			{"localhost:%L", "403 Forbidden"},
			{"0.0.0.0:%L", "403 Forbidden"},
			{"[::]:%L", "403 Forbidden"},
			{"[::1]:%L", "403 Forbidden"},
			{"[::ffff:127.0.0.1]:%L", "403 Forbidden"},
		} {
			t.Run(tt.target, func(t *testing.T) {
				target := x(tt.target)
				got := exchange(t, addr, "CONNECT "+target+" HTTP/1.1\r\nHost: api.test:"+A+"\r\n\r\n")
				if !strings.HasPrefix(got, "HTTP/1.1 "+tt.want) {
					t.Errorf("CONNECT %s: %q, want %q", target, got, tt.want)
				}
			})
		}
		// The Host header of a CONNECT does not matter either way.
		got := exchange(t, addr, x("CONNECT other.test:%B HTTP/1.1\r\nHost: api.test:%A\r\n\r\n"))
		if !strings.HasPrefix(got, "HTTP/1.1 403") {
			t.Errorf("CONNECT B with Host A: %q", got)
		}
	})

	t.Run("SOCKS5", func(t *testing.T) {
		b3 := netip.MustParseAddr("127.0.0.3")
		for _, tt := range []struct {
			name    string
			methods []byte
			req     []byte
			method  byte
			reply   byte
		}{
			{"control: domain A", []byte{0}, socksReq(socksConnect, "api.test", A), 0, socksSucceeded},
			{"control: domain B", []byte{0}, socksReq(socksConnect, "other.test", B), 0, socksNotAllowed},
			{"domain with NUL", []byte{0}, socksReq(socksConnect, "api.test\x00.other.test", B), 0, socksGeneralFailure},
			{"empty domain", []byte{0}, socksReq(socksConnect, "", B), 0, socksGeneralFailure},
			{"255-byte domain", []byte{0}, socksReq(socksConnect, strings.Repeat("a", 250)+".test", B), 0, socksGeneralFailure},
			{"B's address as a domain", []byte{0}, socksReq(socksConnect, "127.0.0.3", B), 0, socksNotAllowed},
			{"B's mapped address as a domain", []byte{0}, socksReq(socksConnect, "[::ffff:127.0.0.3]", B), 0, socksNotAllowed},
			{"decimal address as a domain", []byte{0}, socksReq(socksConnect, "2130706435", B), 0, socksGeneralFailure},
			{"upper case and a dot", []byte{0}, socksReq(socksConnect, "OTHER.TEST.", B), 0, socksNotAllowed},
			{"domain with a port", []byte{0}, socksReq(socksConnect, "other.test:"+B, A), 0, socksGeneralFailure},
			{"IPv4", []byte{0}, socksReq(socksConnect, b3, B), 0, socksNotAllowed},
			{"IPv4-mapped IPv6", []byte{0}, socksReq(socksConnect, netip.AddrFrom16(b3.As16()), B), 0, socksNotAllowed},
			{"NAT64", []byte{0}, socksReq(socksConnect, netip.MustParseAddr("64:ff9b::7f00:3"), B), 0, socksNotAllowed},
			{"IPv4 unspecified", []byte{0}, socksReq(socksConnect, netip.IPv4Unspecified(), loopPort), 0, socksNotAllowed},
			{"the proxy itself", []byte{0}, socksReq(socksConnect, netip.MustParseAddr("127.0.0.1"), proxyPort), 0, socksNotAllowed},
			{"BIND", []byte{0}, socksReq(2, "api.test", A), 0, socksCmdNotSupported},
			{"UDP ASSOCIATE", []byte{0}, socksReq(3, "api.test", A), 0, socksCmdNotSupported},
			{"unknown command", []byte{0}, socksReq(9, "other.test", B), 0, socksCmdNotSupported},
			{"unknown address type", []byte{0}, socksReq(socksConnect, []byte{2, 127, 0, 0, 3}, B), 0, socksAtypNotSupported},
			{"username/password only", []byte{2}, nil, socksNoAcceptable, 0xff},
			{"GSSAPI only", []byte{1}, nil, socksNoAcceptable, 0xff},
			{"no methods", []byte{}, nil, socksNoAcceptable, 0xff},
		} {
			t.Run(tt.name, func(t *testing.T) {
				method, reply := socksExchange(t, addr, tt.methods, tt.req)
				if method != tt.method || reply != tt.reply {
					t.Errorf("method %#x reply %#x, want %#x and %#x", method, reply, tt.method, tt.reply)
				}
			})
		}
	})

	if n := b.connCount(); n != 0 {
		t.Errorf("origin B saw %d connections", n)
	}
	if n := loopHits.Load(); n != 0 {
		t.Errorf("the loopback service saw %d connections", n)
	}
	for _, hp := range p.Blocked() {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || strings.ContainsAny(host, "%[] \x00") && !strings.Contains(hp, ":") {
			t.Errorf("odd refusal reported: %q", hp)
		}
		if name, _, err := normalizeHost(host); err != nil || name != host || atoi(port) == 0 {
			t.Errorf("refusal reported in a form that is not canonical: %q", hp)
		}
	}
}

// mapResolver answers each name from a map, in the order given.
type mapResolver map[string][]string

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range m[host] {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

// TestAttackRebinding: a name answering with several addresses is refused
// when any of them is not allowed, in whatever order they come, and then
// nothing is dialled; when all pass, only they are dialled.
func TestAttackRebinding(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	res := mapResolver{
		"public-first.test":  {"8.8.8.8", "127.0.0.3"},
		"private-first.test": {"127.0.0.3", "8.8.8.8"},
		"listed-first.test":  {"127.0.0.2", "127.0.0.3"},
		"mapped.test":        {"::ffff:127.0.0.3"},
		"compat.test":        {"::127.0.0.3"},
		"nat64.test":         {"64:ff9b::7f00:3"},
		"sixtofour.test":     {"2002:7f00:3::1"},
		"zone.test":          {"fe80::1%eth0"},
		"unspecified.test":   {"0.0.0.0"},
		"unspecified6.test":  {"::"},
		"metadata.test":      {"100.100.100.200"},
		"metadata6.test":     {"fd00:ec2::254"},
		"mapped-meta.test":   {"::ffff:169.254.169.254"},
		"empty.test":         {},
		"good.test":          {"127.0.0.2", "::ffff:127.0.0.2"},
	}
	var names []string
	for n := range res {
		names = append(names, n)
	}
	dl := &dialLog{}
	_, addr := startProxy(t, append(names, "127.0.0.2", "100.64.0.0/10", "169.254.0.0/16", "fd00::/8"), nil, Options{Resolver: res, Dial: dl.dial})
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			got := exchange(t, addr, "CONNECT "+name+":"+a.port+" HTTP/1.1\r\n\r\n")
			switch name {
			case "good.test":
				if !strings.HasPrefix(got, "HTTP/1.1 200") {
					t.Errorf("%q", got)
				}
				if d := dl.dials(); !slices.Equal(d, []string{"tcp 127.0.0.2:" + a.port}) {
					t.Errorf("dialled %q", d)
				}
			case "empty.test":
				if !strings.HasPrefix(got, "HTTP/1.1 502") {
					t.Errorf("%q", got)
				}
			default:
				if !strings.HasPrefix(got, "HTTP/1.1 403") {
					t.Errorf("%q", got)
				}
			}
			if name != "good.test" {
				if d := dl.dials(); len(d) != 0 {
					t.Errorf("dialled %q", d)
				}
			}
			dl.mu.Lock()
			dl.targets = nil
			dl.mu.Unlock()
		})
	}
}

// TestAttackNoLookupForRefusedNames: a name the list refuses is never
// sent to the resolver (a lookup would leak it to the DNS servers), on
// every protocol path; an allowed name is looked up once.
func TestAttackNoLookupForRefusedNames(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	res := newHostsResolver(attackHosts)
	_, addr := startProxy(t, attackAllow, attackDeny, Options{Resolver: res})
	for _, host := range []string{"other.test", "deny.wild.test", "wild.test", "secret-data.example.com"} {
		exchange(t, addr, "GET http://"+host+":"+a.port+"/ HTTP/1.1\r\nConnection: close\r\n\r\n")
		exchange(t, addr, "CONNECT "+host+":"+a.port+" HTTP/1.1\r\n\r\n")
		socksExchange(t, addr, []byte{0}, socksReq(socksConnect, host, a.port))
	}
	if got := res.takeLookups(); len(got) != 0 {
		t.Errorf("refused names were looked up: %q", got)
	}
	// The control.
	exchange(t, addr, "GET http://API.test.:"+a.port+"/ HTTP/1.1\r\nConnection: close\r\n\r\n")
	if got := res.takeLookups(); !slices.Equal(got, []string{"api.test"}) {
		t.Errorf("lookups for an allowed name: %q", got)
	}
}

// TestAttackSOCKS5Slowloris: a SOCKS5 greeting or request dribbled or
// left unfinished is cut at the head timeout.
func TestAttackSOCKS5Slowloris(t *testing.T) {
	_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{HeadTimeout: 300 * time.Millisecond})
	for _, send := range [][]byte{{5}, {5, 1, 0}, {5, 1, 0, 5, 1, 0, 3, 20, 'a'}} {
		c := dialProxy(t, addr)
		start := time.Now()
		c.Write(send)
		io.ReadAll(c) // until the proxy closes
		if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
			t.Errorf("%q: closed after %v, want about 300ms", send, d)
		}
	}
}

// TestAttackBlockedFlood: a client refused for thousands of distinct
// names fills at most MaxBlocked entries of the proxy's list and of a
// recording, is still refused past that, and every refusal past that is
// counted (a flood cannot hide a later refusal unseen; a red-team pass).
// A host:port already listed is not counted again.
func TestAttackBlockedFlood(t *testing.T) {
	p, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{})
	rec := p.Record()
	c := dialProxy(t, addr)
	br := bufio.NewReader(c)
	var wg sync.WaitGroup
	wg.Add(1)
	n := MaxBlocked + 200
	go func() {
		defer wg.Done()
		w := bufio.NewWriter(c)
		for i := range n {
			fmt.Fprintf(w, "GET http://h%d.flood.test/ HTTP/1.1\r\nHost: x\r\n\r\n", i)
		}
		w.Flush()
	}()
	for i := range n {
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 403") {
			t.Fatalf("answer %d: %q %v", i, line, err)
		}
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if l == "\r\n" {
				break
			}
		}
		if _, err := br.ReadString('\n'); err != nil { // the one-line body
			t.Fatal(err)
		}
	}
	wg.Wait()
	if got := p.Blocked(); len(got) != MaxBlocked || got[0] != "h0.flood.test:80" {
		t.Errorf("Blocked(): %d entries, first %q", len(got), got[0])
	}
	if got := rec.Stop(); len(got) != MaxBlocked {
		t.Errorf("recording: %d entries", len(got))
	}
	if got := rec.Omitted(); got != n-MaxBlocked {
		t.Errorf("recording: %d refusals omitted, want %d", got, n-MaxBlocked)
	}
}

// TestAttackHalfClosedTunnel: a client that ends its side of a tunnel
// (its process died, say) and an upstream that keeps its side open
// without a word must not hold the tunnel — and the upstream connection —
// open for ever. The control: data still flows both ways through a
// half-closed tunnel, and a quiet but open one stays.
func TestAttackHalfClosedTunnel(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	// After the client's end, the upstream sends one line a second later,
	// then holds its side open without a word.
	hold := serveEach(t, "127.0.0.2", func(c net.Conn) {
		io.Copy(io.Discard, c)
		time.Sleep(time.Second / 2)
		io.WriteString(c, "late\n")
		<-release
	})
	var upClosed atomic.Int64
	_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{Dial: countCloses(&upClosed), HalfClosedTimeout: 800 * time.Millisecond})

	t.Run("control: an open tunnel stays, however quiet", func(t *testing.T) {
		c := dialProxy(t, addr)
		tunnelTo(t, c, hold)
		c.SetReadDeadline(time.Now().Add(1500 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("a quiet tunnel: read %v, want our own deadline", err)
		}
	})
	c := dialProxy(t, addr)
	br := tunnelTo(t, c, hold)
	c.(*net.TCPConn).CloseWrite()
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := br.ReadString('\n'); line != "late\n" {
		t.Fatalf("control: the upstream's answer after the client's end: %q %v", line, err)
	}
	_, err := io.ReadAll(br) // the proxy closes once the upstream has been quiet long enough
	if d := time.Since(start); err != nil || d > 3*time.Second {
		t.Errorf("the tunnel was held %v after the client ended its side (%v)", d, err)
	}
	for deadline := time.Now().Add(3 * time.Second); upClosed.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := upClosed.Load(); n < 2 { // the control's and this one's
		t.Errorf("%d upstream connections closed, want 2", n)
	}
}

// TestAttackClientGoneWhileUpstreamSilent: a plain-HTTP client that goes
// away while its forwarded request waits on a silent upstream does not
// hold its session (and the upstream connection) for as long as the
// upstream stays silent. A reset ends the session at once; an end of
// stream bounds the wait by the half-closed timeout, as for a tunnel
// (each once the request has waited watchDelay); a
// client that ends its side and still reads gets its answer.
func TestAttackClientGoneWhileUpstreamSilent(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	// The upstream reads the request head; "/late" is answered half a
	// second later, anything else never.
	silent := serveEach(t, "127.0.0.2", func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		if req.URL.Path == "/late" {
			time.Sleep(time.Second / 2)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nlate\n")
		}
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
	})
	var upClosed atomic.Int64
	const halfClosed = 800 * time.Millisecond
	_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{Dial: countCloses(&upClosed), HalfClosedTimeout: halfClosed})
	send := func(path string) net.Conn {
		c := dialProxy(t, addr)
		fmt.Fprintf(c, "GET http://%s%s HTTP/1.1\r\nHost: %s\r\n\r\n", silent, path, silent)
		return c
	}
	// waitClosed waits until n upstream connections are closed and says
	// how long that took.
	waitClosed := func(n int64) time.Duration {
		start := time.Now()
		for time.Since(start) < 10*time.Second && upClosed.Load() < n {
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(start)
	}

	t.Run("control: a client still there waits as long as it likes", func(t *testing.T) {
		c := send("/never")
		c.SetReadDeadline(time.Now().Add(2 * halfClosed))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read %v, want our own deadline", err)
		}
		c.Close() // ends it (by the half-closed bound) for the next case
		if d := waitClosed(1); upClosed.Load() != 1 {
			t.Fatalf("after %v, %d upstream connections closed, want 1", d, upClosed.Load())
		}
	})
	t.Run("reset", func(t *testing.T) {
		c := send("/never")
		time.Sleep(100 * time.Millisecond) // the request is upstream
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
		if d := waitClosed(2); upClosed.Load() < 2 || d > watchDelay+halfClosed/2 {
			t.Errorf("the upstream connection was held %v after the client reset (closed: %d)", d, upClosed.Load())
		}
	})
	t.Run("end of stream", func(t *testing.T) {
		c := send("/never")
		time.Sleep(100 * time.Millisecond)
		c.Close()
		if d := waitClosed(3); upClosed.Load() < 3 || d > watchDelay+halfClosed+2*time.Second {
			t.Errorf("the upstream connection was held %v after the client closed (closed: %d)", d, upClosed.Load())
		}
	})
	t.Run("control: a client that ends its side still gets its answer", func(t *testing.T) {
		c := send("/late")
		c.(*net.TCPConn).CloseWrite()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer after the client's end: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "late\n" {
			t.Errorf("body %q", body)
		}
	})
}

// countCloses is a dialer whose connections count into n when closed
// (once each, however often Close is called).
func countCloses(n *atomic.Int64) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &closeCounter{TCPConn: c.(*net.TCPConn), n: n}, nil
	}
}

// closeCounter counts a TCP connection into n when it is first closed.
type closeCounter struct {
	*net.TCPConn
	once sync.Once
	n    *atomic.Int64
}

func (c *closeCounter) Close() error {
	c.once.Do(func() { c.n.Add(1) })
	return c.TCPConn.Close()
}

// TestAttackSOCKS5BoundAddress: a SOCKS5 success does not tell the
// client the address the proxy connected from (the host's own, which a
// sandboxed client could not otherwise learn): the bound address is
// 0.0.0.0:0. The tunnel works all the same.
func TestAttackSOCKS5BoundAddress(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{})
	c := dialProxy(t, addr)
	c.Write([]byte{5, 1, 0})
	br := bufio.NewReader(c)
	if _, err := io.ReadFull(br, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	c.Write(socksReq(socksConnect, netip.MustParseAddr("127.0.0.2"), a.port))
	reply := make([]byte, 10)
	if _, err := io.ReadFull(br, reply); err != nil {
		t.Fatal(err)
	}
	if want := []byte{5, 0, 0, socksAtypIPv4, 0, 0, 0, 0, 0, 0}; !slices.Equal(reply, want) {
		t.Errorf("reply % x, want % x", reply, want)
	}
	if code, body := getOver(t, c, br, "127.0.0.2", "/b"); code != 200 || !strings.HasPrefix(body, "A GET /b") {
		t.Errorf("over the tunnel: %d %q", code, body)
	}
}

// TestAttackNameOnlyAllowRefusesAddressForms: only the name pub.test
// (resolving to the public 8.8.8.8) is allowed; its address, in any
// spelling and over any protocol, is not. Nothing is dialled.
// Origin: review 9.
func TestAttackNameOnlyAllowRefusesAddressForms(t *testing.T) {
	dl := &pipeDials{}
	_, addr := startProxy(t, []string{"pub.test"}, nil, Options{Resolver: mapResolver{"pub.test": {"8.8.8.8"}}, Dial: dl.dial, HeadTimeout: 2 * time.Second})

	t.Run("control: the name", func(t *testing.T) {
		c := dialProxy(t, addr)
		resp, _ := rawConnect(t, c, "pub.test:443")
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT pub.test:443: %s", resp.Status)
		}
		c.Close()
		if got := dl.take(); len(got) != 1 || got[0] != "tcp 8.8.8.8:443" {
			t.Errorf("dials %q, want [tcp 8.8.8.8:443]", got)
		}
	})
	for _, target := range []string{"8.8.8.8:443", "[::ffff:8.8.8.8]:443", "[::ffff:808:808]:443", "[64:ff9b::808:808]:443", "[2002:808:808::]:443"} {
		t.Run("CONNECT "+target, func(t *testing.T) {
			got := exchange(t, addr, "CONNECT "+target+" HTTP/1.1\r\nHost: pub.test:443\r\n\r\n")
			if !strings.HasPrefix(got, "HTTP/1.1 403") {
				t.Errorf("answer %q, want 403", got)
			}
			if d := dl.take(); len(d) != 0 {
				t.Errorf("dialled %q", d)
			}
		})
	}
	t.Run("forward to the address with Host pub.test", func(t *testing.T) {
		got := exchange(t, addr, "GET http://8.8.8.8/ HTTP/1.1\r\nHost: pub.test\r\nConnection: close\r\n\r\n")
		if !strings.HasPrefix(got, "HTTP/1.1 403") {
			t.Errorf("answer %q, want 403", got)
		}
		if d := dl.take(); len(d) != 0 {
			t.Errorf("dialled %q", d)
		}
	})
	for _, tt := range []struct {
		name string
		host any
	}{
		{"SOCKS5 IPv4", netip.MustParseAddr("8.8.8.8")},
		{"SOCKS5 IPv6 mapped", netip.AddrFrom16(netip.MustParseAddr("8.8.8.8").As16())},
		{"SOCKS5 IPv6 NAT64", netip.MustParseAddr("64:ff9b::808:808")},
		{"SOCKS5 domain holding the address", "8.8.8.8"},
		{"SOCKS5 domain holding the mapped address", "::ffff:8.8.8.8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, reply := socksExchange(t, addr, []byte{0}, socksReq(socksConnect, tt.host, "443"))
			if reply != socksNotAllowed {
				t.Errorf("reply %#x, want %#x", reply, socksNotAllowed)
			}
			if d := dl.take(); len(d) != 0 {
				t.Errorf("dialled %q", d)
			}
		})
	}
}

// TestAttackSOCKS5DomainToLoopbackRefused: a listed name resolving to loopback
// still needs its address listed, through SOCKS5 domain requests too
// (the way curl --socks5-hostname and most SOCKS clients send names).
// Origin: review 9.
func TestAttackSOCKS5DomainToLoopbackRefused(t *testing.T) {
	var hits atomic.Int64
	loop := serveEach(t, "127.0.0.1", func(net.Conn) { hits.Add(1) })
	_, port, _ := net.SplitHostPort(loop)
	_, addr := startProxy(t, []string{"localhost"}, nil, Options{Resolver: newHostsResolver("127.0.0.1 localhost\n::1 localhost\n")})
	for _, name := range []string{"localhost", "LOCALHOST.", "LocalHost"} {
		t.Run(name, func(t *testing.T) {
			_, reply := socksExchange(t, addr, []byte{0}, socksReq(socksConnect, name, port))
			if reply != socksNotAllowed {
				t.Errorf("reply %#x, want %#x", reply, socksNotAllowed)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback service saw %d connections", n)
	}
}

// TestAttackWildcardLookalikesRefused: *.example.test allows its subdomains
// only; names that merely contain or end in it, or look like it, are
// refused on every protocol and never looked up.
// Origin: review 9.
func TestAttackWildcardLookalikesRefused(t *testing.T) {
	res := newHostsResolver("127.0.0.2 a.example.test\n")
	dl := &pipeDials{}
	_, addr := startProxy(t, []string{"*.example.test", "127.0.0.0/8"}, nil, Options{Resolver: res, Dial: dl.dial, HeadTimeout: 2 * time.Second})
	for _, host := range []string{
		"example.test",
		"evil-example.test",
		"evilexample.test",
		"a.example.test.evil.test",
		"example.test.evil.test",
		"a.example.testx",
		"xn--exmple-cua.test", // punycode look-alike
		"a.example-test",
	} {
		t.Run(host, func(t *testing.T) {
			if got := exchange(t, addr, "CONNECT "+host+":443 HTTP/1.1\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 403") {
				t.Errorf("CONNECT: %q, want 403", got)
			}
			if got := exchange(t, addr, "GET http://"+host+"/ HTTP/1.1\r\nConnection: close\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 403") {
				t.Errorf("forward: %q, want 403", got)
			}
			if _, reply := socksExchange(t, addr, []byte{0}, socksReq(socksConnect, host, "443")); reply != socksNotAllowed {
				t.Errorf("SOCKS5: reply %#x, want %#x", reply, socksNotAllowed)
			}
			if l := res.takeLookups(); len(l) != 0 {
				t.Errorf("looked up %q", l)
			}
			if d := dl.take(); len(d) != 0 {
				t.Errorf("dialled %q", d)
			}
		})
	}
}

// TestAttackLongHostNamesMalformed: over-long names and labels are malformed, not
// looked up and not dialled, whatever their length.
// Origin: review 9.
func TestAttackLongHostNamesMalformed(t *testing.T) {
	res := newHostsResolver("")
	dl := &pipeDials{}
	_, addr := startProxy(t, []string{"*.example.test"}, nil, Options{Resolver: res, Dial: dl.dial, HeadTimeout: 2 * time.Second})
	for _, tt := range []struct {
		name, host, want string
	}{
		{"64-byte label", strings.Repeat("a", 64) + ".example.test", "400"},
		{"254-byte name", strings.Repeat("a.", 120) + "a.example.test", "400"},
		{"10000-byte name", strings.Repeat("a.", 4993) + "example.test", "400"},
		{"70000-byte name", strings.Repeat("a.", 35000) + "example.test", "431"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := exchange(t, addr, "CONNECT "+tt.host+":443 HTTP/1.1\r\n\r\n")
			if !strings.HasPrefix(got, "HTTP/1.1 "+tt.want) {
				t.Errorf("answer %.80q, want %s", got, tt.want)
			}
			if l := res.takeLookups(); len(l) != 0 {
				t.Errorf("looked up %d names", len(l))
			}
			if d := dl.take(); len(d) != 0 {
				t.Errorf("dialled %q", d)
			}
		})
	}
}
