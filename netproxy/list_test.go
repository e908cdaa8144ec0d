package netproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func mustList(t testing.TB, allow, deny []string) *List {
	t.Helper()
	l, err := NewList(allow, deny)
	if err != nil {
		t.Fatalf("NewList(%q, %q): %v", allow, deny, err)
	}
	return l
}

func TestListAllows(t *testing.T) {
	tests := []struct {
		allow, deny []string
		host        string
		port        int
		want        bool
	}{
		{[]string{"example.com"}, nil, "example.com", 443, true},
		{[]string{"example.com"}, nil, "api.example.com", 443, false},
		{[]string{"example.com"}, nil, "EXAMPLE.COM.", 80, true},
		{[]string{"*.example.com"}, nil, "example.com", 443, false},
		{[]string{"*.example.com"}, nil, "api.example.com", 443, true},
		{[]string{"*.example.com"}, nil, "a.b.example.com", 443, true},
		{[]string{"*.example.com", "example.com"}, nil, "example.com", 443, true},
		{[]string{"example.com:443"}, nil, "example.com", 443, true},
		{[]string{"example.com:443"}, nil, "example.com", 80, false},
		{[]string{"example.com:443", "example.com:80"}, nil, "example.com", 80, true},
		{[]string{"*.example.com:443"}, nil, "x.example.com", 80, false},
		{[]string{"*.example.com"}, []string{"ads.example.com"}, "ads.example.com", 443, false},
		{[]string{"*.example.com"}, []string{"ads.example.com"}, "x.ads.example.com", 443, true},
		{[]string{"*.example.com"}, []string{"*.ads.example.com"}, "x.ads.example.com", 443, false},
		{[]string{"*.example.com"}, []string{"*.example.com:80"}, "x.example.com", 80, false},
		{[]string{"*.example.com"}, []string{"*.example.com:80"}, "x.example.com", 443, true},
		{[]string{"example.com"}, []string{"example.com"}, "example.com", 443, false},
		{[]string{"10.0.0.0/8"}, nil, "10.1.2.3", 80, true},
		{[]string{"10.0.0.0/8"}, []string{"10.9.0.0/16"}, "10.9.1.1", 80, false},
		{[]string{"10.0.0.0/8"}, []string{"10.9.0.0/16"}, "10.8.1.1", 80, true},
		{[]string{"10.0.0.0/8:443"}, nil, "10.1.2.3", 80, false},
		{[]string{"::1"}, nil, "[::1]", 80, true},
		{[]string{"fd00::/8"}, nil, "fd00::5", 80, true},
		{[]string{"127.0.0.1"}, nil, "::ffff:127.0.0.1", 80, true},
		{[]string{"example.com"}, nil, "example.com", 0, false},
		{[]string{"example.com"}, nil, "", 80, false},
		{nil, nil, "example.com", 80, false},
		{[]string{}, []string{"x.test"}, "example.com", 80, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q-%q/%s:%d", tt.allow, tt.deny, tt.host, tt.port), func(t *testing.T) {
			l := mustList(t, tt.allow, tt.deny)
			if got := l.Allows(tt.host, tt.port); got != tt.want {
				t.Errorf("Allows(%q, %d) = %v, want %v", tt.host, tt.port, got, tt.want)
			}
		})
	}
}

func TestListCheckErrors(t *testing.T) {
	l := mustList(t, []string{"*.example.com"}, []string{"ads.example.com"})
	tests := []struct {
		host string
		port int
		is   error
		want string
	}{
		{"evil.com", 443, ErrRefused, "evil.com:443 is not in the network allow-list"},
		{"ads.example.com", 443, ErrRefused, "ads.example.com:443 is in the network deny-list"},
		{"::1", 80, ErrRefused, "[::1]:80 is not in the network allow-list"},
		{"exa mple.com", 80, ErrBadHost, "invalid character"},
		{"x.example.com", 0, ErrBadHost, "out of range"},
		{"fe80::1%eth0", 80, ErrBadHost, "zone"},
	}
	for _, tt := range tests {
		err := l.Check(tt.host, tt.port)
		if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Check(%q, %d) = %v, want %v mentioning %q", tt.host, tt.port, err, tt.is, tt.want)
		}
	}
	if err := l.Check("x.example.com", 443); err != nil {
		t.Errorf("Check(x.example.com) = %v", err)
	}
}

func TestListNamesAddr(t *testing.T) {
	l := mustList(t, []string{"api.test", "127.0.0.2", "10.0.0.0/8:443", "fd00::/8", "169.254.0.0/16", "100.64.0.0/10", "fd20:ce::254"}, []string{"10.9.9.9"})
	tests := []struct {
		addr string
		port int
		want bool
	}{
		{"127.0.0.2", 80, true},
		{"::ffff:127.0.0.2", 80, true},
		{"127.0.0.3", 80, false},
		{"10.1.2.3", 443, true},
		{"10.1.2.3", 80, false},
		{"10.9.9.9", 443, true}, // NamesAddr ignores deny entries; see DeniesAddr
		{"fd00::1", 1, true},
		{"169.254.1.1", 80, true},
		{"169.254.169.254", 80, false}, // metadata: only the address itself names it
		{"100.100.100.200", 80, false},
		{"fd20:ce::254", 80, true},
		{"8.8.8.8", 80, false},
		{"127.0.0.2", 0, false},
	}
	for _, tt := range tests {
		if got := l.NamesAddr(netip.MustParseAddr(tt.addr), tt.port); got != tt.want {
			t.Errorf("NamesAddr(%s, %d) = %v, want %v", tt.addr, tt.port, got, tt.want)
		}
	}
	if !l.DeniesAddr(netip.MustParseAddr("::ffff:10.9.9.9"), 443) || l.DeniesAddr(netip.MustParseAddr("10.9.9.8"), 443) {
		t.Error("DeniesAddr does not follow the deny entry 10.9.9.9")
	}
	meta := mustList(t, []string{"169.254.169.254"}, nil)
	if !meta.NamesAddr(netip.MustParseAddr("169.254.169.254"), 80) {
		t.Error("an entry for the metadata address itself does not name it")
	}
}

func TestListStringAndEntries(t *testing.T) {
	l := mustList(t, []string{"Example.com", "*.example.com:443", "example.com", "[::1]:80", "10.0.0.0/8"}, []string{"ads.example.com"})
	if got, want := l.String(), "allow example.com, *.example.com:443, [::1]:80, 10.0.0.0/8; deny ads.example.com"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	allow, deny := l.Entries()
	if len(allow) != 4 || len(deny) != 1 {
		t.Errorf("Entries() = %v, %v; want 4 and 1 (duplicates dropped)", allow, deny)
	}
	allow[0] = Entry{}
	if a, _ := l.Entries(); a[0].String() != "example.com" {
		t.Error("Entries returned the list's own slice")
	}
	if got := mustList(t, nil, []string{"x.test"}).String(); got != "allow nothing" {
		t.Errorf("String() = %q, want %q", got, "allow nothing")
	}
}

func TestNilList(t *testing.T) {
	var l *List
	if l.Allows("example.com", 443) || l.NamesAddr(netip.MustParseAddr("127.0.0.1"), 80) || l.DeniesAddr(netip.MustParseAddr("127.0.0.1"), 80) {
		t.Error("a nil List allows something")
	}
	if err := l.Check("example.com", 443); !errors.Is(err, ErrRefused) {
		t.Errorf("Check on a nil List = %v, want a refusal", err)
	}
	if l.String() != "allow nothing" {
		t.Errorf("String() = %q", l.String())
	}
}

func TestNewListErrors(t *testing.T) {
	_, err := NewList([]string{"example.com", "http://x.test/"}, nil)
	if !errors.Is(err, ErrBadEntry) || !strings.HasPrefix(err.Error(), "allow-list: ") || !strings.Contains(err.Error(), `"http://x.test/"`) {
		t.Errorf("NewList error = %v, want an allow-list ErrBadEntry naming the entry", err)
	}
	_, err = NewList([]string{"example.com"}, []string{"*"})
	if !errors.Is(err, ErrBadEntry) || !strings.HasPrefix(err.Error(), "deny-list: ") {
		t.Errorf("NewList error = %v, want a deny-list ErrBadEntry", err)
	}
}

// ::1 (loopback) and :: (unspecified) lie in ::/96 but are not
// IPv4-compatible addresses (RFC 4291 2.5.5.1 excludes them): a deny of
// an IPv4 range such as 0.0.0.0/8 or 0.0.0.0/1 does not deny [::1] that
// an allow entry names.
// Origin: review 11.
func TestDenyOfIPv4RangeSparesLoopbackV6(t *testing.T) {
	for _, deny := range []string{"0.0.0.0/8", "0.0.0.0/1"} {
		l, err := NewList([]string{"[::1]:8080"}, []string{deny})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Check("::1", 8080); err != nil {
			t.Errorf("allow [::1]:8080, deny %s: ::1 refused: %v", deny, err)
		}
		if l.DeniesAddr(netip.MustParseAddr("::1"), 8080) {
			t.Errorf("deny %s: DeniesAddr(::1) is true", deny)
		}
	}
}
