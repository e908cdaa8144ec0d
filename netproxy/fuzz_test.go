package netproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

var entrySeeds = []string{
	"example.com", "Example.COM.", "*.example.com", "*.example.com:443", "example.com:443",
	"*.com", "*.co.uk", "*.github.io", "*", "*.", ".", "", " ", "\x00", "a..b", "xn--bcher-kva.de", "bücher.de",
	"10.0.0.7", "10.0.0.7:80", "10.0.0.0/8", "10.0.0.0/8:443", "10.1.2.3/8", "0.0.0.0/0", "::/0",
	"::1", "[::1]", "[::1]:8080", "fd00::/8", "[fd00::/8]:443", "[fd00::]/8", "fd00::/8:443", "::ffff:10.0.0.0/104",
	"fe80::1%eth0", "http://x", "x/y", "x?y", "u@x", "x:0", "x:65536", "x:", "x:a", "2130706433", "0x7f.1",
	"api.*.example.com", "*.*.example.com", "*.10.0.0.1", "[example.com]", "[::1", "[::1]x", "a:b:c",
	strings.Repeat("a.", 130) + "com",
}

// FuzzParseEntry: no panic; errors are one line and match ErrBadEntry;
// what parses round-trips through String; a wildcard never matches its
// apex; a port entry matches no other port.
func FuzzParseEntry(f *testing.F) {
	for _, s := range entrySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEntry(s)
		if err != nil {
			if !errors.Is(err, ErrBadEntry) || strings.ContainsAny(err.Error(), "\r\n") || e != (Entry{}) {
				t.Fatalf("ParseEntry(%q) = %+v, %q", s, e, err)
			}
			return
		}
		text := e.String()
		back, err := ParseEntry(text)
		if err != nil || back != e || back.String() != text {
			t.Fatalf("ParseEntry(%q) = %+v (%q); parsing that gives %+v, %v", s, e, text, back, err)
		}
		port := e.Port()
		if port == 0 {
			port = 443
		}
		other := port%65535 + 1
		switch {
		case e.wildcard:
			if e.Matches(e.name, port) {
				t.Fatalf("%q matches its apex %q", text, e.name)
			}
			if !e.Matches("x."+e.name, port) && len(e.name) <= 251 {
				t.Fatalf("%q does not match x.%s", text, e.name)
			}
		case e.name != "":
			if !e.Matches(e.name, port) || !e.Matches(strings.ToUpper(e.name)+".", port) {
				t.Fatalf("%q does not match its own name", text)
			}
		default:
			if !e.Contains(e.prefix.Addr(), port) || !e.Matches(e.prefix.Addr().String(), port) {
				t.Fatalf("%q does not contain its own address", text)
			}
		}
		if e.Port() != 0 && (e.Matches(e.name, other) || e.prefix.IsValid() && e.Contains(e.prefix.Addr(), other)) {
			t.Fatalf("%q matches port %d", text, other)
		}
	})
}

// FuzzList: a List decides exactly as its entries do — allowed when an
// allow entry matches and no deny entry does — and the same whatever the
// host's case or trailing dot.
func FuzzList(f *testing.F) {
	f.Add("example.com,*.example.com:443,10.0.0.0/8", "ads.example.com", "api.example.com", 443)
	f.Add("*.example.com", "", "example.com", 80)
	f.Add("::1,[fd00::/8]:80", "fd00::5", "[fd00::5]", 80)
	f.Add("127.0.0.1", "", "::ffff:127.0.0.1", 22)
	f.Add("a.b.c,*.b.c", "*.c.b.c", "x.c.b.c", 1)
	f.Fuzz(func(t *testing.T, allowText, denyText, host string, port int) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		l, err := NewList(split(allowText), split(denyText))
		if err != nil {
			return
		}
		allow, deny := l.Entries()
		anyMatch := func(es []Entry, h string) bool {
			for _, e := range es {
				if e.Matches(h, port) {
					return true
				}
			}
			return false
		}
		want := anyMatch(allow, host) && !anyMatch(deny, host)
		if got := l.Allows(host, port); got != want {
			t.Fatalf("Allows(%q, %d) = %v with %s; the entries say %v", host, port, got, l, want)
		}
		if err := l.Check(host, port); (err == nil) != want {
			t.Fatalf("Check(%q, %d) = %v, Allows %v", host, port, err, want)
		}
		name, ip, err := normalizeHost(host)
		if err != nil {
			return
		}
		if !ip.IsValid() {
			for _, variant := range []string{strings.ToUpper(name), name + "."} {
				if l.Allows(variant, port) != want {
					t.Fatalf("Allows(%q) differs from Allows(%q)", variant, host)
				}
			}
			return
		}
		// An address allowed as a literal is named for the rebinding guard
		// (metadata addresses only by an exact entry).
		if want && !l.NamesAddr(ip, port) {
			if _, meta := classify(ip); !meta {
				t.Fatalf("%s is allowed as a literal but not named", ip)
			}
		}
	})
}

// FuzzServeConn: whatever a client sends (HTTP, SOCKS5 or garbage), the
// proxy does not panic, ends the connection in time, looks up only names
// the list allows, dials only checked addresses, and reports only
// refusals of hosts the list does not allow.
func FuzzServeConn(f *testing.F) {
	for _, s := range []string{
		"GET http://allowed.test:80/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://allowed.test/ HTTP/1.1\r\n\r\nGET http://evil.test/ HTTP/1.1\r\n\r\nGET http://127.0.0.2:8080/ HTTP/1.1\r\n\r\n",
		"POST http://allowed.test/ HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
		"POST http://allowed.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n",
		"CONNECT evil.test:443 HTTP/1.1\r\n\r\nCONNECT rebind.test:443 HTTP/1.1\r\n\r\n",
		"CONNECT [::1]:443 HTTP/1.1\r\n\r\n",
		"CONNECT 127.0.0.2:1 HTTP/1.1\r\n\r\n",
		"GET https://allowed.test/ HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n",
		"\x05\x01\x00\x05\x01\x00\x03\x0callowed.test\x00\x50",
		"\x05\x01\x00\x05\x01\x00\x03\x0brebind.test\x01\xbb",
		"\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x02\x00\x50",
		"\x05\x01\x00\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x50",
		"\x05\x02\x02\x00\x05\x02\x00\x01\x7f\x00\x00\x02\x00\x50",
		"\x05\x00",
		"\x04\x01\x00\x50\x7f\x00\x00\x01\x00",
		"\x16\x03\x01",
		"",
	} {
		f.Add([]byte(s))
	}
	res := newHostsResolver("127.0.0.2 allowed.test\n10.0.0.1 rebind.test\n")
	resolvesTo := map[string]netip.Addr{"allowed.test": netip.MustParseAddr("127.0.0.2"), "rebind.test": netip.MustParseAddr("10.0.0.1")}
	list := mustList(f, []string{"allowed.test", "rebind.test", "127.0.0.2"}, []string{"127.0.0.2:8080"})
	var mu sync.Mutex
	var dials []string
	p, err := New(list, Options{
		Resolver:    res,
		HeadTimeout: 200 * time.Millisecond,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			mu.Lock()
			dials = append(dials, address)
			mu.Unlock()
			return nil, errors.New("fuzz: no network")
		},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { p.Close() })

	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			p.ServeConn(context.Background(), server)
		}()
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(2 * time.Second))
		client.Write(data)
		client.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("ServeConn did not end for %q", data)
		}
		mu.Lock()
		got := dials
		dials = nil
		mu.Unlock()
		for _, d := range got {
			ap, err := netip.ParseAddrPort(d)
			if err != nil || ap.Addr() != netip.MustParseAddr("127.0.0.2") || ap.Port() == 8080 {
				t.Fatalf("dialled %q for %q", d, data)
			}
		}
		for _, h := range res.takeLookups() {
			if n, _ := normalizeName(h); n != "allowed.test" && n != "rebind.test" {
				t.Fatalf("looked up %q for %q", h, data)
			}
		}
		for _, hp := range p.TakeBlocked() {
			host, port, err := net.SplitHostPort(hp)
			if err != nil {
				t.Fatalf("reported %q", hp)
			}
			// A name the list allows is still refused when its address is
			// not allowed (rebind.test) or is denied at that port
			// (allowed.test is 127.0.0.2, whose port 8080 is denied).
			n, _ := normalizeName(host)
			if a, ok := resolvesTo[n]; ok && (n == "rebind.test" || list.DeniesAddr(a, atoi(port))) {
				continue
			}
			if list.Allows(host, atoi(port)) {
				t.Fatalf("reported %q, which the list allows", hp)
			}
		}
	})
}
