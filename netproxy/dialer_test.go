package netproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// dialLog wraps a real dialer and records the addresses dialled.
type dialLog struct {
	mu      sync.Mutex
	targets []string
}

func (d *dialLog) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.targets = append(d.targets, network+" "+address)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

func (d *dialLog) dials() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.targets)
}

func TestDialerResolve(t *testing.T) {
	res := newHostsResolver(`
127.0.0.2 lo.test
::ffff:127.0.0.2 mapped.test
127.0.0.2 dup.test
::ffff:127.0.0.2 dup.test
8.8.8.8 pub.test
2001:4860:4860::8888 pub.test
64:ff9b::7f00:1 nat64.test
`)
	d := &Dialer{List: mustList(t, []string{"lo.test", "mapped.test", "dup.test", "pub.test", "nat64.test", "nx.test", "127.0.0.2", "8.8.8.8"}, nil), Resolver: res}
	tests := []struct {
		host string
		want []string // addresses; nil when an error is wanted
		err  string
	}{
		{"lo.test", []string{"127.0.0.2"}, ""},
		{"mapped.test", []string{"127.0.0.2"}, ""},
		{"dup.test", []string{"127.0.0.2"}, ""},
		{"pub.test", []string{"8.8.8.8", "2001:4860:4860::8888"}, ""},
		{"8.8.8.8", []string{"8.8.8.8"}, ""},
		{"[::ffff:8.8.8.8]", []string{"8.8.8.8"}, ""},
		{"nat64.test", nil, "resolves to 64:ff9b::7f00:1, a loopback address (NAT64)"},
		{"nx.test", nil, "cannot resolve nx.test: no such host"},
		{"9.9.9.9", nil, "9.9.9.9:443 is not in the network allow-list"},
		{"exa mple.test", nil, "invalid character"},
	}
	for _, tt := range tests {
		got, err := d.Resolve(t.Context(), tt.host, 443)
		if tt.want == nil {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Resolve(%q) = %v, %v; want an error mentioning %q", tt.host, got, err, tt.err)
			}
			continue
		}
		var gotS []string
		for _, a := range got {
			gotS = append(gotS, a.String())
		}
		if err != nil || !slices.Equal(gotS, tt.want) {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tt.host, gotS, err, tt.want)
		}
	}
	var re *ResolveError
	if _, err := d.Resolve(t.Context(), "nx.test", 80); !errors.As(err, &re) || errors.Is(err, ErrRefused) {
		t.Errorf("a name that does not resolve: %v, want a *ResolveError that is not a refusal", err)
	}
}

// TestDialerDialsCheckedAddress: one lookup, and the connection goes to
// the address checked, whatever the resolver says later.
func TestDialerDialsCheckedAddress(t *testing.T) {
	o := startOrigin(t, "127.0.0.2", "A", false)
	res := &sequenceResolver{answers: [][]netip.Addr{
		{netip.MustParseAddr("127.0.0.2")},
		{netip.MustParseAddr("127.0.0.9")},
	}}
	dl := &dialLog{}
	d := &Dialer{List: mustList(t, []string{"rebind.test", "127.0.0.2"}, nil), Resolver: res, Dial: dl.dial}
	c, err := d.DialContext(t.Context(), "tcp", "rebind.test:"+o.port)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := dl.dials(); !slices.Equal(got, []string{"tcp 127.0.0.2:" + o.port}) {
		t.Errorf("dials = %q", got)
	}
	if res.n != 1 {
		t.Errorf("%d lookups, want 1", res.n)
	}
	// The second answer (127.0.0.9, not listed) is refused and not dialled.
	if _, err := d.DialContext(t.Context(), "tcp", "rebind.test:"+o.port); !errors.Is(err, ErrRefused) {
		t.Errorf("second dial: %v, want a refusal", err)
	}
	if n := len(dl.dials()); n != 1 {
		t.Errorf("%d dials, want 1", n)
	}
}

// sequenceResolver answers each lookup with the next answer.
type sequenceResolver struct {
	mu      sync.Mutex
	answers [][]netip.Addr
	n       int
}

func (r *sequenceResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.answers[min(r.n, len(r.answers)-1)]
	r.n++
	return a, nil
}

// blockingResolver never answers until ctx ends.
type blockingResolver struct{}

func (blockingResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestDialerTimeouts(t *testing.T) {
	list := mustList(t, []string{"slow.test", "127.0.0.2"}, nil)
	blackHole := func(ctx context.Context, network, address string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	tests := []struct {
		name string
		d    *Dialer
		host string
		want string
	}{
		{"resolve", &Dialer{List: list, Resolver: blockingResolver{}, Timeout: 100 * time.Millisecond}, "slow.test", "resolving slow.test timed out after 100ms"},
		{"connect", &Dialer{List: list, Dial: blackHole, Timeout: 100 * time.Millisecond}, "127.0.0.2", "connecting to 127.0.0.2 timed out after 100ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := tt.d.DialHost(t.Context(), tt.host, 80)
			var te *TimeoutError
			var ne net.Error
			if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() || err.Error() != tt.want {
				t.Errorf("error = %v, want %q as a *TimeoutError", err, tt.want)
			}
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Errorf("took %v", elapsed)
			}
		})
	}
	t.Run("caller cancels", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		d := &Dialer{List: list, Dial: func(c context.Context, network, address string) (net.Conn, error) {
			cancel()
			<-c.Done()
			return nil, c.Err()
		}}
		_, err := d.DialHost(ctx, "127.0.0.2", 80)
		if !errors.Is(err, context.Canceled) || errors.As(err, new(*TimeoutError)) {
			t.Errorf("error = %v, want context.Canceled", err)
		}
	})
}

func TestDialerBadInput(t *testing.T) {
	d := &Dialer{List: mustList(t, []string{"127.0.0.2"}, nil)}
	for _, tt := range []struct{ network, address, want string }{
		{"udp", "127.0.0.2:53", `network "udp"`},
		{"unix", "/tmp/x.sock", `network "unix"`},
		{"tcp", "127.0.0.2", "not host:port"},
		{"tcp", "127.0.0.2:0", "not a number from 1 to 65535"},
		{"tcp", "127.0.0.2:http", "not a number from 1 to 65535"},
		{"tcp", "[fe80::1%lo]:80", "zone"},
	} {
		_, err := d.DialContext(t.Context(), tt.network, tt.address)
		if !errors.Is(err, ErrBadHost) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("DialContext(%q, %q) = %v, want ErrBadHost mentioning %q", tt.network, tt.address, err, tt.want)
		}
	}
	o := startOrigin(t, "127.0.0.2", "A", false)
	c, err := d.DialContext(t.Context(), "tcp4", "127.0.0.2:"+o.port)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
	b, _ := io.ReadAll(c)
	c.Close()
	if !strings.Contains(string(b), "A GET /") {
		t.Errorf("answer %q", b)
	}
}

// TestDialerDenyCoversEmbeddedIPv4: a deny entry for a public IPv4 range
// also refuses the IPv6 forms that carry it to the same host (NAT64
// 64:ff9b::/96 and 6to4 2002::/16), whether a name resolves to them or
// they are requested literally: the address classification judges these
// forms by the embedded IPv4 address, and on a DNS64/NAT64 network the
// NAT64 form is how the denied host is reached. Controls: the plain and
// IPv4-mapped forms are denied.
// Origin: review 9.
func TestDialerDenyCoversEmbeddedIPv4(t *testing.T) {
	res := mapResolver{
		"v4.example.test":     {"8.8.8.8"},
		"mapped.example.test": {"::ffff:8.8.8.8"},
		"nat64.example.test":  {"64:ff9b::808:808"},
		"6to4.example.test":   {"2002:808:808::1"},
	}
	list := mustList(t, []string{"*.example.test", "64:ff9b::/96", "2002::/16", "8.0.0.0/8"}, []string{"8.8.8.0/24"})
	dl := &pipeDials{}
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

// TestDialerRefusesAzureWireServer: 168.63.129.16 is Azure's
// host-internal platform endpoint (WireServer: VM agent goal state,
// extension settings with protected secrets), reachable from every Azure
// VM like the metadata address. A name an attacker controls cannot point
// at it.
// Origin: review 9.
func TestDialerRefusesAzureWireServer(t *testing.T) {
	a := netip.MustParseAddr("168.63.129.16")
	dl := &pipeDials{}
	d := &Dialer{List: mustList(t, []string{"*.example.test"}, nil), Resolver: mapResolver{"x.example.test": {"168.63.129.16"}}, Dial: dl.dial}
	_, err := d.Resolve(t.Context(), "x.example.test", 80)
	if !errors.Is(err, ErrRefused) {
		t.Errorf("x.example.test resolving to %s: %v (NonPublicReason %q); want a refusal", a, err, NonPublicReason(a))
	}
}
