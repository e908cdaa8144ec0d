package netproxy

import (
	"errors"
	"strings"
	"testing"
)

func TestParseEntry(t *testing.T) {
	tests := []struct {
		in   string
		want string // canonical String
		port int
	}{
		{"example.com", "example.com", 0},
		{"Example.COM.", "example.com", 0},
		{"  example.com\t", "example.com", 0},
		{"example.com:443", "example.com:443", 443},
		{"example.com:08080", "example.com:8080", 8080},
		{"example.com:65535", "example.com:65535", 65535},
		{"example.com:1", "example.com:1", 1},
		{"*.example.com", "*.example.com", 0},
		{"*.Example.com.:443", "*.example.com:443", 443},
		{"*.a.b.example.co.uk", "*.a.b.example.co.uk", 0},
		{"*.example.co.uk", "*.example.co.uk", 0},
		{"localhost", "localhost", 0},
		{"my_host.internal", "my_host.internal", 0},
		{"xn--bcher-kva.de", "xn--bcher-kva.de", 0},
		{"*.xn--bcher-kva.de", "*.xn--bcher-kva.de", 0},
		{"a-b.c", "a-b.c", 0},
		{"10.0.0.7", "10.0.0.7", 0},
		{"10.0.0.7:8080", "10.0.0.7:8080", 8080},
		{"::ffff:10.0.0.7", "10.0.0.7", 0},
		{"[::ffff:10.0.0.7]:80", "10.0.0.7:80", 80},
		{"::1", "::1", 0},
		{"[::1]", "::1", 0},
		{"[::1]:8080", "[::1]:8080", 8080},
		{"0:0:0:0:0:0:0:1", "::1", 0},
		{"2001:DB8::A", "2001:db8::a", 0},
		{"10.0.0.0/8", "10.0.0.0/8", 0},
		{"10.0.0.0/8:443", "10.0.0.0/8:443", 443},
		{"10.1.2.3/32", "10.1.2.3/32", 0},
		{"127.0.0.0/8", "127.0.0.0/8", 0},
		{"fd00::/8", "fd00::/8", 0},
		{"FD00::/8", "fd00::/8", 0},
		{"[fd00::/8]", "fd00::/8", 0},
		{"[fd00::/8]:443", "[fd00::/8]:443", 443},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8", 0},
		{"::1/128", "::1/128", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			e, err := ParseEntry(tt.in)
			if err != nil {
				t.Fatalf("ParseEntry(%q): %v", tt.in, err)
			}
			if got := e.String(); got != tt.want {
				t.Errorf("ParseEntry(%q).String() = %q, want %q", tt.in, got, tt.want)
			}
			if e.Port() != tt.port {
				t.Errorf("Port() = %d, want %d", e.Port(), tt.port)
			}
			back, err := ParseEntry(e.String())
			if err != nil || back != e {
				t.Errorf("ParseEntry(%q) = %+v, %v; want %+v", e.String(), back, err, e)
			}
		})
	}
}

func TestParseEntryErrors(t *testing.T) {
	tests := []struct {
		in   string
		want []string // substrings of the reason
	}{
		{"", []string{"empty entry", "example.com"}},
		{"   ", []string{"empty entry"}},
		{"*", []string{"wildcard for every host", "*.example.com"}},
		{"*:443", []string{"wildcard for every host"}},
		{"*.com", []string{"public suffix", "*.example.com"}},
		{"*.co.uk", []string{"public suffix", "*.example.co.uk"}},
		{"*.github.io", []string{"public suffix"}},
		{"*.internal", []string{"public suffix"}},
		{"*.COM.", []string{"public suffix"}},
		{"http://example.com", []string{"scheme", `"example.com"`}},
		{"https://example.com:8443/path", []string{"scheme", `"example.com:8443"`}},
		{"example.com/api", []string{"path", `"example.com"`}},
		{"example.com:80/api", []string{"path"}},
		{"example.com?x=1", []string{"path"}},
		{"example.com#frag", []string{"path"}},
		{"user@example.com", []string{"user info", `"example.com"`}},
		{"example..com", []string{"empty label"}},
		{".example.com", []string{"empty label"}},
		{"example.com..", []string{"empty label"}},
		{".", []string{"empty host name"}},
		{"*.", []string{"empty host name"}},
		{"exa mple.com", []string{"invalid character"}},
		{"example.com:", []string{"empty port"}},
		{"example.com:0", []string{"out of range", "1 to 65535"}},
		{"example.com:65536", []string{"out of range"}},
		{"example.com:99999999", []string{"out of range"}},
		{"example.com:http", []string{"not a number"}},
		{"example.com:-1", []string{"not a number"}},
		{"example.com:+80", []string{"not a number"}},
		{"example.com:80:80", []string{"not a host name or IP address"}},
		{"[::1]:0", []string{"out of range"}},
		{"api.*.example.com", []string{"wildcard", "leftmost"}},
		{"*.*.example.com", []string{"wildcard"}},
		{"*example.com", []string{"wildcard"}},
		{"example.*", []string{"wildcard"}},
		{"**.example.com", []string{"wildcard"}},
		{"*.10.0.0.1", []string{"IP address", "CIDR"}},
		{"bücher.de", []string{"non-ASCII", "xn--"}},
		{"*.bücher.de", []string{"non-ASCII"}},
		{"exa\x00mple.com", []string{"NUL"}},
		{strings.Repeat("a.", 127) + "com", []string{"253"}},
		{strings.Repeat("a", 64) + ".com", []string{"63"}},
		{strings.Repeat("a", 400), []string{"longer than"}},
		{"2130706433", []string{"numeric"}},
		{"0x7f.1", []string{"numeric"}},
		{"127.1", []string{"numeric"}},
		{"0177.0.0.1", []string{"numeric"}},
		{"fe80::1%eth0", []string{"zone"}},
		{"[fe80::1%eth0]:80", []string{"zone"}},
		{"fe80::%eth0/64", []string{"zone"}},
		{"[example.com]", []string{"IPv6"}},
		{"[10.0.0.1]", []string{"brackets are for IPv6"}},
		{"[10.0.0.0/8]:80", []string{"brackets are for IPv6"}},
		{"[::1", []string{"unclosed"}},
		{"[::1]x", []string{"after"}},
		{"[fd00::]/8", []string{"inside the brackets", "[fd00::/8]"}},
		{"fd00::/8:443", []string{"[fd00::/8]:443"}},
		{"10.0.0.0/33", []string{"not a CIDR range"}},
		{"10.0.0.0/x", []string{"not a CIDR range"}},
		{"10.1.2.3/8", []string{"bits set", "10.0.0.0/8", "10.1.2.3/32"}},
		{"0.0.0.0/0", []string{"every address"}},
		{"::/0", []string{"every address"}},
		{"::ffff:0:0/95", []string{"IPv4-mapped"}},
		{"a:b", []string{"not a number"}},
		{"http:x", []string{"not a number"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			e, err := ParseEntry(tt.in)
			if err == nil {
				t.Fatalf("ParseEntry(%q) = %v, want an error", tt.in, e)
			}
			if !errors.Is(err, ErrBadEntry) {
				t.Errorf("error %v does not match ErrBadEntry", err)
			}
			var ee *EntryError
			if !errors.As(err, &ee) || ee.Entry != tt.in {
				t.Errorf("error %v is not an *EntryError naming %q", err, tt.in)
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\r\n") {
				t.Errorf("error %q is more than one line", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
			if e != (Entry{}) {
				t.Errorf("entry = %+v with an error, want the zero Entry", e)
			}
		})
	}
}

func TestEntryMatches(t *testing.T) {
	tests := []struct {
		entry string
		host  string
		port  int
		want  bool
	}{
		{"example.com", "example.com", 443, true},
		{"example.com", "EXAMPLE.com.", 80, true},
		{"example.com", "api.example.com", 443, false},
		{"example.com", "badexample.com", 443, false},
		{"example.com:443", "example.com", 443, true},
		{"example.com:443", "example.com", 80, false},
		{"*.example.com", "api.example.com", 443, true},
		{"*.example.com", "a.b.c.example.com", 443, true},
		{"*.example.com", "example.com", 443, false},
		{"*.example.com", "badexample.com", 443, false},
		{"*.example.com", "example.com.evil.org", 443, false},
		{"*.example.com", ".example.com", 443, false},
		{"*.example.com:443", "api.example.com", 8443, false},
		{"10.0.0.0/8", "10.1.2.3", 80, true},
		{"10.0.0.0/8", "[::ffff:10.1.2.3]", 80, true},
		{"10.0.0.0/8", "11.0.0.1", 80, false},
		{"10.0.0.7", "10.0.0.7", 80, true},
		{"10.0.0.7", "x.10.0.0.7", 80, false},
		{"::1", "[::1]", 80, true},
		{"::1", "::1", 80, true},
		{"[::1]:8080", "::1", 80, false},
		{"fd00::/8", "fd12::1", 80, true},
		{"localhost", "127.0.0.1", 80, false}, // names match names only
		{"127.0.0.1", "localhost", 80, false}, // addresses match literals only
		{"example.com", "example.com", 0, false},
		{"example.com", "example.com", 65536, false},
		{"example.com", "exa mple.com", 80, false},
	}
	for _, tt := range tests {
		e, err := ParseEntry(tt.entry)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Matches(tt.host, tt.port); got != tt.want {
			t.Errorf("ParseEntry(%q).Matches(%q, %d) = %v, want %v", tt.entry, tt.host, tt.port, got, tt.want)
		}
	}
	if (Entry{}).Matches("example.com", 80) {
		t.Error("the zero Entry matches")
	}
}
