package netproxy

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
)

// testHosts is the hosts file of the proxy tests' resolver. Origin A
// listens on 127.0.0.2, origin B on 127.0.0.3.
const testHosts = `
127.0.0.2        api.test wild.test x.wild.test a.b.wild.test denied.wild.test mixed.test
127.0.0.3        other.test
8.8.8.8          mixed.test
10.1.2.3         priv.test
169.254.169.254  meta.test
`

// closedPort returns a port on ip nothing listens on.
func closedPort(t *testing.T, ip string) string {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

// TestProxyDecisions runs each case through HTTP forwarding, CONNECT and
// SOCKS5.
func TestProxyDecisions(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	b := startOrigin(t, "127.0.0.3", "B", false)
	closed := closedPort(t, "127.0.0.2")
	ports := map[string]string{"A": a.port, "B": b.port, "closed": closed}

	type tc struct {
		name        string
		allow, deny []string
		host, port  string // port: "A", "B", "closed" or a number
		want        string // the origin's name on success, else a substring of the error
		code        int    // HTTP status of a failure
		socks       byte   // SOCKS5 reply of a failure
		blocked     bool   // the failure is a policy refusal, reported
	}
	tests := []tc{
		{name: "allowed host", allow: []string{"api.test", "127.0.0.2"}, host: "api.test", port: "A", want: "A"},
		{name: "allowed host, other case and dot", allow: []string{"api.test", "127.0.0.2"}, host: "API.Test.", port: "A", want: "A"},
		{name: "unlisted host", allow: []string{"api.test", "127.0.0.2"}, host: "other.test", port: "B",
			want: "other.test:%B is not in the network allow-list", code: 403, socks: socksNotAllowed, blocked: true},
		{name: "listed host, other port", allow: []string{"api.test:%A", "127.0.0.2"}, host: "api.test", port: "B",
			want: "api.test:%B is not in the network allow-list", code: 403, socks: socksNotAllowed, blocked: true},
		{name: "listed host and port", allow: []string{"api.test:%A", "127.0.0.2"}, host: "api.test", port: "A", want: "A"},
		{name: "apex of a wildcard", allow: []string{"*.wild.test", "127.0.0.0/8"}, host: "wild.test", port: "A",
			want: "wild.test:%A is not in the network allow-list", code: 403, socks: socksNotAllowed, blocked: true},
		{name: "subdomain of a wildcard", allow: []string{"*.wild.test", "127.0.0.0/8"}, host: "x.wild.test", port: "A", want: "A"},
		{name: "deep subdomain of a wildcard", allow: []string{"*.wild.test", "127.0.0.0/8"}, host: "a.b.wild.test", port: "A", want: "A"},
		{name: "deny beats allow", allow: []string{"*.wild.test", "127.0.0.0/8"}, deny: []string{"denied.wild.test"}, host: "denied.wild.test", port: "A",
			want: "denied.wild.test:%A is in the network deny-list", code: 403, socks: socksNotAllowed, blocked: true},
		{name: "name resolving to unlisted loopback", allow: []string{"api.test"}, host: "api.test", port: "A",
			want: "api.test:%A resolves to 127.0.0.2, a loopback address not in the network allow-list; add 127.0.0.2", code: 403, socks: socksNotAllowed, blocked: true},
		{name: "name resolving to a listed address", allow: []string{"api.test", "127.0.0.2"}, host: "api.test", port: "A", want: "A"},
		{name: "name resolving into a listed range", allow: []string{"api.test", "127.0.0.0/8"}, host: "api.test", port: "A", want: "A"},
		{name: "range listed for another port", allow: []string{"api.test", "127.0.0.0/8:1"}, host: "api.test", port: "A",
			want: "resolves to 127.0.0.2, a loopback address", code: 403, socks: socksNotAllowed, blocked: true},
		{name: "one of two addresses unlisted", allow: []string{"mixed.test"}, host: "mixed.test", port: "A",
			want: "resolves to 127.0.0.2, a loopback address", code: 403, socks: socksNotAllowed, blocked: true},
		{name: "name resolving to a private address", allow: []string{"priv.test"}, host: "priv.test", port: "80",
			want: "priv.test:80 resolves to 10.1.2.3, a private address not in the network allow-list", code: 403, socks: socksNotAllowed, blocked: true},
		{name: "name resolving to the metadata address", allow: []string{"meta.test", "169.254.0.0/16"}, host: "meta.test", port: "80",
			want: "the cloud metadata address (link-local), not in the network allow-list; only an entry for 169.254.169.254 itself", code: 403, socks: socksNotAllowed, blocked: true},
		{name: "metadata literal through a range", allow: []string{"169.254.0.0/16"}, host: "169.254.169.254", port: "80",
			want: "169.254.169.254:80 is the cloud metadata address", code: 403, socks: socksNotAllowed, blocked: true},
		{name: "resolved address in a deny range", allow: []string{"api.test", "127.0.0.0/8"}, deny: []string{"127.0.0.2"}, host: "api.test", port: "A",
			want: "api.test:%A resolves to 127.0.0.2, which is in the network deny-list", code: 403, socks: socksNotAllowed, blocked: true},
		{name: "IP literal in a listed range", allow: []string{"127.0.0.0/8"}, host: "127.0.0.3", port: "B", want: "B"},
		{name: "IP literal listed", allow: []string{"127.0.0.3"}, host: "127.0.0.3", port: "B", want: "B"},
		{name: "IP literal unlisted", allow: []string{"127.0.0.2", "other.test"}, host: "127.0.0.3", port: "B",
			want: "127.0.0.3:%B is not in the network allow-list", code: 403, socks: socksNotAllowed, blocked: true},
		{name: "IP literal denied", allow: []string{"127.0.0.0/8"}, deny: []string{"127.0.0.3"}, host: "127.0.0.3", port: "B",
			want: "127.0.0.3:%B is in the network deny-list", code: 403, socks: socksNotAllowed, blocked: true},
		{name: "cannot resolve", allow: []string{"nx.test"}, host: "nx.test", port: "80",
			want: "cannot resolve nx.test: no such host", code: 502, socks: socksHostUnreachable},
		{name: "nothing listens", allow: []string{"127.0.0.0/8"}, host: "127.0.0.2", port: "closed",
			want: "connect to 127.0.0.2:%closed", code: 502, socks: socksConnRefused},
	}
	expand := func(s string) string {
		for k, v := range ports {
			s = strings.ReplaceAll(s, "%"+k, v)
		}
		return s
	}
	res := newHostsResolver(testHosts)
	for _, tt := range tests {
		for _, proto := range []string{"forward", "connect", "socks"} {
			t.Run(tt.name+"/"+proto, func(t *testing.T) {
				var allow, deny []string
				for _, e := range tt.allow {
					allow = append(allow, expand(e))
				}
				for _, e := range tt.deny {
					deny = append(deny, expand(e))
				}
				p, addr := startProxy(t, allow, deny, Options{Resolver: res})
				port := tt.port
				if v, ok := ports[port]; ok {
					port = v
				}
				target := net.JoinHostPort(tt.host, port)
				want := expand(tt.want)
				var status int
				var body string
				switch proto {
				case "forward":
					resp, err := proxyClient(addr).Get("http://" + target + "/p")
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					status, body = resp.StatusCode, string(b)
				case "connect":
					c := dialProxy(t, addr)
					resp, br := rawConnect(t, c, target)
					if resp.StatusCode == 200 {
						status, body = getOver(t, c, br, target, "/p")
					} else {
						b, _ := io.ReadAll(resp.Body)
						status, body = resp.StatusCode, string(b)
					}
				case "socks":
					c := dialProxy(t, addr)
					n, _ := strconv.Atoi(port)
					code, br := socksDial(t, c, strings.TrimSuffix(tt.host, "."), n, nil)
					if code != socksSucceeded {
						if code != tt.socks || tt.code == 0 {
							t.Fatalf("SOCKS5 reply %#x, want %#x", code, tt.socks)
						}
						status = -1
						break
					}
					status, body = getOver(t, c, br, target, "/p")
				}

				if tt.code == 0 {
					if status != 200 || !strings.HasPrefix(body, tt.want+" GET /p") {
						t.Fatalf("status %d body %q; want 200 from origin %s", status, body, tt.want)
					}
				} else if status != -1 {
					if status != tt.code || !strings.Contains(body, want) || strings.Count(body, "\n") != 1 {
						t.Fatalf("status %d body %q; want %d with one line mentioning %q", status, body, tt.code, want)
					}
				}
				blocked := p.Blocked()
				if tt.blocked {
					name, _, _ := normalizeHost(strings.TrimSuffix(tt.host, "."))
					if wantHP := hostPort(name, atoi(port)); !slices.Equal(blocked, []string{wantHP}) {
						t.Errorf("Blocked() = %q, want [%q]", blocked, wantHP)
					}
				} else if len(blocked) != 0 {
					t.Errorf("Blocked() = %q, want none", blocked)
				}
			})
		}
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestProxyIPv6Literal: [::1] through each protocol, allowed only when
// listed.
func TestProxyIPv6Literal(t *testing.T) {
	if _, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		testenv.Missing(t, "no IPv6 loopback (::1) here: %v", err)
	}
	o := startOrigin(t, "::1", "V6", false)
	target := net.JoinHostPort("::1", o.port)
	for _, allow := range [][]string{{"::1"}, {"[::1]:" + o.port}, {"::/127"}, {"127.0.0.1"}} {
		ok := allow[0] != "127.0.0.1"
		t.Run(strings.Join(allow, ","), func(t *testing.T) {
			p, addr := startProxy(t, allow, nil, Options{})
			resp, err := proxyClient(addr).Get("http://" + target + "/v6")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ok != (resp.StatusCode == 200 && strings.HasPrefix(string(b), "V6 GET /v6 host=[::1]:")) {
				t.Errorf("forward: %d %q (allowed: %v)", resp.StatusCode, b, ok)
			}

			c := dialProxy(t, addr)
			r, br := rawConnect(t, c, target)
			if ok != (r.StatusCode == 200) {
				t.Fatalf("CONNECT %s: %s", target, r.Status)
			}
			if ok {
				if code, body := getOver(t, c, br, target, "/c"); code != 200 || !strings.HasPrefix(body, "V6 GET /c") {
					t.Errorf("over the tunnel: %d %q", code, body)
				}
			}

			c = dialProxy(t, addr)
			code, br := socksDial(t, c, "::1", atoi(o.port), nil)
			if ok != (code == socksSucceeded) {
				t.Fatalf("SOCKS5 reply %#x", code)
			}
			if ok {
				if code, body := getOver(t, c, br, target, "/s"); code != 200 || !strings.HasPrefix(body, "V6 GET /s") {
					t.Errorf("over SOCKS5: %d %q", code, body)
				}
			} else if got := p.Blocked(); !slices.Equal(got, []string{"[::1]:" + o.port}) {
				t.Errorf("Blocked() = %q", got)
			}
		})
	}
}

// TestProxySystemResolver: with the host's resolver, "localhost" (from
// the real /etc/hosts) is refused for resolving to loopback, unless its
// addresses are listed.
func TestProxySystemResolver(t *testing.T) {
	addrs, err := net.DefaultResolver.LookupNetIP(t.Context(), "ip", "localhost")
	if err != nil || len(addrs) == 0 {
		testenv.Missing(t, "localhost does not resolve here: %v", err)
	}
	o := startOrigin(t, "127.0.0.1", "L", false)
	v6 := false
	for _, a := range addrs {
		v6 = v6 || a.Unmap().Is6()
	}
	if v6 {
		// The dial may take ::1 first: serve there too when we can.
		if ln, err := net.Listen("tcp6", "[::1]:"+o.port); err == nil {
			go http.Serve(ln, o.srv.Config.Handler)
			t.Cleanup(func() { ln.Close() })
		}
	}
	var listed []string
	for _, a := range addrs {
		listed = append(listed, a.Unmap().String())
	}
	tests := []struct {
		allow []string
		want  string // refusal substring; "" for success
	}{
		{[]string{"localhost"}, "a loopback address not in the network allow-list"},
		{append([]string{"localhost"}, listed...), ""},
		{[]string{"localhost", "127.0.0.0/8", "::1"}, ""},
		{[]string{"127.0.0.1"}, "localhost:" + o.port + " is not in the network allow-list"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.allow, ","), func(t *testing.T) {
			_, addr := startProxy(t, tt.allow, nil, Options{})
			resp, err := proxyClient(addr).Get("http://localhost:" + o.port + "/sys")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tt.want == "" {
				if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "L GET /sys") {
					t.Errorf("got %d %q, want the origin", resp.StatusCode, b)
				}
				return
			}
			if resp.StatusCode != 403 || !strings.Contains(string(b), tt.want) {
				t.Errorf("got %d %q, want 403 mentioning %q", resp.StatusCode, b, tt.want)
			}
		})
	}
}

// TestProxyHTTPSConnect: Go's client through CONNECT to a TLS server
// named by a wildcard entry; the certificate is verified end to end.
func TestProxyHTTPSConnect(t *testing.T) {
	o := startOrigin(t, "127.0.0.4", "TLS", true)
	res := newHostsResolver("127.0.0.4 secure.example.com example.com")
	pool := x509.NewCertPool()
	pool.AddCert(o.srv.Certificate())
	p, addr := startProxy(t, []string{"*.example.com:" + o.port, "127.0.0.4"}, nil, Options{Resolver: res})
	client := proxyClient(addr)
	client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}

	resp, err := client.Get("https://secure.example.com:" + o.port + "/tls")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "TLS GET /tls host=secure.example.com:") {
		t.Fatalf("got %d %q", resp.StatusCode, b)
	}
	// The apex is not covered by the wildcard: Go reports the proxy's 403.
	_, err = client.Get("https://example.com:" + o.port + "/tls")
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("GET of the apex: %v, want the proxy's Forbidden", err)
	}
	if got := p.Blocked(); !slices.Equal(got, []string{"example.com:" + o.port}) {
		t.Errorf("Blocked() = %q", got)
	}
}

// TestProxyKeepAliveRechecks: requests on one client connection that
// switch hosts are each checked, and each goes to its own host.
func TestProxyKeepAliveRechecks(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	b := startOrigin(t, "127.0.0.3", "B", false)
	res := newHostsResolver(testHosts)
	p, addr := startProxy(t, []string{"api.test", "127.0.0.3", "127.0.0.2"}, nil, Options{Resolver: res})
	c := dialProxy(t, addr)
	br := bufio.NewReader(c)
	steps := []struct {
		url  string
		code int
		want string
	}{
		{"http://api.test:" + a.port + "/1", 200, "A GET /1 host=api.test:" + a.port},
		{"http://api.test:" + a.port + "/2", 200, "A GET /2"},
		{"http://other.test:" + b.port + "/3", 403, "other.test:" + b.port + " is not in the network allow-list"},
		{"http://127.0.0.3:" + b.port + "/4", 200, "B GET /4 host=127.0.0.3:"},
		{"http://api.test:" + a.port + "/5", 200, "A GET /5"},
		{"http://other.test:" + b.port + "/6", 403, "not in the network allow-list"},
		{"http://API.TEST:" + a.port + "/7", 200, "A GET /7"},
	}
	for _, s := range steps {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: ignored.test\r\n\r\n", s.url)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", s.url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != s.code || !strings.Contains(string(body), s.want) {
			t.Fatalf("%s: %d %q, want %d with %q", s.url, resp.StatusCode, body, s.code, s.want)
		}
		if resp.Close {
			t.Fatalf("%s: the proxy closes the connection", s.url)
		}
	}
	// A refused CONNECT leaves the connection usable too.
	fmt.Fprintf(c, "CONNECT other.test:%s HTTP/1.1\r\n\r\nGET http://api.test:%s/8 HTTP/1.1\r\n\r\n", b.port, a.port)
	for _, want := range []int{403, 200} {
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil || resp.StatusCode != want {
			t.Fatalf("after a refused CONNECT: %v %v, want %d", resp, err, want)
		}
		io.Copy(io.Discard, resp.Body)
	}
	if got := p.Blocked(); !slices.Equal(got, []string{"other.test:" + b.port}) {
		t.Errorf("Blocked() = %q", got)
	}
	// Six requests to A in two runs (B in between): the proxy keeps an
	// upstream connection while the host stays the same.
	if n := a.connCount(); n != 2 {
		t.Errorf("origin A saw %d connections, want 2", n)
	}
}

// TestProxyForwardHeaders: the request reaches the origin in origin form,
// without hop-by-hop and Proxy-* headers, and without a User-Agent the
// client did not send.
func TestProxyForwardHeaders(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{})
	c := dialProxy(t, addr)
	fmt.Fprintf(c, "GET http://127.0.0.2:%s/headers?q=1 HTTP/1.1\r\n"+
		"Host: 127.0.0.2:%s\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nProxy-Foo: x\r\n"+
		"Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nUpgrade: websocket\r\n"+
		"X-Kept: yes\r\nAccept: */*\r\n\r\n", a.port, a.port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	got := string(b)
	for _, gone := range []string{"Proxy-", "X-Hop", "Keep-Alive", "Te:", "Upgrade", "User-Agent", "Connection"} {
		if strings.Contains(got, gone) {
			t.Errorf("the origin got %q:\n%s", gone, got)
		}
	}
	for _, kept := range []string{"X-Kept: yes", "Accept: */*", "RequestURI: /headers?q=1", "Host: 127.0.0.2:" + a.port} {
		if !strings.Contains(got, kept) {
			t.Errorf("the origin did not get %q:\n%s", kept, got)
		}
	}
}

// TestProxyForwardBodies: request bodies (sized and chunked), Expect:
// 100-continue, chunked and close-delimited responses, HEAD, and an
// HTTP/1.0 client.
func TestProxyForwardBodies(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{})
	base := "http://127.0.0.2:" + a.port
	client := proxyClient(addr)
	// Wait for the proxy's 100 Continue (a missing one costs 10 s).
	client.Transport.(*http.Transport).ExpectContinueTimeout = 10 * time.Second

	const n = 3<<20 + 17
	for _, chunked := range []bool{false, true} {
		var body io.Reader = io.LimitReader(newStream(), n)
		if chunked {
			body = struct{ io.Reader }{body} // unknown length: Go sends chunks
		}
		req, _ := http.NewRequest("POST", base+"/sum", body)
		if !chunked {
			req.ContentLength = n
		}
		req.Header.Set("Expect", "100-continue")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("%d %s", n, streamSum(n)); string(b) != want {
			t.Errorf("upload (chunked %v): origin got %q, want %q", chunked, b, want)
		}
	}
	for _, path := range []string{"/chunked", "/close", "/big"} {
		resp, err := client.Get(base + path + "?n=" + strconv.Itoa(n))
		if err != nil {
			t.Fatal(err)
		}
		if got := sumBody(t, resp.Body); got != streamSum(n) {
			t.Errorf("%s: body differs", path)
		}
		resp.Body.Close()
	}
	resp, err := client.Head(base + "/big?n=1000")
	if err != nil || resp.StatusCode != 200 || resp.ContentLength != 1000 {
		t.Errorf("HEAD: %v %+v", err, resp)
	}

	// An HTTP/1.0 client gets a chunked response unchunked, ended by close.
	c := dialProxy(t, addr)
	fmt.Fprintf(c, "GET %s/chunked?n=100000 HTTP/1.0\r\n\r\n", base)
	all, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	head, body, _ := strings.Cut(string(all), "\r\n\r\n")
	if strings.Contains(strings.ToLower(head), "chunked") || len(body) != 100000 {
		t.Errorf("HTTP/1.0 client: head %q, body %d bytes", head, len(body))
	}
}

// TestProxyBadRequests: garbage, wrong forms and oversized or slow heads
// get an answer (or a close) and never a panic; the proxy goes on.
func TestProxyBadRequests(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	p, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{HeadTimeout: 500 * time.Millisecond, MaxHeadBytes: 8 << 10})
	tests := []struct {
		name string
		send string
		want string // start of the answer; "" for a close without one
	}{
		{"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage", "HTTP/1.1 400 "},
		{"binary", "\xff\xfe\xfd\x00\x01", "HTTP/1.1 400 "},
		{"bad request line", "HELLO\r\n\r\n", "HTTP/1.1 400 "},
		{"origin form", "GET /x HTTP/1.1\r\nHost: 127.0.0.2\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 "},
		{"https absolute form", "GET https://127.0.0.2/ HTTP/1.1\r\nHost: 127.0.0.2\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 "},
		{"ftp absolute form", "GET ftp://127.0.0.2/ HTTP/1.1\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 "},
		{"bad port", "GET http://127.0.0.2:99999/ HTTP/1.1\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 "},
		{"CONNECT without port", "CONNECT 127.0.0.2 HTTP/1.1\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 "},
		{"CONNECT port 0", "CONNECT 127.0.0.2:0 HTTP/1.1\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 "},
		{"CONNECT zone", "CONNECT [fe80::1%lo]:80 HTTP/1.1\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 "},
		{"CONNECT numeric name", "CONNECT 2130706433:80 HTTP/1.1\r\nConnection: close\r\n\r\n", "HTTP/1.1 400 "},
		{"oversized head", "GET http://127.0.0.2:" + a.port + "/ HTTP/1.1\r\nX: " + strings.Repeat("a", 20<<10) + "\r\n\r\n", "HTTP/1.1 431 "},
		{"many headers", "GET http://127.0.0.2:" + a.port + "/ HTTP/1.1\r\n" + strings.Repeat("X: y\r\n", 5000) + "\r\n", "HTTP/1.1 431 "},
		{"unfinished head", "GET http://127.0.0.2:" + a.port + "/ HTTP/1.1\r\nX: y\r\n", "HTTP/1.1 408 "},
		{"nothing", "", ""},
		{"SOCKS4", "\x04\x01\x00\x50\x7f\x00\x00\x02\x00", "\x00\x5b"},
		{"SOCKS5 truncated", "\x05\x01", ""},
		{"SOCKS5 wrong request version", "\x05\x01\x00\x04\x01\x00\x01", "\x05\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialProxy(t, addr)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			start := time.Now()
			io.WriteString(c, tt.send)
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("reading the answer: %v (the proxy should close)", err)
			}
			if tt.want == "" && len(got) != 0 || !strings.HasPrefix(string(got), tt.want) {
				t.Errorf("answer %q, want it to start with %q", got, tt.want)
			}
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Errorf("took %v", elapsed)
			}
		})
	}
	if b := p.Blocked(); len(b) != 0 {
		t.Errorf("Blocked() = %q after malformed requests, want none", b)
	}
	// Still serving.
	resp, err := proxyClient(addr).Get("http://127.0.0.2:" + a.port + "/after")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after bad requests: %v %v", err, resp)
	}
	resp.Body.Close()
}

// TestProxySlowloris: a head dribbled a byte at a time is cut at the head
// timeout, however steadily the bytes come.
func TestProxySlowloris(t *testing.T) {
	_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{HeadTimeout: 400 * time.Millisecond})
	c := dialProxy(t, addr)
	start := time.Now()
	io.WriteString(c, "GET http://127.0.0.2/ HTTP/1.1\r\n")
	var closedAt time.Duration
	for i := 0; i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
		if _, err := io.WriteString(c, "X"); err != nil {
			closedAt = time.Since(start)
			break
		}
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if b, _ := io.ReadAll(c); len(b) > 0 {
			if !strings.HasPrefix(string(b), "HTTP/1.1 408 ") {
				t.Fatalf("answer %q, want 408", b)
			}
			closedAt = time.Since(start)
			break
		}
	}
	if closedAt == 0 || closedAt < 350*time.Millisecond || closedAt > 2*time.Second {
		t.Errorf("the slow head was cut after %v, want about 400ms", closedAt)
	}
}

// TestProxySOCKS5Protocol: the SOCKS5 replies for what the proxy does not
// do.
func TestProxySOCKS5Protocol(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	_, addr := startProxy(t, []string{"127.0.0.2", "api.test"}, nil, Options{Resolver: newHostsResolver(testHosts)})

	t.Run("no acceptable method", func(t *testing.T) {
		c := dialProxy(t, addr)
		code, _ := socksDial(t, c, "127.0.0.2", atoi(a.port), []byte{0x02, 0x01})
		if code != socksNoAcceptable {
			t.Errorf("method reply %#x, want 0xff", code)
		}
	})
	t.Run("no-auth among others", func(t *testing.T) {
		c := dialProxy(t, addr)
		code, br := socksDial(t, c, "127.0.0.2", atoi(a.port), []byte{0x02, 0x00, 0x01})
		if code != socksSucceeded {
			t.Fatalf("reply %#x", code)
		}
		if st, body := getOver(t, c, br, "127.0.0.2", "/m"); st != 200 || !strings.HasPrefix(body, "A GET /m") {
			t.Errorf("%d %q", st, body)
		}
	})
	for _, tt := range []struct {
		name string
		req  []byte
		want byte
	}{
		{"BIND", []byte{5, 2, 0, 1, 127, 0, 0, 2, 0, 80}, socksCmdNotSupported},
		{"UDP ASSOCIATE", []byte{5, 3, 0, 1, 127, 0, 0, 2, 0, 80}, socksCmdNotSupported},
		{"unknown address type", []byte{5, 1, 0, 9, 127, 0, 0, 2, 0, 80}, socksAtypNotSupported},
		{"bad name", append([]byte{5, 1, 0, 3, 5}, "a b.c\x00\x50"...), socksGeneralFailure},
		{"empty name", []byte{5, 1, 0, 3, 0, 0, 80}, socksGeneralFailure},
		{"port 0", []byte{5, 1, 0, 1, 127, 0, 0, 2, 0, 0}, socksGeneralFailure},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dialProxy(t, addr)
			c.Write([]byte{5, 1, 0})
			br := bufio.NewReader(c)
			if _, err := io.ReadFull(br, make([]byte, 2)); err != nil {
				t.Fatal(err)
			}
			c.Write(tt.req)
			if code := readSocksReply(t, br); code != tt.want {
				t.Errorf("reply %#x, want %#x", code, tt.want)
			}
		})
	}
	t.Run("data sent with the request", func(t *testing.T) {
		// A client may send its first bytes without waiting for the reply.
		c := dialProxy(t, addr)
		msg := []byte{5, 1, 0, 5, 1, 0, 3, 8}
		msg = append(msg, "api.test"...)
		msg = binary16(msg, atoi(a.port))
		msg = append(msg, "GET /early HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n"...)
		c.Write(msg)
		br := bufio.NewReader(c)
		io.ReadFull(br, make([]byte, 2))
		if code := readSocksReply(t, br); code != socksSucceeded {
			t.Fatalf("reply %#x", code)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if !strings.HasPrefix(string(b), "A GET /early") {
			t.Errorf("body %q", b)
		}
	})
}

func binary16(b []byte, n int) []byte { return append(b, byte(n>>8), byte(n)) }

// TestProxyConcurrent: 50 clients at once, a third of them refused, over
// all three protocols.
func TestProxyConcurrent(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	p, addr := startProxy(t, []string{"api.test", "127.0.0.2"}, nil, Options{Resolver: newHostsResolver(testHosts)})
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			host := "api.test"
			if i%3 == 0 {
				host = fmt.Sprintf("refused%d.test", i%6)
			}
			target := net.JoinHostPort(host, a.port)
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			path := fmt.Sprintf("/c%d", i)
			var status int
			var body string
			switch i % 2 {
			case 0:
				fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", target)
				br := bufio.NewReader(c)
				resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
				if err != nil {
					errs <- err
					return
				}
				status = resp.StatusCode
				if status == 200 {
					fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n", path)
					r2, err := http.ReadResponse(br, nil)
					if err != nil {
						errs <- err
						return
					}
					b, _ := io.ReadAll(r2.Body)
					body = string(b)
				}
			case 1:
				fmt.Fprintf(c, "GET http://%s%s HTTP/1.1\r\nConnection: close\r\n\r\n", target, path)
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					errs <- err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				status, body = resp.StatusCode, string(b)
			}
			switch {
			case i%3 == 0 && status != 403:
				errs <- fmt.Errorf("client %d to %s: status %d, want 403", i, host, status)
			case i%3 != 0 && (status != 200 || !strings.HasPrefix(body, "A GET "+path)):
				errs <- fmt.Errorf("client %d: %d %q", i, status, body)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := p.Blocked()
	slices.Sort(got)
	var want []string
	for i := range 6 {
		if i%3 == 0 {
			want = append(want, fmt.Sprintf("refused%d.test:%s", i, a.port))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("Blocked() = %q, want %q", got, want)
	}
}

// TestProxyBlockedReports: order of first refusal, no duplicates, the
// bound, TakeBlocked and recordings.
func TestProxyBlockedReports(t *testing.T) {
	p, addr := startProxy(t, []string{"allowed.test"}, nil, Options{Resolver: newHostsResolver("")})
	refuse := func(target string) {
		t.Helper()
		c := dialProxy(t, addr)
		if resp, _ := rawConnect(t, c, target); resp.StatusCode != 403 {
			t.Fatalf("CONNECT %s: %s, want 403", target, resp.Status)
		}
	}
	refuse("b.test:443")
	rec := p.Record()
	refuse("a.test:443")
	refuse("B.TEST.:443")
	refuse("b.test:80")
	refuse("[::1]:443")
	if got, want := p.Blocked(), []string{"b.test:443", "a.test:443", "b.test:80", "[::1]:443"}; !slices.Equal(got, want) {
		t.Errorf("Blocked() = %q, want %q", got, want)
	}
	if got, want := rec.Blocked(), []string{"a.test:443", "b.test:443", "b.test:80", "[::1]:443"}; !slices.Equal(got, want) {
		t.Errorf("Recording.Blocked() = %q, want %q", got, want)
	}
	if got := p.TakeBlocked(); len(got) != 4 {
		t.Errorf("TakeBlocked() = %q", got)
	}
	if got := p.Blocked(); len(got) != 0 {
		t.Errorf("Blocked() after TakeBlocked = %q", got)
	}
	refuse("c.test:1")
	stopped := rec.Stop()
	refuse("d.test:1")
	if !slices.Equal(stopped, rec.Stop()) || len(stopped) != 5 || stopped[4] != "c.test:1" {
		t.Errorf("Stop() = %q", stopped)
	}
	if got, want := p.Blocked(), []string{"c.test:1", "d.test:1"}; !slices.Equal(got, want) {
		t.Errorf("Blocked() = %q, want %q", got, want)
	}

	// The bound: MaxBlocked distinct entries, the first ones kept.
	for i := range MaxBlocked + 50 {
		p.record(fmt.Sprintf("h%d.test:1", i))
	}
	got := p.TakeBlocked()
	if len(got) != MaxBlocked || got[0] != "c.test:1" || slices.Contains(got, fmt.Sprintf("h%d.test:1", MaxBlocked)) {
		t.Errorf("after %d refusals: %d entries, first %q", MaxBlocked+52, len(got), got[0])
	}
}

// TestProxyClose: Close ends listeners, idle and busy connections and
// tunnels, and leaves no goroutine behind; later calls fail cleanly.
func TestProxyClose(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	// A server that holds connections open without a word until the client
	// closes.
	hold := serveEach(t, "127.0.0.3", func(c net.Conn) { io.Copy(io.Discard, c) })
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()

	p, addr, served := serveProxy(t, []string{"127.0.0.0/8"}, nil, Options{})

	var clients []net.Conn
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		return c
	}
	dial() // idle, before its first byte
	c := dial()
	io.WriteString(c, "GET http://127.0.0.2:"+a.port+"/x HTTP/1.1\r\n\r\n") // keep-alive, then idle
	http.ReadResponse(bufio.NewReader(c), nil)
	c = dial()
	tunnelTo(t, c, hold) // a tunnel to a silent server
	c = dial()
	io.WriteString(c, "\x05\x01\x00") // a SOCKS5 greeting only

	// ServeConn on a unix socket pair, as the sandbox uses it.
	pa, pb := unixPair(t)
	clients = append(clients, pb)
	sc := make(chan error, 1)
	go func() { sc <- p.ServeConn(context.Background(), pa) }()

	time.Sleep(100 * time.Millisecond)
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if err := <-served; !errors.Is(err, ErrClosed) || !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve returned %v, want ErrClosed", err)
	}
	if err := <-sc; err != nil {
		t.Errorf("ServeConn returned %v, want nil", err)
	}
	for _, c := range clients {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Errorf("a client connection was not closed: %v", err)
		}
		c.Close()
	}
	if err := p.ServeConn(context.Background(), pb); !errors.Is(err, ErrClosed) {
		t.Errorf("ServeConn after Close = %v", err)
	}
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := p.Serve(context.Background(), ln2); !errors.Is(err, ErrClosed) {
		t.Errorf("Serve after Close = %v", err)
	}
	if _, err := ln2.Accept(); err == nil {
		t.Error("Serve after Close left the listener open")
	}
	p.Close() // again

	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestProxyServeContext: ending Serve's context closes its listener and
// its connections.
func TestProxyServeContext(t *testing.T) {
	p, err := New(mustList(t, []string{"127.0.0.1"}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "\x05")
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve = %v, want context.Canceled", err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Errorf("the connection outlived Serve's context: %v", err)
	}
}

// TestProxyOverUnixSocket: CONNECT from a client on a unix socket (the
// sandbox's bridge) through ServeConn.
func TestProxyOverUnixSocket(t *testing.T) {
	a := startOrigin(t, "127.0.0.2", "A", false)
	p, err := New(mustList(t, []string{"127.0.0.2"}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client := unixClient(t, p)
	br := tunnelTo(t, client, "127.0.0.2:"+a.port)
	if code, body := getOver(t, client, br, "127.0.0.2", "/unix"); code != 200 || !strings.HasPrefix(body, "A GET /unix") {
		t.Errorf("%d %q", code, body)
	}
}

// TestNewOptions: negative options are errors.
func TestNewOptions(t *testing.T) {
	for _, o := range []Options{{DialTimeout: -1}, {HeadTimeout: -1}, {MaxHeadBytes: -1}} {
		if _, err := New(nil, o); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("New(%+v) = %v", o, err)
		}
	}
	p, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.headTimeout != DefaultHeadTimeout || p.maxHead != DefaultMaxHeadBytes || p.dialer.timeout() != DefaultDialTimeout {
		t.Errorf("defaults: %v %d %v", p.headTimeout, p.maxHead, p.dialer.timeout())
	}
	if p.List() != nil {
		t.Error("List() of a proxy made with nil")
	}
}

// sumBody hashes r.
func sumBody(t testing.TB, r io.Reader) string {
	t.Helper()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
