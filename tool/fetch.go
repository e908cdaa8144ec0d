package tool

// The web fetcher: an HTTP(S) client that only reaches the hosts an operator
// allowed, and never a private, loopback or link-local address unless an
// allow-list entry names that address. The allow-list grammar, the matcher,
// the address rules and the checked dialling are package netproxy's, the
// same the sandbox's network proxy enforces.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/cfgerr"
	"github.com/hutchsandbox/hutch/netproxy"
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

// ErrConfig matches every error about a tool setting that cannot be used:
// a bad fetch rule, a missing search key, a limit out of range. The message
// names the setting and the fix.
var ErrConfig = cfgerr.New("invalid tool configuration")

// ErrFetchRefused is wrapped by every refusal of the fetch policy: a host not
// in the allow-list, a forbidden address, scheme or redirect. The message
// names the reason and the host; a refusal by the list also matches
// netproxy.ErrRefused (and errors.As finds the *netproxy.Refusal):
//
//	fetch refused: evil.com:443 is not in the network allow-list
//	fetch refused: localhost:80 resolves to 127.0.0.1, a loopback address not in the network allow-list; add 127.0.0.1 (or a range holding it) to allow it
var ErrFetchRefused = errors.New("fetch refused")

// FetchPolicy says which URLs a Fetcher may get.
type FetchPolicy struct {
	// Allow is the host allow-list, in netproxy's entry grammar:
	// "example.com" matches that name only; "*.example.com" matches its
	// subdomains at any depth, not example.com itself; "10.0.0.7",
	// "10.0.0.0/8", "::1" and "[fd00::/8]:443" match IP-literal URLs in
	// them; ":port" narrows any entry to one port (the URL's, 80 or 443 by
	// default). Matching is case-insensitive and ignores a trailing dot. An
	// empty list allows nothing.
	//
	// Every address a host resolves to must be public, or be named by an
	// address or range entry: "localhost" needs "127.0.0.1" (or
	// "127.0.0.0/8") listed too, and an internal name resolving to 10.0.0.7
	// needs "10.0.0.7" or "10.0.0.0/8". A cloud metadata address is named
	// only by an entry for that very address.
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
	policy FetchPolicy
	list   *netproxy.List

	transport *http.Transport

	// dialer checks and dials every connection; tests replace its Resolver
	// and Dial before the first Fetch.
	dialer *netproxy.Dialer
}

// NewFetcher checks the policy, fills in its defaults and returns a Fetcher.
// A malformed allow-list entry (see netproxy.ParseEntry: empty, with a
// scheme, path or bad port, a wildcard other than a leading "*." or over a
// public suffix, a non-ASCII name) or a negative limit is an error
// matching ErrConfig and netproxy.ErrBadEntry.
func NewFetcher(p FetchPolicy) (*Fetcher, error) {
	switch {
	case p.ConnectTimeout < 0:
		return nil, fmt.Errorf("%w: negative fetch connect timeout %v", ErrConfig, p.ConnectTimeout)
	case p.ReadTimeout < 0:
		return nil, fmt.Errorf("%w: negative fetch read timeout %v", ErrConfig, p.ReadTimeout)
	case p.MaxBody < 0:
		return nil, fmt.Errorf("%w: negative fetch body limit %d", ErrConfig, p.MaxBody)
	case p.MaxRedirects < 0:
		return nil, fmt.Errorf("%w: negative fetch redirect limit %d", ErrConfig, p.MaxRedirects)
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

	list, err := netproxy.NewList(p.Allow, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: fetch %w", ErrConfig, err)
	}
	p.Allow = append([]string(nil), p.Allow...)
	f := &Fetcher{policy: p, list: list}
	netDialer := &net.Dialer{KeepAlive: 30 * time.Second}
	f.dialer = &netproxy.Dialer{
		List:     list,
		Resolver: net.DefaultResolver,
		Dial:     netDialer.DialContext,
		Timeout:  p.ConnectTimeout,
	}
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
// without brackets, no port) on port matches the allow-list. It does not
// resolve the name, so an allowed host may still be refused at fetch time
// for resolving to a non-public address no entry names.
func (f *Fetcher) Allowed(host string, port int) bool {
	return f.list.Allows(host, port)
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
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fetchRefusef("bad port %q", p)
		}
		port = n
	}
	if err := f.list.Check(u.Hostname(), port); err != nil {
		return fetchRefused(err)
	}
	return nil
}

// dialContext is the transport's only way to the network: netproxy's
// Dialer checks the host and port again (redirect targets included),
// resolves a name once, checks every address and connects to a checked
// address, never to the name.
func (f *Fetcher) dialContext(ctx context.Context, _, addr string) (net.Conn, error) {
	conn, err := f.dialer.DialContext(ctx, "tcp", addr)
	if err == nil {
		return conn, nil
	}
	if errors.Is(err, netproxy.ErrRefused) || errors.Is(err, netproxy.ErrBadHost) {
		return nil, fetchRefused(err)
	}
	if te, ok := errors.AsType[*netproxy.TimeoutError](err); ok {
		return nil, &fetchTimeoutError{te.Error()}
	}
	return nil, err
}

// fetchRefusal is a policy refusal; it matches ErrFetchRefused and, when it
// comes from netproxy, the netproxy error too.
type fetchRefusal struct {
	reason string
	cause  error // the netproxy error, or nil
}

func (r *fetchRefusal) Error() string { return ErrFetchRefused.Error() + ": " + r.reason }
func (r *fetchRefusal) Unwrap() []error {
	if r.cause == nil {
		return []error{ErrFetchRefused}
	}
	return []error{ErrFetchRefused, r.cause}
}

func fetchRefusef(format string, args ...any) error {
	return &fetchRefusal{reason: fmt.Sprintf(format, args...)}
}

// fetchRefused turns a netproxy refusal or bad-host error into a fetch
// refusal.
func fetchRefused(err error) error {
	return &fetchRefusal{reason: fetchOneLine(err.Error()), cause: err}
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
