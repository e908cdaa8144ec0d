package tool

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/netproxy"
)

// fetchFakeResolver answers lookups from a table and records them. A host
// not in the table gets fallback (nil: "no such host"). Answer, when set,
// overrides the table and receives the lookup's sequence number (from 1).
type fetchFakeResolver struct {
	answers  map[string][]string
	fallback []string
	answer   func(host string, n int) []string

	mu    sync.Mutex
	calls []string
}

func (r *fetchFakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.calls = append(r.calls, host)
	n := len(r.calls)
	r.mu.Unlock()
	var ips []string
	if r.answer != nil {
		ips = r.answer(host, n)
	} else if a, ok := r.answers[host]; ok {
		ips = a
	} else {
		ips = r.fallback
	}
	if ips == nil {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, len(ips))
	for i, s := range ips {
		out[i] = netip.MustParseAddr(s)
	}
	return out, nil
}

func (r *fetchFakeResolver) lookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// fetchDialLog records the low-level dials of a Fetcher. Real dials go
// through to the network (only 127.0.0.1 and ::1 are ever dialed for real
// in these tests); with fail set, every dial fails without touching it.
type fetchDialLog struct {
	fail bool

	mu      sync.Mutex
	targets []string // "network address"
}

func (d *fetchDialLog) install(f *Fetcher) {
	real := f.dialer.Dial
	f.dialer.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		d.mu.Lock()
		d.targets = append(d.targets, network+" "+address)
		d.mu.Unlock()
		if d.fail {
			return nil, errors.New("test dialer: no network here")
		}
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !ap.Addr().IsLoopback() {
			return nil, fmt.Errorf("test dialer: refusing to dial %q outside the machine", address)
		}
		return real(ctx, network, address)
	}
}

func (d *fetchDialLog) dials() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.targets...)
}

// newFetchTest builds a Fetcher for p with res (nil: the real resolver)
// and a dial log.
func newFetchTest(t testing.TB, p FetchPolicy, res netproxy.Resolver) (*Fetcher, *fetchDialLog) {
	t.Helper()
	f, err := NewFetcher(p)
	if err != nil {
		t.Fatalf("NewFetcher(%+v): %v", p, err)
	}
	if res != nil {
		f.dialer.Resolver = res
	}
	dl := &fetchDialLog{}
	dl.install(f)
	if tb, ok := t.(interface{ Cleanup(func()) }); ok {
		tb.Cleanup(f.transport.CloseIdleConnections)
	}
	return f, dl
}

// hostPort is the host:port of a test server URL.
func hostPort(t *testing.T, rawURL string) (host, port string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), u.Port()
}

func helloServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func wantRefused(t *testing.T, err error, substr string) {
	t.Helper()
	if !errors.Is(err, ErrFetchRefused) {
		t.Fatalf("error = %v, want one matching ErrFetchRefused", err)
	}
	if !strings.HasPrefix(err.Error(), "fetch refused: ") {
		t.Errorf("error %q does not start with \"fetch refused: \"", err)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Errorf("error = %q, want it to mention %q", err, substr)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q is more than one line", err)
	}
}

// TestFetchAllowMatch: the allow-list is netproxy's grammar: a name
// matches itself only, "*." its subdomains only, an address entry IP
// literals only, ":port" one port.
func TestFetchAllowMatch(t *testing.T) {
	tests := []struct {
		allow []string
		host  string
		port  int
		want  bool
	}{
		{[]string{"example.com"}, "example.com", 443, true},
		{[]string{"example.com"}, "api.example.com", 443, false},
		{[]string{"example.com"}, "badexample.com", 443, false},
		{[]string{"example.com"}, "example.com.evil.org", 443, false},
		{[]string{"example.com"}, "com", 443, false},
		{[]string{"example.com"}, "EXAMPLE.com", 80, true},
		{[]string{"Example.COM"}, "example.com", 80, true},
		{[]string{"example.com"}, "example.com.", 80, true},
		{[]string{"example.com."}, "example.com", 80, true},
		{[]string{"*.example.com"}, "example.com", 443, false},
		{[]string{"*.example.com"}, "x.example.com", 443, true},
		{[]string{"*.example.com"}, "a.b.example.com", 443, true},
		{[]string{"*.example.com"}, "badexample.com", 443, false},
		{[]string{"example.com", "*.example.com"}, "example.com", 443, true},
		{[]string{"api.example.com"}, "example.com", 443, false},
		{[]string{"api.example.com"}, "v2.api.example.com", 443, false},
		{[]string{"example.com:443"}, "example.com", 443, true},
		{[]string{"example.com:443"}, "example.com", 80, false},
		{[]string{}, "example.com", 443, false},
		{nil, "example.com", 443, false},
		{[]string{"example.com"}, "", 443, false},
		{[]string{"example.com"}, "example.com", 0, false},
		{[]string{"127.0.0.1"}, "127.0.0.1", 80, true},
		{[]string{"127.0.0.1"}, "127.0.0.2", 80, false},
		{[]string{"127.0.0.0/8"}, "127.0.0.2", 80, true},
		{[]string{"127.0.0.1"}, "localhost", 80, false},
		{[]string{"127.0.0.1"}, "x.127.0.0.1", 80, false},
		{[]string{"127.0.0.1"}, "::ffff:127.0.0.1", 80, true},
		{[]string{"::1"}, "::1", 80, true},
		{[]string{"::1"}, "[::1]", 80, true},
		{[]string{"[::1]"}, "::1", 80, true},
		{[]string{"[::1]:8080"}, "[::1]", 8080, true},
		{[]string{"[::1]:8080"}, "[::1]", 80, false},
		{[]string{"::1"}, "0:0:0:0:0:0:0:1", 80, true},
		{[]string{"2001:DB8::A"}, "2001:db8::a", 80, true},
		{[]string{"::1"}, "127.0.0.1", 80, false},
		{[]string{"::1"}, "[::1]:80", 80, false},
		{[]string{"example.com"}, "example.com:443", 443, false},
		{[]string{"localhost"}, "localhost", 80, true},
		{[]string{"a.test", "*.b.test"}, "x.b.test", 80, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%s:%d", tt.allow, tt.host, tt.port), func(t *testing.T) {
			f, err := NewFetcher(FetchPolicy{Allow: tt.allow})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Allowed(tt.host, tt.port); got != tt.want {
				t.Errorf("Allowed(%q, %d) with %q = %v, want %v", tt.host, tt.port, tt.allow, got, tt.want)
			}
		})
	}
}

func TestNewFetcherBadPolicy(t *testing.T) {
	tests := []struct {
		name string
		p    FetchPolicy
		want string
	}{
		{"empty entry", FetchPolicy{Allow: []string{""}}, "empty entry"},
		{"blank entry", FetchPolicy{Allow: []string{"  "}}, "empty entry"},
		{"scheme", FetchPolicy{Allow: []string{"https://example.com"}}, "scheme"},
		{"path", FetchPolicy{Allow: []string{"example.com/api"}}, "path"},
		{"port 0", FetchPolicy{Allow: []string{"example.com:0"}}, "port"},
		{"port too big", FetchPolicy{Allow: []string{"127.0.0.1:65536"}}, "port"},
		{"port not a number", FetchPolicy{Allow: []string{"[::1]:http"}}, "port"},
		{"public suffix", FetchPolicy{Allow: []string{"*.co.uk"}}, "public suffix"},
		{"userinfo", FetchPolicy{Allow: []string{"user@example.com"}}, "user info"},
		{"star", FetchPolicy{Allow: []string{"*"}}, "wildcard"},
		{"inner star", FetchPolicy{Allow: []string{"api.*.example.com"}}, "wildcard"},
		{"suffix star", FetchPolicy{Allow: []string{"example.*"}}, "wildcard"},
		{"double star", FetchPolicy{Allow: []string{"*.*.example.com"}}, "wildcard"},
		{"star no dot", FetchPolicy{Allow: []string{"*example.com"}}, "wildcard"},
		{"star ip", FetchPolicy{Allow: []string{"*.10.0.0.1"}}, "IP address"},
		{"space inside", FetchPolicy{Allow: []string{"exa mple.com"}}, "invalid character"},
		{"empty label", FetchPolicy{Allow: []string{"example..com"}}, "label"},
		{"zone", FetchPolicy{Allow: []string{"fe80::1%eth0"}}, "zone"},
		{"numeric", FetchPolicy{Allow: []string{"2130706433"}}, "numeric"},
		{"hex", FetchPolicy{Allow: []string{"0x7f.1"}}, "numeric"},
		{"unicode", FetchPolicy{Allow: []string{"bücher.de"}}, "xn--"},
		{"bad brackets", FetchPolicy{Allow: []string{"[example.com]"}}, "IPv6"},
		{"negative connect", FetchPolicy{ConnectTimeout: -1}, "negative"},
		{"negative read", FetchPolicy{ReadTimeout: -1}, "negative"},
		{"negative body", FetchPolicy{MaxBody: -1}, "negative"},
		{"negative redirects", FetchPolicy{MaxRedirects: -1}, "negative"},
		{"one bad among good", FetchPolicy{Allow: []string{"example.com", "http://x"}}, `"http://x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewFetcher(tt.p)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("NewFetcher(%+v) error = %v, want one matching ErrConfig", tt.p, err)
			}
			if len(tt.p.Allow) > 0 && !errors.Is(err, netproxy.ErrBadEntry) {
				t.Errorf("error %v does not match netproxy.ErrBadEntry", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestNewFetcherDefaults(t *testing.T) {
	f, err := NewFetcher(FetchPolicy{Allow: []string{"example.com", "*.example.com", "::1", "10.0.0.0/8:443"}})
	if err != nil {
		t.Fatal(err)
	}
	p := f.policy
	if p.ConnectTimeout != 5*time.Second || p.ReadTimeout != 10*time.Second || p.MaxBody != 200000 || p.MaxRedirects != 5 {
		t.Errorf("defaults = %+v", p)
	}
	if f.transport.Proxy != nil {
		t.Error("transport has a proxy function; want none")
	}
}

// TestFetchURLRefusals: URLs refused before any lookup or dial.
func TestFetchURLRefusals(t *testing.T) {
	tests := []struct {
		url  string
		want string
	}{
		{"ftp://allowed.test/", `scheme "ftp"`},
		{"file:///etc/passwd", `scheme "file"`},
		{"gopher://allowed.test/", `scheme "gopher"`},
		{"http+unix://unix.sock/x", `scheme "http+unix"`},
		{"unix:///tmp/x.sock", `scheme "unix"`},
		{"javascript:alert(1)", `scheme "javascript"`},
		{"allowed.test/x", `scheme ""`},
		{"//allowed.test/x", `scheme ""`},
		{"http://user:pw@allowed.test/", "user info"},
		{"http://allowed.test@evil.com/", "user info"},
		{"http://@allowed.test/", "user info"},
		{"http:///x", "no host"},
		{"http:allowed.test", "no host"},
		{"http://evil.com/", "evil.com:80 is not in the network allow-list"},
		{"https://evil.com/", "evil.com:443 is not in the network allow-list"},
		{"http://allowed.test.evil.com/", "not in the network allow-list"},
		{"http://evilallowed.test/", "not in the network allow-list"},
		{"http://sub.allowed.test/", "sub.allowed.test:80 is not in the network allow-list"},
		{"http://allowed.test:8080/", "allowed.test:8080 is not in the network allow-list"},
		{"http://127.0.0.1/", "127.0.0.1:80 is not in the network allow-list"},
		{"http://[::1]/", "[::1]:80 is not in the network allow-list"},
		{"http://unix:/tmp/x.sock", "unix:80 is not in the network allow-list"},
		{"http://2130706433/", "numeric"},
		{"http://0x7f.1/", "numeric"},
		{"http://127.1/", "numeric"},
		{"http://[fe80::1%25eth0]/", "zone"},
		{"http://allowed。test/", "xn--"},
		{"http://allowed.test:0/", "port"},
		{"https://allowed.test:65536/", "port"},
		{"http://" + strings.Repeat("a", 9000) + ".allowed.test/", "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			res := &fetchFakeResolver{fallback: []string{"127.0.0.1"}}
			f, dl := newFetchTest(t, FetchPolicy{Allow: []string{"allowed.test:80", "allowed.test:443", "unix:443"}}, res)
			_, err := f.Fetch(t.Context(), tt.url)
			wantRefused(t, err, tt.want)
			// The URL check alone refuses it (the dial check is a second layer).
			if _, err := f.checkURL(tt.url); !errors.Is(err, ErrFetchRefused) {
				t.Errorf("checkURL(%q) = %v, want a refusal", tt.url, err)
			}
			if l := res.lookups(); len(l) > 0 {
				t.Errorf("looked up %q for a refused URL", l)
			}
			if d := dl.dials(); len(d) > 0 {
				t.Errorf("dialed %q for a refused URL", d)
			}
		})
	}
}

// TestFetchDialContextChecks: the dial layer applies the whole policy by
// itself, whatever the HTTP client asks for (a second layer under the URL
// check, and the one that sees proxies and redirects as they are dialed).
func TestFetchDialContextChecks(t *testing.T) {
	res := &fetchFakeResolver{answers: map[string][]string{
		"example.test":     {"127.0.0.1"},
		"api.example.test": {"127.0.0.1"},
		"lo.example.test":  {"127.0.0.2"},
		"pub.example.test": {"8.8.8.8"},
	}}
	tests := []struct {
		addr string
		want string // refusal substring; "" when the dial goes ahead
		dial string // the dial expected when allowed
	}{
		{"evil.com:80", "evil.com:80 is not in the network allow-list", ""},
		{"127.0.0.2:80", "127.0.0.2:80 is not in the network allow-list", ""},
		{"[::1]:80", "[::1]:80 is not in the network allow-list", ""},
		{"10.0.0.1:80", "10.0.0.1:80 is not in the network allow-list", ""},
		{"[::ffff:10.0.0.1]:80", "10.0.0.1:80 is not in the network allow-list", ""},
		{"lo.example.test:80", "lo.example.test:80 resolves to 127.0.0.2, a loopback address not in the network allow-list", ""},
		{"example.test:8080", "example.test:8080 is not in the network allow-list", ""},
		{"2130706433:80", "numeric", ""},
		{"example.test", "not host:port", ""},
		{"example.test:0", "not a number from 1 to 65535", ""},
		{"example.test:http", "not a number from 1 to 65535", ""},
		{"[fe80::1%eth0]:80", "zone", ""},
		{"example.test:80", "", "tcp 127.0.0.1:80"},
		{"EXAMPLE.test.:443", "", "tcp 127.0.0.1:443"},
		{"api.example.test:443", "", "tcp 127.0.0.1:443"},
		{"pub.example.test:8080", "", "tcp 8.8.8.8:8080"},
		{"8.8.8.8:80", "", "tcp 8.8.8.8:80"},
		{"127.0.0.1:80", "", "tcp 127.0.0.1:80"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			f, dl := newFetchTest(t, FetchPolicy{Allow: []string{"example.test:80", "example.test:443", "*.example.test", "8.8.8.8", "127.0.0.1"}}, res)
			dl.fail = true
			_, err := f.dialContext(t.Context(), "unix", tt.addr)
			if tt.want != "" {
				wantRefused(t, err, tt.want)
				if d := dl.dials(); len(d) > 0 {
					t.Errorf("dialed %q", d)
				}
				return
			}
			if d := dl.dials(); len(d) != 1 || d[0] != tt.dial {
				t.Errorf("dials = %q, want [%q] (err %v)", d, tt.dial, err)
			}
		})
	}
}

func TestFetchInvalidURL(t *testing.T) {
	f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"allowed.test"}}, &fetchFakeResolver{})
	for _, u := range []string{"http://allowed.test/\n", "http://[::1/", "http://allowed.test:80:80/", "%zz"} {
		_, err := f.Fetch(t.Context(), u)
		if err == nil || !strings.Contains(err.Error(), "invalid URL") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Fetch(%q) error = %v, want a one-line invalid URL error", u, err)
		}
	}
}

func TestFetchLoopbackServer(t *testing.T) {
	srv := helloServer(t)
	_, port := hostPort(t, srv.URL)
	tests := []struct {
		name  string
		allow []string
		url   string
		want  string // "" for success, else substring of the refusal
	}{
		{"listed exactly", []string{"127.0.0.1"}, srv.URL + "/a", ""},
		{"listed with others", []string{"example.com", "127.0.0.1"}, srv.URL + "/a", ""},
		{"mapped form of a listed IP", []string{"127.0.0.1"}, "http://[::ffff:127.0.0.1]:" + port + "/a", ""},
		{"range listed", []string{"127.0.0.0/8"}, srv.URL + "/a", ""},
		{"listed with its port", []string{"127.0.0.1:" + port}, srv.URL + "/a", ""},
		{"listed with another port", []string{"127.0.0.1:1"}, srv.URL + "/a", "127.0.0.1:" + port + " is not in the network allow-list"},
		{"not listed", []string{"example.com"}, srv.URL + "/a", "127.0.0.1:" + port + " is not in the network allow-list"},
		{"other loopback listed", []string{"127.0.0.2"}, srv.URL + "/a", "not in the network allow-list"},
		{"localhost, only IP listed", []string{"127.0.0.1"}, "http://localhost:" + port + "/a", "localhost:" + port + " is not in the network allow-list"},
		{"localhost listed, its address not", []string{"localhost"}, "http://localhost:" + port + "/a", "a loopback address not in the network allow-list"},
		{"localhost and loopback listed", []string{"localhost", "127.0.0.0/8", "::1"}, "http://localhost:" + port + "/a", ""},
		{"LOCALHOST. listed as localhost", []string{"localhost", "127.0.0.0/8", "::1"}, "http://LOCALHOST.:" + port + "/a", ""},
		{"IP, only localhost listed", []string{"localhost"}, srv.URL + "/a", "127.0.0.1:" + port + " is not in the network allow-list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := newFetchTest(t, FetchPolicy{Allow: tt.allow}, nil)
			res, err := f.Fetch(t.Context(), tt.url)
			if tt.want != "" {
				wantRefused(t, err, tt.want)
				return
			}
			if err != nil {
				t.Fatalf("Fetch(%q) with %q: %v", tt.url, tt.allow, err)
			}
			if res.Status != 200 || string(res.Body) != "hello /a" || res.ContentType != "text/plain; charset=utf-8" || res.Truncated {
				t.Errorf("result = %+v", res)
			}
		})
	}
}

func TestFetchLocalhostRefusedViaSubdomain(t *testing.T) {
	// The name resolves to loopback, which no entry names: refused with
	// the documented message.
	f, dl := newFetchTest(t, FetchPolicy{Allow: []string{"*.example.test"}}, &fetchFakeResolver{
		answers: map[string][]string{"localhost.example.test": {"127.0.0.1"}},
	})
	_, err := f.Fetch(t.Context(), "http://localhost.example.test/")
	wantRefused(t, err, "fetch refused: localhost.example.test:80 resolves to 127.0.0.1, a loopback address not in the network allow-list; add 127.0.0.1 (or a range holding it) to allow it")
	if d := dl.dials(); len(d) > 0 {
		t.Errorf("dialed %q", d)
	}
}

func TestFetchSubdomainResolution(t *testing.T) {
	srv := helloServer(t)
	_, port := hostPort(t, srv.URL)
	res := &fetchFakeResolver{answers: map[string][]string{
		"example.test":          {"127.0.0.1"},
		"api.example.test":      {"127.0.0.1"},
		"mixed.example.test":    {"8.8.8.8", "10.0.0.1"},
		"mapped.example.test":   {"::ffff:127.0.0.1"},
		"metadata.example.test": {"169.254.169.254"},
		"nat64.example.test":    {"64:ff9b::7f00:1"},
		"public.example.test":   {"8.8.8.8"},
		"empty.example.test":    {},
	}}
	tests := []struct {
		host  string
		allow []string // nil: example.test and *.example.test
		want  string   // substring of the error; "" for success
	}{
		{"example.test", []string{"example.test", "127.0.0.1"}, ""}, // its address listed too
		{"api.example.test", []string{"*.example.test", "127.0.0.0/8"}, ""},
		{"example.test", nil, "example.test:" + port + " resolves to 127.0.0.1, a loopback address"},
		{"api.example.test", nil, "api.example.test:" + port + " resolves to 127.0.0.1, a loopback address"},
		{"API.Example.Test.", nil, "api.example.test:" + port + " resolves to 127.0.0.1"},
		{"mixed.example.test", nil, "resolves to 10.0.0.1, a private address"},
		{"mixed.example.test", []string{"*.example.test", "10.0.0.0/8"}, "test dialer: refusing to dial"}, // allowed
		{"mapped.example.test", nil, "resolves to 127.0.0.1, a loopback address"},
		{"metadata.example.test", nil, "resolves to 169.254.169.254, the cloud metadata address"},
		{"metadata.example.test", []string{"*.example.test", "169.254.0.0/16"}, "resolves to 169.254.169.254, the cloud metadata address"},
		{"nat64.example.test", nil, "resolves to 64:ff9b::7f00:1, a loopback address (NAT64)"},
		{"missing.example.test", nil, "cannot resolve missing.example.test: no such host"},
		{"empty.example.test", nil, "no addresses"},
		{"public.example.test", nil, "test dialer: refusing to dial"}, // allowed; the test dialer stops it
	}
	for _, tt := range tests {
		t.Run(tt.host+fmt.Sprint(tt.allow), func(t *testing.T) {
			allow := tt.allow
			if allow == nil {
				allow = []string{"example.test", "*.example.test"}
			}
			f, dl := newFetchTest(t, FetchPolicy{Allow: allow}, res)
			got, err := f.Fetch(t.Context(), "http://"+tt.host+":"+port+"/x")
			switch {
			case tt.want == "":
				if err != nil || string(got.Body) != "hello /x" {
					t.Fatalf("Fetch = %+v, %v; want the server's answer", got, err)
				}
				return
			case strings.Contains(tt.want, "resolves to"):
				wantRefused(t, err, tt.want)
				if d := dl.dials(); len(d) > 0 {
					t.Errorf("dialed %q after a refusal", d)
				}
			default:
				if err == nil || errors.Is(err, ErrFetchRefused) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error = %v, want a non-refusal error mentioning %q", err, tt.want)
				}
			}
		})
	}
}

// TestFetchDialsCheckedAddress: the connection goes to the address that was
// checked; the name is resolved once and never again (DNS rebinding).
func TestFetchDialsCheckedAddress(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "reached "+r.Host)
	}))
	t.Cleanup(srv.Close)
	_, port := hostPort(t, srv.URL)

	t.Run("exact host, rebinding resolver", func(t *testing.T) {
		// First answer loopback (listed, so allowed), later answers
		// somewhere else: a second lookup would send the dial elsewhere.
		res := &fetchFakeResolver{answer: func(host string, n int) []string {
			if host == "rebind.test" && n == 1 {
				return []string{"127.0.0.1"}
			}
			return []string{"192.0.2.66"}
		}}
		f, dl := newFetchTest(t, FetchPolicy{Allow: []string{"rebind.test", "127.0.0.1"}}, res)
		before := hits.Load()
		got, err := f.Fetch(t.Context(), "http://rebind.test:"+port+"/")
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Body) != "reached rebind.test:"+port || hits.Load() != before+1 {
			t.Errorf("body %q, hits %d: the fetch did not reach the test server", got.Body, hits.Load()-before)
		}
		if d := dl.dials(); len(d) != 1 || d[0] != "tcp 127.0.0.1:"+port {
			t.Errorf("dials = %q, want exactly the checked address tcp 127.0.0.1:%s", d, port)
		}
		if l := res.lookups(); len(l) != 1 {
			t.Errorf("lookups = %q, want one", l)
		}
	})

	t.Run("subdomain, public then loopback", func(t *testing.T) {
		res := &fetchFakeResolver{answer: func(host string, n int) []string {
			if n == 1 {
				return []string{"8.8.8.8"}
			}
			return []string{"127.0.0.1"}
		}}
		f, dl := newFetchTest(t, FetchPolicy{Allow: []string{"*.rebind.test"}}, res)
		dl.fail = true
		_, err := f.Fetch(t.Context(), "http://x.rebind.test:"+port+"/")
		if err == nil {
			t.Fatal("fetch succeeded; the test dialer fails every dial")
		}
		if d := dl.dials(); len(d) != 1 || d[0] != "tcp 8.8.8.8:"+port {
			t.Errorf("dials = %q, want exactly the checked address tcp 8.8.8.8:%s", d, port)
		}
		if l := res.lookups(); len(l) != 1 {
			t.Errorf("lookups = %q, want one", l)
		}
	})
}

func TestFetchTLSVerifiesHostName(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "sni="+r.TLS.ServerName)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port := hostPort(t, srv.URL)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	res := &fetchFakeResolver{answers: map[string][]string{
		"example.com": {"127.0.0.1"}, // the test certificate names example.com
		"other.test":  {"127.0.0.1"},
	}}
	f, dl := newFetchTest(t, FetchPolicy{Allow: []string{"example.com", "other.test", "127.0.0.1"}}, res)
	f.transport.TLSClientConfig.RootCAs = pool

	got, err := f.Fetch(t.Context(), "https://example.com:"+port+"/")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Body) != "sni=example.com" {
		t.Errorf("body = %q, want the server to see SNI example.com", got.Body)
	}
	if d := dl.dials(); len(d) != 1 || d[0] != "tcp 127.0.0.1:"+port {
		t.Errorf("dials = %q, want tcp 127.0.0.1:%s", d, port)
	}
	// The certificate is not valid for other.test: verification is on.
	_, err = f.Fetch(t.Context(), "https://other.test:"+port+"/")
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("fetch of a host the certificate does not name: %v, want a certificate error", err)
	}
}

func TestFetchRedirects(t *testing.T) {
	mux := http.NewServeMux()
	var srvURL string
	mux.HandleFunc("/final", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "final") })
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("u"), http.StatusFound)
	})
	mux.HandleFunc("/chain", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.URL.Query().Get("n"), &n)
		if n <= 0 {
			http.Redirect(w, r, "/final", http.StatusMovedPermanently)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/chain?n=%d", n-1), http.StatusTemporaryRedirect)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	srvURL = srv.URL
	_, port := hostPort(t, srvURL)
	to := func(target string) string { return srvURL + "/to?u=" + url.QueryEscape(target) }

	tests := []struct {
		name      string
		url       string
		want      string // refusal substring; "" for success
		wantFinal string
	}{
		{"allowed redirect", to("http://localhost:" + port + "/final"), "", "http://localhost:" + port + "/final"},
		{"relative redirect", to("/final"), "", srvURL + "/final"},
		{"chain within limit", srvURL + "/chain?n=2", "", srvURL + "/final"}, // 3 redirects
		{"chain over limit", srvURL + "/chain?n=3", "more than 3 redirects", ""},
		{"to a host not listed", to("http://evil.com/"), "redirect to http://evil.com/: evil.com:80 is not in the network allow-list", ""},
		{"to an IP not listed", to("http://10.0.0.1/"), "10.0.0.1:80 is not in the network allow-list", ""},
		{"to a private address", to("http://internal.example.test:" + port + "/final"), `resolves to 10.1.2.3, a private address`, ""},
		{"to unlisted loopback", to("http://lo.example.test:" + port + "/final"), `resolves to 127.0.0.2, a loopback address`, ""},
		{"to file", to("file:///etc/passwd"), `scheme "file"`, ""},
		{"to gopher", to("gopher://localhost:" + port + "/"), `scheme "gopher"`, ""},
		{"to user info", to("http://localhost@evil.com/"), "user info", ""},
		{"to numeric host", to("http://2130706433:" + port + "/"), "numeric", ""},
	}
	res := &fetchFakeResolver{answers: map[string][]string{
		"localhost":             {"127.0.0.1"},
		"internal.example.test": {"10.1.2.3"},
		"lo.example.test":       {"127.0.0.2"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, dl := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1", "localhost", "*.example.test"}, MaxRedirects: 3}, res)
			got, err := f.Fetch(t.Context(), tt.url)
			if tt.want != "" {
				wantRefused(t, err, tt.want)
				if !strings.Contains(err.Error(), "redirect to ") {
					t.Errorf("error %q does not say it was a redirect", err)
				}
				for _, d := range dl.dials() {
					if d != "tcp 127.0.0.1:"+port {
						t.Errorf("dialed %q; only the test server may be dialed", d)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.URL != tt.wantFinal || string(got.Body) != "final" || got.Status != 200 {
				t.Errorf("result = URL %q status %d body %q, want URL %q", got.URL, got.Status, got.Body, tt.wantFinal)
			}
		})
	}
}

func TestFetchDefaultRedirectLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.URL.Query().Get("n"), &n)
		if n == 0 {
			fmt.Fprint(w, "done")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/?n=%d", n-1), http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}}, nil)
	if got, err := f.Fetch(t.Context(), srv.URL+"/?n=5"); err != nil || string(got.Body) != "done" {
		t.Errorf("5 redirects: %+v, %v; want them followed", got, err)
	}
	_, err := f.Fetch(t.Context(), srv.URL+"/?n=6")
	wantRefused(t, err, "more than 5 redirects")
}

func TestFetchIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		testenv.Missing(t, "this host has no IPv6 loopback (::1): %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "v6")
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	_, port := hostPort(t, srv.URL)
	u := "http://[::1]:" + port + "/"

	tests := []struct {
		allow []string
		url   string
		want  string // refusal; "" for success
	}{
		{[]string{"::1"}, u, ""},
		{[]string{"[::1]"}, u, ""},
		{[]string{"0:0:0:0:0:0:0:1"}, "http://[0:0::1]:" + port + "/", ""},
		{[]string{"[::1]:" + port}, u, ""},
		{[]string{"::/127"}, u, ""},
		{[]string{"127.0.0.1"}, u, "[::1]:" + port + " is not in the network allow-list"},
		{[]string{"localhost"}, u, "[::1]:" + port + " is not in the network allow-list"},
		{[]string{"example.com"}, u, "[::1]:" + port + " is not in the network allow-list"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.allow), func(t *testing.T) {
			f, _ := newFetchTest(t, FetchPolicy{Allow: tt.allow}, nil)
			got, err := f.Fetch(t.Context(), tt.url)
			if tt.want != "" {
				wantRefused(t, err, tt.want)
				return
			}
			if err != nil || string(got.Body) != "v6" {
				t.Fatalf("Fetch = %+v, %v", got, err)
			}
		})
	}

	t.Run("name resolving to ::1 via subdomain", func(t *testing.T) {
		f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"*.v6.test"}}, &fetchFakeResolver{fallback: []string{"::1"}})
		_, err := f.Fetch(t.Context(), "http://a.v6.test:"+port+"/")
		wantRefused(t, err, "a.v6.test:"+port+" resolves to ::1, a loopback address")
	})
}

// TestFetchNoUnixSocket: no URL makes the fetcher dial a unix socket.
func TestFetchNoUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "x.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("skipping: no unix sockets here: %v", err)
	}
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })

	urls := []string{
		"http://unix:" + sock,
		"http://unix:" + sock + ":/x",
		"http://unix/" + sock,
		"http+unix://" + url.PathEscape(sock) + "/x",
		"unix://" + sock,
		"unix:" + sock,
		"http://" + url.PathEscape(sock) + "/",
		"http://%2F" + strings.TrimPrefix(sock, "/") + "/",
		"http://[" + sock + "]/",
		"file://" + sock,
	}
	res := &fetchFakeResolver{} // every name: no such host
	f, dl := newFetchTest(t, FetchPolicy{Allow: []string{"unix", "localhost", "127.0.0.1"}}, res)
	for _, u := range urls {
		_, err := f.Fetch(t.Context(), u)
		if err == nil {
			t.Errorf("Fetch(%q) succeeded", u)
		}
	}
	for _, d := range dl.dials() {
		if !strings.HasPrefix(d, "tcp ") {
			t.Errorf("dialed %q, want tcp only", d)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the unix socket accepted %d connections", n)
	}
}

func TestFetchTimeouts(t *testing.T) {
	t.Run("never answers", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var open []net.Conn
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				open = append(open, c) // hold it, never answer
				mu.Unlock()
			}
		}()
		t.Cleanup(func() {
			ln.Close()
			mu.Lock()
			for _, c := range open {
				c.Close()
			}
			mu.Unlock()
		})
		f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}, ReadTimeout: 300 * time.Millisecond}, nil)
		start := time.Now()
		_, err = f.Fetch(t.Context(), "http://"+ln.Addr().String()+"/")
		elapsed := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("error = %v, want a timeout", err)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v does not match context.DeadlineExceeded", err)
		}
		if elapsed < 250*time.Millisecond || elapsed > 3*time.Second {
			t.Errorf("took %v, want about 300ms", elapsed)
		}
		t.Log(err)
	})

	t.Run("dribbles the body", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			for {
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}))
		t.Cleanup(srv.Close)
		f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}, ReadTimeout: 300 * time.Millisecond}, nil)
		start := time.Now()
		_, err := f.Fetch(t.Context(), srv.URL)
		elapsed := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "body") {
			t.Fatalf("error = %v, want a body read timeout", err)
		}
		// Headers arrive at once; the body gets its own 300ms.
		if elapsed < 250*time.Millisecond || elapsed > 3*time.Second {
			t.Errorf("took %v, want about 300ms", elapsed)
		}
		t.Log(err)
	})

	t.Run("slow headers then quick body", func(t *testing.T) {
		// The two phases have separate budgets: 200ms + 200ms < 2 x 300ms.
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(200 * time.Millisecond)
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			time.Sleep(200 * time.Millisecond)
			fmt.Fprint(w, "ok")
		}))
		t.Cleanup(srv.Close)
		f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}, ReadTimeout: 300 * time.Millisecond}, nil)
		got, err := f.Fetch(t.Context(), srv.URL)
		if err != nil || string(got.Body) != "ok" {
			t.Fatalf("Fetch = %+v, %v; want ok", got, err)
		}
	})

	t.Run("connect", func(t *testing.T) {
		f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}, ConnectTimeout: 100 * time.Millisecond}, nil)
		f.dialer.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
			<-ctx.Done() // a black hole
			return nil, ctx.Err()
		}
		start := time.Now()
		_, err := f.Fetch(t.Context(), "http://127.0.0.1:9/")
		if err == nil || !strings.Contains(err.Error(), "connecting to 127.0.0.1 timed out after 100ms") {
			t.Fatalf("error = %v, want a connect timeout", err)
		}
		if elapsed := time.Since(start); elapsed > 3*time.Second {
			t.Errorf("took %v", elapsed)
		}
	})

	t.Run("caller deadline", func(t *testing.T) {
		f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}}, nil)
		f.dialer.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := f.Fetch(ctx, "http://127.0.0.1:9/")
		if err == nil || !strings.Contains(err.Error(), "timed out") || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error = %v, want a timeout", err)
		}
	})

	t.Run("caller cancels", func(t *testing.T) {
		f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}}, nil)
		ctx, cancel := context.WithCancel(t.Context())
		f.dialer.Dial = func(c context.Context, network, address string) (net.Conn, error) {
			cancel()
			<-c.Done()
			return nil, c.Err()
		}
		_, err := f.Fetch(ctx, "http://127.0.0.1:9/")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want context.Canceled", err)
		}
	})
}

func TestFetchBody(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789"), 100000) // 1 MB
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(big)
		case "/exact":
			w.Write(big[:200000])
		case "/gone":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(404)
			fmt.Fprint(w, "no such page")
		case "/empty":
			w.WriteHeader(204)
		}
	}))
	t.Cleanup(srv.Close)
	tests := []struct {
		path          string
		maxBody       int64
		wantLen       int
		wantTruncated bool
		wantStatus    int
		wantType      string
	}{
		{"/big", 0, 200000, true, 200, "application/octet-stream"},
		{"/big", 10, 10, true, 200, "application/octet-stream"},
		{"/exact", 0, 200000, false, 200, "text/plain; charset=utf-8"},
		{"/exact", 200001, 200000, false, 200, "text/plain; charset=utf-8"},
		{"/exact", 199999, 199999, true, 200, "text/plain; charset=utf-8"},
		{"/gone", 0, len("no such page"), false, 404, "text/html"},
		{"/empty", 0, 0, false, 204, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.path, tt.maxBody), func(t *testing.T) {
			f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}, MaxBody: tt.maxBody}, nil)
			got, err := f.Fetch(t.Context(), srv.URL+tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Body) != tt.wantLen || got.Truncated != tt.wantTruncated || got.Status != tt.wantStatus || got.ContentType != tt.wantType {
				t.Errorf("got len %d truncated %v status %d type %q; want %d %v %d %q",
					len(got.Body), got.Truncated, got.Status, got.ContentType, tt.wantLen, tt.wantTruncated, tt.wantStatus, tt.wantType)
			}
			if !bytes.Equal(got.Body, big[:len(got.Body)]) && tt.path != "/gone" {
				t.Error("body is not a prefix of what the server sent")
			}
			if got.URL != srv.URL+tt.path {
				t.Errorf("URL = %q", got.URL)
			}
		})
	}
}

func TestFetchIgnoresProxyEnv(t *testing.T) {
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(k, "http://127.0.0.1:1")
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	srv := helloServer(t)
	_, port := hostPort(t, srv.URL)
	// A name, not 127.0.0.1: Go's proxy logic never proxies loopback IPs.
	res := &fetchFakeResolver{answers: map[string][]string{"direct.test": {"127.0.0.1"}}}
	f, dl := newFetchTest(t, FetchPolicy{Allow: []string{"direct.test", "127.0.0.1"}}, res)
	got, err := f.Fetch(t.Context(), "http://direct.test:"+port+"/p")
	if err != nil || string(got.Body) != "hello /p" {
		t.Fatalf("Fetch = %+v, %v; want a direct fetch", got, err)
	}
	if d := dl.dials(); len(d) != 1 || d[0] != "tcp 127.0.0.1:"+port {
		t.Errorf("dials = %q, want the server directly", d)
	}
}

func TestFetchConcurrent(t *testing.T) {
	srv := helloServer(t)
	f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}}, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Go(func() {
			path := fmt.Sprintf("/%d", i)
			got, err := f.Fetch(t.Context(), srv.URL+path)
			if err != nil {
				errs <- err
			} else if string(got.Body) != "hello "+path {
				errs <- fmt.Errorf("body %q for %s", got.Body, path)
			}
			if _, err := f.Fetch(t.Context(), "http://evil.test/"); !errors.Is(err, ErrFetchRefused) {
				errs <- fmt.Errorf("evil.test: %v", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// FuzzFetchURL: whatever the URL, the fetcher dials only addresses it
// checked, and only over TCP; it looks up only allowed names; it never
// panics and its errors are one line.
func FuzzFetchURL(f *testing.F) {
	for _, s := range []string{
		"http://allowed.test/",
		"https://allowed.test:443/x?y=z#f",
		"http://pub.allowed.test/",
		"http://lo.allowed.test/",
		"http://mixed.allowed.test/",
		"http://other.allowed.test/",
		"http://ALLOWED.TEST./",
		"HTTP://allowed.test/",
		"http://allowed.test.evil.com/",
		"http://evilallowed.test/",
		"http://allowed.test@evil.com/",
		"http://evil.com@allowed.test/",
		"http://allowed.test\\@evil.com/",
		"http://allowed.test\\.evil.com/",
		"http:\\\\allowed.test\\",
		"http://evil.com#@allowed.test/",
		"http://evil.com?@allowed.test/",
		"http://evil.com/\\@allowed.test/",
		"http://allowed%2etest/",
		"http://%61llowed.test/",
		"http://allowed.test%00.evil.com/",
		"http://allowed.test%2f@evil.com/",
		"http://allowed%E3%80%82test/",
		"http://allowed。test/",
		"http://ａｌｌｏｗｅｄ.test/",
		"http://xn--allowed-.test/",
		"http://2130706433/",
		"http://0x7f.1/",
		"http://0x7f000001/",
		"http://0177.0.0.1/",
		"http://127.1/",
		"http://127.0.0.1/",
		"http://0/",
		"http://0.0.0.0/",
		"http://[::]/",
		"http://[::1]/",
		"http://[::ffff:127.0.0.1]/",
		"http://[::ffff:7f00:1]/",
		"http://[64:ff9b::7f00:1]/",
		"http://[fe80::1%25eth0]/",
		"http://[fe80::1%eth0]/",
		"http://[allowed.test]/",
		"http://169.254.169.254/latest/meta-data/",
		"http://allowed.test:0/",
		"http://allowed.test:65536/",
		"http://allowed.test:-1/",
		"http://allowed.test:80:80/",
		"http://allowed.test:/",
		"http://allowed.test:08080/",
		"http://allowed.test\t/",
		" http://allowed.test/",
		"http://allowed.test /",
		"//allowed.test/",
		"http:/allowed.test",
		"http:allowed.test",
		"gopher://allowed.test/",
		"file:///etc/passwd",
		"http+unix://%2Ftmp%2Fx.sock/",
		"http://unix:/tmp/x.sock",
		"unix:///tmp/x.sock",
		"ws://allowed.test/",
		"",
	} {
		f.Add(s)
	}
	answers := map[string][]string{
		"allowed.test":       {"127.0.0.1", "8.8.4.4"}, // 127.0.0.1 is listed: both fine
		"pub.allowed.test":   {"8.8.8.8"},
		"lo.allowed.test":    {"127.0.0.2"},
		"mixed.allowed.test": {"8.8.8.8", "10.0.0.1"},
	}
	const fallback = "127.0.0.2" // not listed
	f.Fuzz(func(t *testing.T, raw string) {
		// Every other name "resolves" to loopback, as a hostile DNS would.
		res := &fetchFakeResolver{answers: answers, fallback: []string{fallback}}
		ft, dl := newFetchTest(t, FetchPolicy{Allow: []string{"allowed.test", "*.allowed.test", "127.0.0.1"}, ConnectTimeout: time.Second, ReadTimeout: time.Second}, res)
		dl.fail = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := ft.Fetch(ctx, raw)
		ft.transport.CloseIdleConnections()
		if err == nil {
			t.Fatalf("Fetch(%q) succeeded without a network", raw)
		}
		if strings.ContainsAny(err.Error(), "\r\n") {
			t.Errorf("Fetch(%q) error is not one line: %q", raw, err)
		}
		lookups := res.lookups()
		for _, h := range lookups {
			if !ft.Allowed(h, 80) { // the list has no port entries
				t.Errorf("Fetch(%q) looked up %q, which is not allowed", raw, h)
			}
		}
		for _, d := range dl.dials() {
			network, addr, _ := strings.Cut(d, " ")
			if network != "tcp" {
				t.Fatalf("Fetch(%q) dialed %q", raw, d)
			}
			ap, perr := netip.ParseAddrPort(addr)
			if perr != nil {
				t.Fatalf("Fetch(%q) dialed %q, not an IP address", raw, d)
			}
			// The address must be an answer to a lookup of an allowed
			// host (or a listed IP literal), and public unless listed.
			ok := ap.Addr() == netip.MustParseAddr("127.0.0.1")
			for _, h := range lookups {
				a, found := answers[h]
				if !found {
					a = []string{fallback}
				}
				for _, s := range a {
					if netip.MustParseAddr(s) == ap.Addr() && (netproxy.NonPublicReason(ap.Addr()) == "" || ft.list.NamesAddr(ap.Addr(), int(ap.Port()))) {
						ok = true
					}
				}
			}
			if !ok {
				t.Fatalf("Fetch(%q) dialed %q, not a checked address (lookups %q)", raw, d, lookups)
			}
		}
	})
}

// rawServer runs handle on each connection to a fresh 127.0.0.1
// listener, after reading the request head, and returns the port.
func rawServer(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
				c.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				handle(c)
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestFetchRedirectToAddressFormsRefused: an allowed host redirects to
// the host's own loopback, unspecified, metadata and embedded-IPv4
// addresses in every spelling; each is refused, and only the allowed
// server is ever dialled. The allow-list holds 127.0.0.1 (the server) and
// ranges around the metadata addresses, which must not name them.
// Origin: review 9.
func TestFetchRedirectToAddressFormsRefused(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", r.URL.Query().Get("u"))
		w.WriteHeader(http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port := hostPort(t, srv.URL)
	res := &fetchFakeResolver{answers: map[string][]string{
		"allowed.test":           {"127.0.0.1"},
		"meta.allowed.test":      {"169.254.169.254"},
		"ecs.allowed.test":       {"169.254.170.2"},
		"ali.allowed.test":       {"100.100.100.200"},
		"meta6.allowed.test":     {"fd00:ec2::254"},
		"gce6.allowed.test":      {"fd20:ce::254"},
		"nat64meta.allowed.test": {"64:ff9b::a9fe:a9fe"},
		"mapmeta.allowed.test":   {"::ffff:169.254.169.254"},
		"lo2.allowed.test":       {"127.0.0.2"},
		"any.allowed.test":       {"0.0.0.0"},
		"any6.allowed.test":      {"::"},
	}}
	allow := []string{"allowed.test", "*.allowed.test", "127.0.0.1", "169.254.0.0/16", "100.64.0.0/10", "fd00::/8"}
	for _, target := range []string{
		"http://0.0.0.0:%P/",
		"http://[::]:%P/",
		"http://[::1]:%P/",
		"http://127.0.0.2:%P/",
		"http://[::127.0.0.1]:%P/",
		"http://[64:ff9b::7f00:1]:%P/",
		"http://[2002:7f00:1::1]:%P/",
		"http://[::ffff:127.0.0.2]:%P/",
		"http://0177.0.0.1:%P/",
		"http://0x7f.1:%P/",
		"http://127.0.0.1.:%P/",
		"http://localhost:%P/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[::ffff:169.254.169.254]/",
		"http://[::ffff:a9fe:a9fe]/",
		"http://169.254.170.2/v2/credentials",
		"http://100.100.100.200/latest/meta-data/",
		"http://[fd00:ec2::254]/",
		"http://[fd20:ce::254]/",
		"http://meta.allowed.test/",
		"http://ecs.allowed.test/",
		"http://ali.allowed.test/",
		"http://meta6.allowed.test/",
		"http://gce6.allowed.test/",
		"http://nat64meta.allowed.test/",
		"http://mapmeta.allowed.test/",
		"http://lo2.allowed.test:%P/",
		"http://any.allowed.test:%P/",
		"http://any6.allowed.test:%P/",
		"http://allowed.test.evil.test:%P/",
		"http://evil-allowed.test:%P/",
		"http://allowed.test:%P@127.0.0.2:%P/",
		"file:///etc/passwd",
		"ftp://allowed.test/",
	} {
		target := strings.ReplaceAll(target, "%P", port)
		t.Run(target, func(t *testing.T) {
			f, dl := newFetchTest(t, FetchPolicy{Allow: allow}, res)
			start := "http://allowed.test:" + port + "/to?u=" + url.QueryEscape(target)
			got, err := f.Fetch(t.Context(), start)
			if !errors.Is(err, ErrFetchRefused) {
				t.Fatalf("Fetch = %+v, %v; want a refusal", got, err)
			}
			t.Log(err)
			for _, d := range dl.dials() {
				if d != "tcp 127.0.0.1:"+port {
					t.Errorf("dialled %q; only the allowed server may be", d)
				}
			}
		})
	}
}

// TestFetchRebindOnRedirectRefused: the allowed name answers a public
// address first and the metadata address next (a rebinding resolver);
// a redirect to the same name on another port makes a new connection,
// which is refused.
// Origin: review 9.
func TestFetchRebindOnRedirectRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://rebind.test:81/latest/meta-data/")
		w.WriteHeader(http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	_, port := hostPort(t, srv.URL)
	res := &fetchFakeResolver{answer: func(host string, n int) []string {
		if n == 1 {
			return []string{"127.0.0.1"}
		}
		return []string{"169.254.169.254"}
	}}
	f, dl := newFetchTest(t, FetchPolicy{Allow: []string{"rebind.test", "127.0.0.1", "169.254.0.0/16"}}, res)
	_, err := f.Fetch(t.Context(), "http://rebind.test:"+port+"/")
	if !errors.Is(err, ErrFetchRefused) || !strings.Contains(err.Error(), "169.254.169.254") {
		t.Fatalf("error = %v, want a refusal naming 169.254.169.254", err)
	}
	for _, d := range dl.dials() {
		if d != "tcp 127.0.0.1:"+port {
			t.Errorf("dialled %q", d)
		}
	}
}

// TestFetchGzipBombIsCut: a small gzip body that inflates to 64 MiB is
// cut at MaxBody, quickly, rather than inflated in full.
// Origin: review 9.
func TestFetchGzipBombIsCut(t *testing.T) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 64 {
		zw.Write(zeros)
	}
	zw.Close()
	bomb := buf.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "text/plain")
		w.Write(bomb)
	}))
	t.Cleanup(srv.Close)
	f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}}, nil)
	start := time.Now()
	got, err := f.Fetch(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Body) != DefaultFetchMaxBody || !got.Truncated {
		t.Errorf("body %d bytes, truncated %v; want %d, true", len(got.Body), got.Truncated, DefaultFetchMaxBody)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestFetchLyingContentLength: a body longer than its Content-Length is
// cut at the length; one shorter than it, ended by the server closing,
// fails at once rather than waiting.
// Origin: review 9.
func TestFetchLyingContentLength(t *testing.T) {
	t.Run("longer than announced", func(t *testing.T) {
		port := rawServer(t, func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\n0123456789SMUGGLED"+strings.Repeat("x", 500000))
		})
		f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}}, nil)
		got, err := f.Fetch(t.Context(), "http://127.0.0.1:"+port+"/")
		if err != nil || string(got.Body) != "0123456789" || got.Truncated {
			t.Errorf("Fetch = body %q truncated %v, %v; want the 10 announced bytes", got.Body, got.Truncated, err)
		}
	})
	t.Run("shorter than announced", func(t *testing.T) {
		port := rawServer(t, func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nshort")
		})
		f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}, ReadTimeout: 5 * time.Second}, nil)
		start := time.Now()
		got, err := f.Fetch(t.Context(), "http://127.0.0.1:"+port+"/")
		if err == nil && (len(got.Body) > 5 || got.Truncated) {
			t.Errorf("Fetch = %+v", got)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("took %v, want an end when the server closes", d)
		}
	})
}

// TestFetchHugeHeadersFail: response heads past the transport's bound
// fail rather than being buffered.
// Origin: review 9.
func TestFetchHugeHeadersFail(t *testing.T) {
	port := rawServer(t, func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Pad: " + strings.Repeat("p", 1000) + "\r\n"
		for range 10000 { // 10 MB
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
		io.WriteString(c, "\r\nbody")
	})
	f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}}, nil)
	got, err := f.Fetch(t.Context(), "http://127.0.0.1:"+port+"/")
	if err == nil {
		t.Fatalf("Fetch = status %d, body %q; want an error", got.Status, got.Body)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q is more than one line", err)
	}
}

// TestFetchHeaderDripTimesOut: a server dribbling its response head a
// byte at a time is cut at ReadTimeout overall, not per byte.
// Origin: review 9.
func TestFetchHeaderDripTimesOut(t *testing.T) {
	port := rawServer(t, func(c net.Conn) {
		head := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", 1000)
		for i := range len(head) {
			if _, err := c.Write([]byte{head[i]}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}, ReadTimeout: 500 * time.Millisecond}, nil)
	start := time.Now()
	_, err := f.Fetch(t.Context(), "http://127.0.0.1:"+port+"/")
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("error = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v, want about 500ms", d)
	}
}

// TestFetch1xxFloodEnds: a server sending interim responses without end
// does not hold the fetch.
// Origin: review 9.
func TestFetch1xxFloodEnds(t *testing.T) {
	port := rawServer(t, func(c net.Conn) {
		for {
			if _, err := io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}, ReadTimeout: 2 * time.Second}, nil)
	start := time.Now()
	_, err := f.Fetch(t.Context(), "http://127.0.0.1:"+port+"/")
	if err == nil {
		t.Fatal("Fetch succeeded; want an error")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("took %v", d)
	}
}
