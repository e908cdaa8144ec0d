package tool

// The web fetcher: an HTTP(S) client that only reaches the hosts an operator
// allowed, and never a private, loopback or link-local address unless that
// exact host was listed.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/sandbox"
)

// Defaults for the zero fields of a FetchPolicy.
const (
	DefaultFetchConnectTimeout = 5 * time.Second
	DefaultFetchReadTimeout    = 10 * time.Second
	DefaultFetchMaxBody        = 200000
	DefaultFetchMaxRedirects   = 5
)

// maxFetchURLLen bounds the URLs Fetch accepts (browsers and servers rarely
// go beyond 8 KiB either).
const maxFetchURLLen = 8192

// ErrFetchRefused is wrapped by every refusal of the fetch policy: a host not
// in the allow-list, a forbidden address, scheme or redirect. The message
// names the reason and the host:
//
//	fetch refused: host "evil.com" is not in the allow-list
//	fetch refused: "localhost" resolves to 127.0.0.1, a loopback address; list the host explicitly to allow it
var ErrFetchRefused = errors.New("fetch refused")

// FetchPolicy says which URLs a Fetcher may get.
type FetchPolicy struct {
	// Allow is the host allow-list. An entry matches the host exactly or
	// any subdomain of it ("example.com" matches "api.example.com", not
	// "badexample.com"); a leading "*." means the same as the bare domain.
	// Matching is case-insensitive and ignores a trailing dot. An entry may
	// be an IP literal (IPv6 with or without brackets); it then matches that
	// address only. An empty list allows nothing.
	//
	// Hosts that resolve to loopback, private, link-local and other
	// non-public addresses are refused, unless the URL's host is listed
	// exactly (not only through a parent domain): listing "localhost" or
	// "10.0.0.7" is how an operator lets the agent reach them.
	Allow []string
	// ConnectTimeout bounds resolving the host and connecting to it
	// (TCP and TLS handshake). Zero means DefaultFetchConnectTimeout.
	ConnectTimeout time.Duration
	// ReadTimeout bounds the time until the response headers arrive
	// (redirects included) and, separately, reading the whole body. Zero
	// means DefaultFetchReadTimeout.
	ReadTimeout time.Duration
	// MaxBody is how many bytes of the body are kept; the rest is not read.
	// Zero means DefaultFetchMaxBody.
	MaxBody int64
	// MaxRedirects is how many redirects are followed; one more is refused.
	// Zero means DefaultFetchMaxRedirects.
	MaxRedirects int
}

// FetchResult is what Fetch got.
type FetchResult struct {
	URL         string // final URL, after redirects
	Status      int    // HTTP status code; non-2xx statuses are results, not errors
	ContentType string // the Content-Type header
	Body        []byte // at most MaxBody bytes
	Truncated   bool   // the body was longer than MaxBody
}

// Fetcher gets web pages under a FetchPolicy. It is safe for concurrent use.
//
// Every connection is checked when it is made: the host must match the
// allow-list, it is resolved once, every address it resolves to is checked,
// and the connection goes to a checked address (TLS still verifies the host
// name). Redirects are checked the same way. Proxies from the environment
// are never used.
type Fetcher struct {
	policy  FetchPolicy
	exact   map[string]bool // normalized names and canonical IPs listed
	domains []string        // names listed (IP entries excluded), for the subdomain rule

	transport *http.Transport

	// Replaced by tests; set before the first Fetch.
	resolver fetchResolver
	dial     func(ctx context.Context, network, address string) (net.Conn, error)
}

// fetchResolver is the part of *net.Resolver a Fetcher uses.
type fetchResolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// NewFetcher checks the policy, fills in its defaults and returns a Fetcher.
// A malformed allow-list entry (empty, with a scheme, path, port or a
// wildcard other than a leading "*.") or a negative limit is an error
// matching sandbox.ErrConfig.
func NewFetcher(p FetchPolicy) (*Fetcher, error) {
	switch {
	case p.ConnectTimeout < 0:
		return nil, fmt.Errorf("%w: negative fetch connect timeout %v", sandbox.ErrConfig, p.ConnectTimeout)
	case p.ReadTimeout < 0:
		return nil, fmt.Errorf("%w: negative fetch read timeout %v", sandbox.ErrConfig, p.ReadTimeout)
	case p.MaxBody < 0:
		return nil, fmt.Errorf("%w: negative fetch body limit %d", sandbox.ErrConfig, p.MaxBody)
	case p.MaxRedirects < 0:
		return nil, fmt.Errorf("%w: negative fetch redirect limit %d", sandbox.ErrConfig, p.MaxRedirects)
	}
	if p.ConnectTimeout == 0 {
		p.ConnectTimeout = DefaultFetchConnectTimeout
	}
	if p.ReadTimeout == 0 {
		p.ReadTimeout = DefaultFetchReadTimeout
	}
	if p.MaxBody == 0 {
		p.MaxBody = DefaultFetchMaxBody
	}
	if p.MaxRedirects == 0 {
		p.MaxRedirects = DefaultFetchMaxRedirects
	}

	f := &Fetcher{exact: make(map[string]bool)}
	for _, entry := range p.Allow {
		name, isIP, err := fetchParseAllowEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("%w: fetch allow-list entry %q: %v", sandbox.ErrConfig, entry, err)
		}
		if !f.exact[name] && !isIP {
			f.domains = append(f.domains, name)
		}
		f.exact[name] = true
	}
	p.Allow = append([]string(nil), p.Allow...)
	f.policy = p

	dialer := &net.Dialer{KeepAlive: 30 * time.Second}
	f.dial = dialer.DialContext
	f.resolver = net.DefaultResolver
	f.transport = &http.Transport{
		Proxy:                  nil, // never a proxy from the environment
		DialContext:            f.dialContext,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    p.ConnectTimeout,
		MaxIdleConns:           16,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        30 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return f, nil
}

// Allowed reports whether host (a name or an IP literal, IPv6 with or
// without brackets, no port) matches the allow-list. It does not resolve the
// name, so a listed host may still be refused at fetch time for resolving
// to a non-public address.
func (f *Fetcher) Allowed(host string) bool {
	name, _, err := fetchNormalizeHost(host)
	if err != nil {
		return false
	}
	_, ok := f.match(name)
	return ok
}

// match reports whether the normalized host is allowed, and whether it is
// listed exactly (rather than through a parent domain).
func (f *Fetcher) match(name string) (exact, ok bool) {
	if f.exact[name] {
		return true, true
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return false, false // IP entries match only themselves
	}
	for _, d := range f.domains {
		if strings.HasSuffix(name, "."+d) {
			return false, true
		}
	}
	return false, false
}

// Fetch gets rawURL with GET and returns the status, content type and up to
// MaxBody bytes of the body. A non-2xx status is a result, not an error.
// Policy refusals match ErrFetchRefused; timeouts say "timed out" and match
// context.DeadlineExceeded.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (FetchResult, error) {
	u, err := f.checkURL(rawURL)
	if err != nil {
		return FetchResult{}, err
	}
	shown := u.String()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	headerTimer := time.AfterFunc(f.policy.ReadTimeout, func() { cancel(errFetchHeaderTimeout) })

	var lastHop string
	client := &http.Client{
		Transport: f.transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			lastHop = req.URL.Redacted()
			if len(via) > f.policy.MaxRedirects {
				return fetchRefusef("more than %d redirects", f.policy.MaxRedirects)
			}
			return f.checkParsedURL(req.URL)
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		headerTimer.Stop()
		return FetchResult{}, fmt.Errorf("fetch %s: %v", shown, err)
	}
	req.Header.Set("User-Agent", "hutch-fetch/1")
	resp, err := client.Do(req)
	if !headerTimer.Stop() && err == nil {
		// The timer fired as the headers arrived: the context is gone.
		resp.Body.Close()
		err = context.Cause(ctx)
	}
	if err != nil {
		return FetchResult{}, f.fetchError(ctx, shown, lastHop, err)
	}
	defer resp.Body.Close()

	// The body gets its own ReadTimeout.
	bodyTimer := time.AfterFunc(f.policy.ReadTimeout, func() { cancel(errFetchBodyTimeout) })
	defer bodyTimer.Stop()
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.policy.MaxBody+1))
	final := resp.Request.URL.String()
	if err != nil {
		return FetchResult{}, f.fetchError(ctx, final, "", err)
	}
	res := FetchResult{
		URL:         final,
		Status:      resp.StatusCode,
		ContentType: resp.Header.Get("Content-Type"),
		Body:        body,
	}
	if int64(len(body)) > f.policy.MaxBody {
		res.Body, res.Truncated = body[:f.policy.MaxBody], true
	}
	return res, nil
}

var (
	errFetchHeaderTimeout = errors.New("header timeout")
	errFetchBodyTimeout   = errors.New("body timeout")
)

// fetchError turns what the HTTP client returned into one clear line.
func (f *Fetcher) fetchError(ctx context.Context, shown, lastHop string, err error) error {
	if r, ok := errors.AsType[*fetchRefusal](err); ok {
		if lastHop != "" {
			return &fetchRefusal{reason: fmt.Sprintf("redirect to %s: %s", lastHop, r.reason)}
		}
		return r
	}
	switch context.Cause(ctx) {
	case errFetchHeaderTimeout:
		return &fetchTimeoutError{fmt.Sprintf("fetch %s: timed out after %v waiting for the response", shown, f.policy.ReadTimeout)}
	case errFetchBodyTimeout:
		return &fetchTimeoutError{fmt.Sprintf("fetch %s: timed out after %v reading the body", shown, f.policy.ReadTimeout)}
	}
	if cerr := ctx.Err(); cerr != nil {
		// The caller's context ended (ours only ends through the timers).
		if errors.Is(cerr, context.DeadlineExceeded) {
			return &fetchTimeoutError{fmt.Sprintf("fetch %s: timed out (the caller's deadline passed)", shown)}
		}
		return fmt.Errorf("fetch %s: %w", shown, cerr)
	}
	if t, ok := errors.AsType[*fetchTimeoutError](err); ok {
		return &fetchTimeoutError{fmt.Sprintf("fetch %s: %s", shown, t.msg)}
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return &fetchTimeoutError{fmt.Sprintf("fetch %s: timed out: %v", shown, fetchOneLine(err.Error()))}
	}
	return fmt.Errorf("fetch %s: %s", shown, fetchOneLine(err.Error()))
}

// checkURL parses rawURL and applies the policy to it.
func (f *Fetcher) checkURL(rawURL string) (*url.URL, error) {
	if len(rawURL) > maxFetchURLLen {
		return nil, fetchRefusef("URL is longer than %d bytes", maxFetchURLLen)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("fetch: invalid URL %q: %s", rawURL, fetchOneLine(err.Error()))
	}
	if err := f.checkParsedURL(u); err != nil {
		return nil, err
	}
	return u, nil
}

// checkParsedURL applies the policy to u: scheme, user info, host syntax and
// allow-list. Addresses are checked when connecting.
func (f *Fetcher) checkParsedURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fetchRefusef("scheme %q is not allowed; use http or https", u.Scheme)
	}
	if u.User != nil {
		return fetchRefusef("URL contains user info (user@host)")
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return fetchRefusef("URL has no host")
	}
	if port := u.Port(); port != "" {
		if n, ok := fetchParsePort(port); !ok || n == 0 {
			return fetchRefusef("bad port %q", port)
		}
	}
	name, _, err := fetchNormalizeHost(u.Hostname())
	if err != nil {
		return fetchRefusef("host %q: %v", u.Hostname(), err)
	}
	if _, ok := f.match(name); !ok {
		return fetchRefusef("host %q is not in the allow-list", name)
	}
	return nil
}

func fetchParsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 65535
}

// dialContext is the transport's only way to the network. It checks the
// host again (redirect targets included), resolves it once, checks every
// address and connects to a checked address, never to the name.
func (f *Fetcher) dialContext(ctx context.Context, _, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fetchRefusef("bad address %q", addr)
	}
	pn, ok := fetchParsePort(port)
	if !ok || pn == 0 {
		return nil, fetchRefusef("bad port %q", port)
	}
	name, ip, err := fetchNormalizeHost(host)
	if err != nil {
		return nil, fetchRefusef("host %q: %v", host, err)
	}
	exact, ok := f.match(name)
	if !ok {
		return nil, fetchRefusef("host %q is not in the allow-list", name)
	}

	ctx, cancel := context.WithTimeout(ctx, f.policy.ConnectTimeout)
	defer cancel()
	var addrs []netip.Addr
	if ip.IsValid() {
		addrs = []netip.Addr{ip}
	} else {
		found, err := f.resolver.LookupNetIP(ctx, "ip", name)
		if err != nil {
			if ctx.Err() == context.DeadlineExceeded {
				return nil, &fetchTimeoutError{fmt.Sprintf("resolving %s timed out after %v", name, f.policy.ConnectTimeout)}
			}
			return nil, fmt.Errorf("cannot resolve %s: %s", name, fetchOneLine(fetchLookupErrText(err)))
		}
		for _, a := range found {
			addrs = append(addrs, a.WithZone("").Unmap())
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("cannot resolve %s: no addresses", name)
		}
	}
	// A host listed exactly may be anything the operator chose (an IP
	// literal is always listed exactly); one allowed through a parent
	// domain must resolve to public addresses only, all of them.
	if !exact {
		for _, a := range addrs {
			if reason := fetchRefusedAddrReason(a); reason != "" {
				return nil, fetchRefusef("%q resolves to %s, %s; list the host explicitly to allow it", name, a, reason)
			}
		}
	}

	var firstErr error
	for _, a := range addrs {
		conn, err := f.dial(ctx, "tcp", netip.AddrPortFrom(a, uint16(pn)).String())
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
	if ctx.Err() == context.DeadlineExceeded {
		return nil, &fetchTimeoutError{fmt.Sprintf("connecting to %s timed out after %v", name, f.policy.ConnectTimeout)}
	}
	return nil, firstErr
}

func fetchLookupErrText(err error) string {
	if de, ok := errors.AsType[*net.DNSError](err); ok && de.IsNotFound {
		return "no such host"
	}
	return err.Error()
}

// fetchParseAllowEntry checks one allow-list entry and returns its normalized
// form and whether it is an IP address.
func fetchParseAllowEntry(entry string) (name string, isIP bool, err error) {
	e := entry
	switch {
	case strings.TrimSpace(e) == "":
		return "", false, errors.New("empty entry")
	case strings.Contains(e, "://"):
		return "", false, errors.New("has a scheme: write the host only")
	case strings.ContainsAny(e, "/?#"):
		return "", false, errors.New("has a path: write the host only")
	case strings.Contains(e, "@"):
		return "", false, errors.New("has user info: write the host only")
	}
	wildcard := strings.HasPrefix(e, "*.")
	if wildcard {
		e = e[2:]
	}
	if strings.Contains(e, "*") {
		return "", false, errors.New(`has a wildcard: only a leading "*." is allowed, and it means the same as the bare domain`)
	}
	name, ip, err := fetchNormalizeHost(e)
	if err != nil {
		if !strings.HasPrefix(e, "[") && strings.Count(e, ":") == 1 ||
			strings.HasPrefix(e, "[") && !strings.HasSuffix(e, "]") {
			return "", false, errors.New("has a port: write the host only")
		}
		return "", false, err
	}
	if wildcard && ip.IsValid() {
		return "", false, errors.New(`"*." before an IP address`)
	}
	return name, ip.IsValid(), nil
}

// fetchNormalizeHost checks a host (a name or an IP literal, IPv6 with or without
// brackets) and returns its canonical form: a lower-case name without a
// trailing dot, or the IP address (IPv4-mapped IPv6 unmapped) and its text.
func fetchNormalizeHost(h string) (name string, ip netip.Addr, err error) {
	if strings.HasPrefix(h, "[") || strings.HasSuffix(h, "]") {
		inner, ok := strings.CutPrefix(h, "[")
		inner, ok2 := strings.CutSuffix(inner, "]")
		a, perr := netip.ParseAddr(inner)
		if !ok || !ok2 || perr != nil || !a.Is6() {
			return "", netip.Addr{}, errors.New("brackets must hold an IPv6 address")
		}
		h = inner
	}
	if a, perr := netip.ParseAddr(h); perr == nil {
		if a.Zone() != "" {
			return "", netip.Addr{}, errors.New("IPv6 zones are not allowed")
		}
		a = a.Unmap()
		return a.String(), a, nil
	}
	if strings.Contains(h, ":") {
		return "", netip.Addr{}, errors.New("not a valid host name or IP address")
	}
	if !utf8.ValidString(h) {
		return "", netip.Addr{}, errors.New("not valid UTF-8")
	}
	name = strings.ToLower(strings.TrimSuffix(h, "."))
	if name == "" || len(name) > 253 {
		return "", netip.Addr{}, errors.New("not a valid host name")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", netip.Addr{}, errors.New("not a valid host name (empty or overlong label)")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if c >= 0x80 {
				return "", netip.Addr{}, errors.New("non-ASCII host names must be written in their xn-- form")
			}
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", netip.Addr{}, fmt.Errorf("invalid character %q in host name", c)
			}
		}
	}
	// Browsers and C resolvers read "2130706433", "0x7f.1" or "0177.0.0.1"
	// as IPv4 addresses. Refuse such names instead of guessing.
	if fetchNumericLabel(labels[len(labels)-1]) {
		return "", netip.Addr{}, errors.New("looks like a numeric IP address: write IPv4 addresses as four decimal numbers")
	}
	return name, netip.Addr{}, nil
}

// fetchNumericLabel reports whether l is a decimal, octal or 0x-hex number.
func fetchNumericLabel(l string) bool {
	if hex, ok := strings.CutPrefix(l, "0x"); ok {
		for i := 0; i < len(hex); i++ {
			c := hex[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

// fetchAddrRange is a block of addresses refused unless the host is listed
// exactly, with the reason shown to the agent.
type fetchAddrRange struct {
	prefix netip.Prefix
	reason string
}

var fetchRefusedV4 = []fetchAddrRange{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT) address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.169.254/32"), "the cloud metadata address (link-local)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a reserved (IETF protocol) address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a reserved (6to4 relay) address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("255.255.255.255/32"), "the broadcast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
}

var fetchRefusedV6 = []fetchAddrRange{
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("2001::/23"), "a reserved (IETF protocol) address"},
	{netip.MustParsePrefix("3fff::/20"), "a documentation address"},
	{netip.MustParsePrefix("fc00::/7"), "a private address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

var (
	fetchIPv4Compatible = netip.MustParsePrefix("::/96")
	fetchNAT64          = netip.MustParsePrefix("64:ff9b::/96")
	fetchSixToFour      = netip.MustParsePrefix("2002::/16")
	fetchGlobalUnicast  = netip.MustParsePrefix("2000::/3")
)

// fetchRefusedAddrReason says why a connection to a is refused when the host is
// not listed exactly ("a loopback address"), or "" when a is a public
// address. IPv6 forms that embed an IPv4 address (IPv4-mapped, -compatible,
// NAT64, 6to4) are judged by the embedded address.
func fetchRefusedAddrReason(a netip.Addr) string {
	if !a.IsValid() {
		return "an invalid address"
	}
	a = a.WithZone("")
	if a.Is4In6() {
		if r := fetchRefusedAddrReason(a.Unmap()); r != "" {
			return r + " (IPv4-mapped)"
		}
		return ""
	}
	if a.Is4() {
		for _, r := range fetchRefusedV4 {
			if r.prefix.Contains(a) {
				return r.reason
			}
		}
		return ""
	}
	for _, r := range fetchRefusedV6 {
		if r.prefix.Contains(a) {
			return r.reason
		}
	}
	b := a.As16()
	switch {
	case fetchIPv4Compatible.Contains(a):
		v4 := netip.AddrFrom4([4]byte(b[12:16]))
		if r := fetchRefusedAddrReason(v4); r != "" {
			return r + " (IPv4-compatible)"
		}
		return "a deprecated IPv4-compatible address"
	case fetchNAT64.Contains(a):
		if r := fetchRefusedAddrReason(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
			return r + " (NAT64)"
		}
		return ""
	case fetchSixToFour.Contains(a):
		if r := fetchRefusedAddrReason(netip.AddrFrom4([4]byte(b[2:6]))); r != "" {
			return r + " (6to4)"
		}
		return ""
	case !fetchGlobalUnicast.Contains(a):
		return "not a global unicast address"
	}
	return ""
}

// fetchRefusal is a policy refusal; it matches ErrFetchRefused.
type fetchRefusal struct{ reason string }

func (r *fetchRefusal) Error() string { return ErrFetchRefused.Error() + ": " + r.reason }
func (r *fetchRefusal) Unwrap() error { return ErrFetchRefused }

func fetchRefusef(format string, args ...any) error {
	return &fetchRefusal{reason: fmt.Sprintf(format, args...)}
}

// fetchTimeoutError is a timeout; it matches context.DeadlineExceeded and is a
// net.Error with Timeout() true.
type fetchTimeoutError struct{ msg string }

func (e *fetchTimeoutError) Error() string        { return e.msg }
func (e *fetchTimeoutError) Timeout() bool        { return true }
func (e *fetchTimeoutError) Temporary() bool      { return true }
func (e *fetchTimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// fetchOneLine keeps error text on one line.
func fetchOneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
