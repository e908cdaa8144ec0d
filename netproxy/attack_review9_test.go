package netproxy

// Review 9: adversarial checks of the allow-list proxy and its Dialer that
// the earlier attack tests do not make. Every test passes when the guard
// holds and fails only when it is bypassed.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// review9Dials records the dials a Proxy or Dialer makes and never touches
// the network: each dial gets one end of a pipe whose other end swallows
// what it is sent.
type review9Dials struct {
	mu  sync.Mutex
	got []string
}

func (d *review9Dials) dial(_ context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.got = append(d.got, network+" "+address)
	d.mu.Unlock()
	a, b := net.Pipe()
	go func() { io.Copy(io.Discard, b); b.Close() }()
	return a, nil
}

func (d *review9Dials) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	got := d.got
	d.got = nil
	return got
}

// TestReview9DenyEmbeddedIPv4: a deny entry for a public IPv4 range must
// also refuse the IPv6 forms that carry it to the same host (NAT64
// 64:ff9b::/96 and 6to4 2002::/16), whether a name resolves to them or
// they are requested literally: the address classification already judges
// these forms by the embedded IPv4 address, and on a DNS64/NAT64 network
// the NAT64 form is how the denied host is reached. Controls: the plain
// and IPv4-mapped forms are denied.
func TestReview9DenyEmbeddedIPv4(t *testing.T) {
	res := mapResolver{
		"v4.example.test":     {"8.8.8.8"},
		"mapped.example.test": {"::ffff:8.8.8.8"},
		"nat64.example.test":  {"64:ff9b::808:808"},
		"6to4.example.test":   {"2002:808:808::1"},
	}
	list := mustList(t, []string{"*.example.test", "64:ff9b::/96", "2002::/16", "8.0.0.0/8"}, []string{"8.8.8.0/24"})
	dl := &review9Dials{}
	d := &Dialer{List: list, Resolver: res, Dial: dl.dial}
	for _, host := range []string{
		"v4.example.test",     // control
		"mapped.example.test", // control
		"8.8.8.8",             // control
		"::ffff:8.8.8.8",      // control
		"nat64.example.test",  // name -> NAT64 form of a denied address
		"6to4.example.test",   // name -> 6to4 form of a denied address
		"64:ff9b::808:808",    // NAT64 literal
		"2002:808:808::1",     // 6to4 literal
	} {
		t.Run(host, func(t *testing.T) {
			addrs, err := d.Resolve(t.Context(), host, 443)
			var r *Refusal
			if !errors.As(err, &r) || !r.Denied {
				t.Errorf("Resolve(%q) = %v, %v; want a deny-list refusal (8.8.8.0/24 is denied)", host, addrs, err)
			}
		})
	}
}

// TestReview9AzureWireServer: 168.63.129.16 is Azure's host-internal
// platform endpoint (WireServer: VM agent goal state, extension settings
// with protected secrets), reachable from every Azure VM like the metadata
// address. A name an attacker controls must not be able to point at it.
func TestReview9AzureWireServer(t *testing.T) {
	a := netip.MustParseAddr("168.63.129.16")
	dl := &review9Dials{}
	d := &Dialer{List: mustList(t, []string{"*.example.test"}, nil), Resolver: mapResolver{"x.example.test": {"168.63.129.16"}}, Dial: dl.dial}
	_, err := d.Resolve(t.Context(), "x.example.test", 80)
	if !errors.Is(err, ErrRefused) {
		t.Errorf("x.example.test resolving to %s: %v (NonPublicReason %q); want a refusal", a, err, NonPublicReason(a))
	}
}

// TestReview9NameOnlyAllowRefusesAddressForms: only the name pub.test
// (resolving to the public 8.8.8.8) is allowed; its address, in any
// spelling and over any protocol, is not. Nothing is dialled.
func TestReview9NameOnlyAllowRefusesAddressForms(t *testing.T) {
	dl := &review9Dials{}
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

// TestReview9SOCKS5DomainLocalhost: a listed name resolving to loopback
// still needs its address listed, through SOCKS5 domain requests too
// (the way curl --socks5-hostname and most SOCKS clients send names).
func TestReview9SOCKS5DomainLocalhost(t *testing.T) {
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

// TestReview9WildcardLookalikes: *.example.test allows its subdomains
// only; names that merely contain or end in it, or look like it, are
// refused on every protocol and never looked up.
func TestReview9WildcardLookalikes(t *testing.T) {
	res := newHostsResolver("127.0.0.2 a.example.test\n")
	dl := &review9Dials{}
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

// TestReview9LongHostNames: over-long names and labels are malformed, not
// looked up and not dialled, whatever their length.
func TestReview9LongHostNames(t *testing.T) {
	res := newHostsResolver("")
	dl := &review9Dials{}
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

// TestReview9UpstreamHugeResponseHead: an allowed upstream answering a
// forwarded request with an endless response head is cut once the head
// passes its bound (the client gets a 502 or a closed connection, never
// the head); the proxy neither buffers it all nor hangs.
func TestReview9UpstreamHugeResponseHead(t *testing.T) {
	up := serveEach(t, "127.0.0.2", func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		c.SetWriteDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Pad: " + strings.Repeat("p", 1000) + "\r\n"
		for {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	_, port, _ := net.SplitHostPort(up)
	_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{})
	start := time.Now()
	got := exchange(t, addr, fmt.Sprintf("GET http://127.0.0.2:%s/ HTTP/1.1\r\nConnection: close\r\n\r\n", port))
	if got != "" && !strings.HasPrefix(got, "HTTP/1.1 502") || strings.Contains(got, "X-Pad") {
		t.Errorf("answer %.120q, want a 502 or nothing", got)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestReview9UpstreamLyingLength: an upstream that announces more body than
// it sends and closes does not hold the client: the connection ends when
// the upstream does (with at most the short response relayed).
func TestReview9UpstreamLyingLength(t *testing.T) {
	up := serveEach(t, "127.0.0.2", func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nshort")
	})
	_, port, _ := net.SplitHostPort(up)
	_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{})
	start := time.Now()
	got := exchange(t, addr, fmt.Sprintf("GET http://127.0.0.2:%s/ HTTP/1.1\r\nConnection: close\r\n\r\n", port))
	if got != "" && !strings.HasPrefix(got, "HTTP/1.1 200") || len(got) > 1000 {
		t.Errorf("answer %.200q", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}
