package netproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// DefaultDialTimeout bounds resolving a host and connecting to it when a
// Dialer's Timeout (or a Proxy's Options.DialTimeout) is zero.
const DefaultDialTimeout = 5 * time.Second

var (
	// ErrRefused is wrapped by every refusal of the network policy (see
	// Refusal).
	ErrRefused = errors.New("refused by the network policy")
	// ErrBadHost is wrapped by every error about a malformed requested
	// host, port or address (see HostError).
	ErrBadHost = errors.New("bad host")
)

// Refusal is a connection the network policy refuses, and why. It matches
// ErrRefused. Its message is one line naming host:port and the reason:
//
//	example.com:443 is not in the network allow-list
//	ads.example.com:443 is in the network deny-list
//	api.example.com:443 resolves to 10.1.2.3, a private address not in the network allow-list; add 10.1.2.3 (or a range holding it) to allow it
type Refusal struct {
	// Host is the host as checked: a lower-case name without a trailing
	// dot, or an IP address in its standard form.
	Host string
	// Port is the requested port.
	Port int
	// Denied is set when a deny entry matched (the host, or Addr).
	Denied bool
	// Addr is set when an address the host resolved to (or the IP literal
	// itself) is the reason: denied, or not public and not named by an
	// allow entry.
	Addr netip.Addr
	// AddrReason says why Addr needs naming ("a loopback address"), when
	// that is the reason.
	AddrReason string
	// Metadata is set when Addr is a cloud metadata address, which only
	// an entry for the address itself names.
	Metadata bool
}

// HostPort returns Host and Port joined ("example.com:443", "[::1]:80"),
// the form a Proxy reports.
func (r *Refusal) HostPort() string { return hostPort(r.Host, r.Port) }

// Error returns the one-line message shown above.
func (r *Refusal) Error() string {
	hp := r.HostPort()
	switch {
	case !r.Addr.IsValid() && r.Denied:
		return hp + " is in the network deny-list"
	case !r.Addr.IsValid():
		return hp + " is not in the network allow-list"
	}
	what := hp + " resolves to " + r.Addr.String() + ", "
	if r.Addr.String() == r.Host {
		what = hp + " is "
	}
	if r.Denied {
		return what + "which is in the network deny-list"
	}
	if r.Metadata {
		return fmt.Sprintf("%s%s, not in the network allow-list; only an entry for %s itself (not a range) allows it", what, r.AddrReason, r.Addr)
	}
	return fmt.Sprintf("%s%s not in the network allow-list; add %s (or a range holding it) to allow it", what, r.AddrReason, r.Addr)
}

// Unwrap returns ErrRefused.
func (r *Refusal) Unwrap() error { return ErrRefused }

// HostError is a malformed requested host, port or address. It matches
// ErrBadHost.
type HostError struct {
	Host   string // as requested
	Reason string // one line
}

// Error returns `bad host "HOST": REASON`.
func (e *HostError) Error() string { return fmt.Sprintf("%s %q: %s", ErrBadHost, e.Host, e.Reason) }

// Unwrap returns ErrBadHost.
func (e *HostError) Unwrap() error { return ErrBadHost }

// ResolveError is a name that could not be resolved: no such host, no
// addresses, or a resolver failure. It is not a policy refusal.
type ResolveError struct {
	Host string // the normalized name
	Err  error  // what the resolver said; nil for an empty answer
}

// Error returns "cannot resolve HOST: ...", one line.
func (e *ResolveError) Error() string {
	switch de, ok := errors.AsType[*net.DNSError](e.Err); {
	case e.Err == nil:
		return "cannot resolve " + e.Host + ": no addresses"
	case ok && de.IsNotFound:
		return "cannot resolve " + e.Host + ": no such host"
	}
	return "cannot resolve " + e.Host + ": " + oneLine(e.Err.Error())
}

// Unwrap returns the resolver's error.
func (e *ResolveError) Unwrap() error { return e.Err }

// TimeoutError is a Dialer's own Timeout passing while it resolved or
// connected. It is a net.Error whose Timeout is true, and it matches
// context.DeadlineExceeded.
type TimeoutError struct {
	Op    string        // "resolving" or "connecting to"
	Host  string        // the normalized host
	After time.Duration // the Dialer's Timeout
}

// Error returns "resolving HOST timed out after 5s" or the like.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s %s timed out after %v", e.Op, e.Host, e.After)
}

// Timeout returns true.
func (e *TimeoutError) Timeout() bool { return true }

// Temporary returns true (net.Error asks for it).
func (e *TimeoutError) Temporary() bool { return true }

// Is matches context.DeadlineExceeded.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// Resolver looks up the addresses of a name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer connects only where a List allows: it checks the host and port,
// resolves a name once, checks every address (see the package
// documentation), and connects to a checked address, never to the name.
// Its zero fields take defaults; a Dialer is safe for concurrent use as
// long as its fields are not changed.
type Dialer struct {
	// List decides; nil allows nothing.
	List *List
	// Resolver resolves names; nil means net.DefaultResolver (so
	// /etc/hosts counts).
	Resolver Resolver
	// Dial connects to an "ip:port" address over "tcp"; nil means a
	// net.Dialer. It is called only with checked addresses.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Timeout bounds resolving and connecting together; zero means
	// DefaultDialTimeout.
	Timeout time.Duration
}

var defaultNetDialer net.Dialer

func (d *Dialer) timeout() time.Duration {
	if d.Timeout > 0 {
		return d.Timeout
	}
	return DefaultDialTimeout
}

// DialContext connects to address ("host:port", IPv6 in brackets) over
// network "tcp", "tcp4" or "tcp6" (all three dial whatever checked address
// comes first), if the policy allows it. Errors: *Refusal (ErrRefused),
// *HostError (ErrBadHost), *ResolveError, *TimeoutError when the Dialer's
// own Timeout passed, the context's error when ctx ended, or the last
// dial error wrapped.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, &HostError{Host: address, Reason: fmt.Sprintf("network %q: only tcp is dialled", network)}
	}
	host, port, err := splitHostPort(address)
	if err != nil {
		return nil, err
	}
	return d.DialHost(ctx, host, port)
}

// splitHostPort splits "host:port" and reads the port.
func splitHostPort(address string) (string, int, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return "", 0, &HostError{Host: address, Reason: "not host:port (write IPv6 addresses as [::1]:443)"}
	}
	port, ok := parsePort(portText)
	if !ok {
		return "", 0, &HostError{Host: address, Reason: fmt.Sprintf("port %q is not a number from 1 to 65535", portText)}
	}
	return host, port, nil
}

// DialHost is DialContext with the host (a name or an IP literal, IPv6
// with or without brackets) and the port apart.
func (d *Dialer) DialHost(ctx context.Context, host string, port int) (net.Conn, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, d.timeout(), errDialerTimeout)
	defer cancel()
	name, addrs, err := d.resolve(ctx, host, port)
	if err != nil {
		return nil, err
	}
	dial := d.Dial
	if dial == nil {
		dial = defaultNetDialer.DialContext
	}
	var firstErr error
	for _, a := range addrs {
		conn, err := dial(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err := d.ctxError(ctx, "connecting to", name); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("connect to %s: %w", hostPort(name, port), firstErr)
}

// Resolve applies the whole policy to host on port without connecting:
// it returns the checked addresses a connection may go to, in the
// resolver's order, or the error DialHost would return.
func (d *Dialer) Resolve(ctx context.Context, host string, port int) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, d.timeout(), errDialerTimeout)
	defer cancel()
	_, addrs, err := d.resolve(ctx, host, port)
	return addrs, err
}

var errDialerTimeout = errors.New("dialer timeout")

// resolve checks host and port, resolves a name once and checks every
// address. It returns the normalized host and the addresses.
func (d *Dialer) resolve(ctx context.Context, host string, port int) (string, []netip.Addr, error) {
	name, ip, err := normalizeHost(host)
	if err != nil {
		return "", nil, &HostError{Host: host, Reason: err.Error()}
	}
	if port < 1 || port > 65535 {
		return "", nil, &HostError{Host: host, Reason: fmt.Sprintf("port %d is out of range; ports are 1 to 65535", port)}
	}
	if r := d.List.check(name, ip, uint16(port)); r != nil {
		return "", nil, r
	}
	addrs := []netip.Addr{ip}
	if !ip.IsValid() {
		var res Resolver = net.DefaultResolver
		if d.Resolver != nil {
			res = d.Resolver
		}
		found, err := res.LookupNetIP(ctx, "ip", name)
		if cerr := d.ctxError(ctx, "resolving", name); cerr != nil {
			return "", nil, cerr
		}
		if err != nil {
			return "", nil, &ResolveError{Host: name, Err: err}
		}
		if len(found) == 0 {
			return "", nil, &ResolveError{Host: name}
		}
		addrs = make([]netip.Addr, 0, len(found))
		for _, a := range found {
			a = a.WithZone("").Unmap()
			if !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
		}
	}
	for _, a := range addrs {
		if r := d.List.checkAddr(name, a, port); r != nil {
			return "", nil, r
		}
	}
	return name, addrs, nil
}

// checkAddr applies the deny ranges and the non-public rule to one
// address that host resolved to (or is).
func (l *List) checkAddr(host string, a netip.Addr, port int) *Refusal {
	if l.DeniesAddr(a, port) {
		return &Refusal{Host: host, Port: port, Denied: true, Addr: a}
	}
	reason, metadata := classify(a)
	if reason != "" && !l.NamesAddr(a, port) {
		return &Refusal{Host: host, Port: port, Addr: a, AddrReason: reason, Metadata: metadata}
	}
	return nil
}

// ctxError returns the error for an ended ctx: a *TimeoutError when the
// Dialer's own timeout passed, else the context's error.
func (d *Dialer) ctxError(ctx context.Context, op, host string) error {
	if ctx.Err() == nil {
		return nil
	}
	if context.Cause(ctx) == errDialerTimeout {
		return &TimeoutError{Op: op, Host: host, After: d.timeout()}
	}
	return fmt.Errorf("%s %s: %w", op, host, ctx.Err())
}

// oneLine keeps error text on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
