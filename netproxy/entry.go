package netproxy

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// ErrBadEntry is wrapped by every error about a malformed allow- or
// deny-list entry (see EntryError).
var ErrBadEntry = errors.New("bad network entry")

// EntryError is a malformed entry: what was written and one line saying
// what is wrong and how to write it instead. It matches ErrBadEntry.
type EntryError struct {
	Entry  string // the entry as written
	Reason string // the problem and the fix, one line
}

// Error returns `bad network entry "ENTRY": REASON`, one line.
func (e *EntryError) Error() string {
	return fmt.Sprintf("%s %q: %s", ErrBadEntry, e.Entry, e.Reason)
}

// Unwrap returns ErrBadEntry.
func (e *EntryError) Unwrap() error { return ErrBadEntry }

// maxEntryLen bounds an entry's text: a 253-byte name, "*." and ":65535"
// fit, with room for surrounding space.
const maxEntryLen = 300

// Entry is one parsed allow- or deny-list entry: a DNS name, a wildcard
// over a domain's subdomains, or an IP address or range, each with an
// optional port. The zero Entry matches nothing. Entries are comparable:
// two entries written differently but meaning the same (case, trailing dot,
// IPv6 spelling, IPv4-mapped form) are equal.
type Entry struct {
	name     string       // lower-case DNS name without a trailing dot; "" for addresses
	wildcard bool         // the entry is "*." + name: strict subdomains of name
	prefix   netip.Prefix // address entries: the range (one address is a full-length prefix)
	cidr     bool         // written as a range, so String keeps the "/n"
	port     uint16       // 0: any port
}

// ParseEntry parses one entry (see the package documentation for the
// grammar). Surrounding white space is ignored. A malformed entry is an
// *EntryError matching ErrBadEntry, whose reason says how to fix it.
// ParseEntry(e.String()) returns e for every parsed e.
func ParseEntry(s string) (Entry, error) {
	e, reason := parseEntry(s)
	if reason != "" {
		return Entry{}, &EntryError{Entry: s, Reason: reason}
	}
	return e, nil
}

func parseEntry(s string) (Entry, string) {
	if strings.IndexByte(s, 0) >= 0 {
		return Entry{}, "contains a NUL byte; remove it"
	}
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return Entry{}, "empty entry; write a host name (example.com), a wildcard (*.example.com), an IP address or a CIDR range, each optionally with :port"
	case len(t) > maxEntryLen:
		return Entry{}, fmt.Sprintf("longer than %d bytes; host names have at most 253", maxEntryLen)
	case strings.Contains(t, "://"):
		_, rest, _ := strings.Cut(t, "://")
		return Entry{}, fmt.Sprintf("has a scheme; write the host only, as in %q", hostPart(rest))
	case strings.Contains(t, "@"):
		return Entry{}, fmt.Sprintf("has user info; write the host only, as in %q", hostPart(t))
	}

	host, portText, hasPort, bracketed, reason := splitEntry(t)
	if reason != "" {
		return Entry{}, reason
	}
	var e Entry
	if hasPort {
		p, reason := parseEntryPort(portText, host)
		if reason != "" {
			return Entry{}, reason
		}
		e.port = p
	}
	if strings.ContainsAny(host, "?#") || strings.Contains(host, "/") && !looksLikeRange(host) {
		return Entry{}, fmt.Sprintf("has a path; write the host only, as in %q", hostPart(t))
	}
	if bracketed || strings.Contains(host, "/") || strings.Contains(host, ":") {
		return parseAddrEntry(e, host, bracketed, hasPort)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		e.prefix = netip.PrefixFrom(a, a.BitLen())
		return e, ""
	}
	if host == "*" {
		return Entry{}, `"*" alone is a wildcard for every host; list the hosts you need, or *.example.com for the subdomains of a domain`
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		e.wildcard = true
		host = rest
		if _, err := netip.ParseAddr(rest); err == nil {
			return Entry{}, `"*." before an IP address; write a CIDR range such as 10.0.0.0/8`
		}
	}
	if strings.Contains(host, "*") {
		return Entry{}, `a wildcard may only be the whole leftmost label, as in *.example.com`
	}
	name, err := normalizeName(host)
	if err != nil {
		return Entry{}, err.Error()
	}
	e.name = name
	if e.wildcard {
		if ps, _ := publicsuffix.PublicSuffix(name); ps == name {
			return Entry{}, fmt.Sprintf("*.%s covers a whole public suffix (anyone can register under it); list the domains you need, as in *.example.%s", name, name)
		}
	}
	return e, ""
}

// splitEntry separates an entry's host from its port. IPv6 addresses and
// ranges take a port only inside brackets: "[::1]:80", "[fd00::/8]:443".
func splitEntry(t string) (host, port string, hasPort, bracketed bool, reason string) {
	if rest, ok := strings.CutPrefix(t, "["); ok {
		inner, after, found := strings.Cut(rest, "]")
		switch {
		case !found:
			return "", "", false, false, `unclosed "["; write IPv6 addresses as [::1] or [::1]:443`
		case after == "":
			return inner, "", false, true, ""
		case after[0] == ':':
			return inner, after[1:], true, true, ""
		case after[0] == '/':
			return "", "", false, false, fmt.Sprintf("write the prefix length inside the brackets, as in %q", "["+inner+after+"]")
		default:
			return "", "", false, false, fmt.Sprintf("unexpected %q after \"]\"; write [address] or [address]:port", after)
		}
	}
	if strings.Count(t, ":") == 1 {
		h, p, _ := strings.Cut(t, ":")
		return h, p, true, false, ""
	}
	return t, "", false, false, ""
}

// looksLikeRange reports whether h has the shape address/bits, so that a
// malformed range gets a range error rather than a path error.
func looksLikeRange(h string) bool {
	addr, _, _ := strings.Cut(h, "/")
	_, err := netip.ParseAddr(addr)
	return err == nil || strings.Contains(addr, ":")
}

func parseEntryPort(p, host string) (uint16, string) {
	if strings.ContainsAny(p, "/?#") {
		return 0, fmt.Sprintf("has a path; write the host only, as in %q", hostPart(host))
	}
	if p == "" {
		return 0, "empty port after \":\"; write host:port with a port from 1 to 65535, or the host alone for any port"
	}
	n, ok := parsePort(p)
	if !ok {
		if strings.Trim(p, "0123456789") != "" {
			return 0, fmt.Sprintf("port %q is not a number; ports are 1 to 65535 (write IPv6 addresses with a port as [::1]:443)", p)
		}
		return 0, fmt.Sprintf("port %s is out of range; ports are 1 to 65535", p)
	}
	return uint16(n), ""
}

// parsePort reads a decimal port from 1 to 65535 (at most 5 digits).
func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n >= 1 && n <= 65535
}

// parseAddrEntry parses an IP address or CIDR range entry.
func parseAddrEntry(e Entry, host string, bracketed, hasPort bool) (Entry, string) {
	if strings.Contains(host, "/") {
		p, err := netip.ParsePrefix(host)
		if err != nil {
			if strings.Contains(host, "%") {
				return Entry{}, "IPv6 zones (%...) are not allowed; write the range alone"
			}
			if strings.Count(host, "/") == 1 && strings.Contains(host[strings.IndexByte(host, '/'):], ":") {
				return Entry{}, "write IPv6 ranges with a port in brackets, as in [fd00::/8]:443"
			}
			return Entry{}, fmt.Sprintf("%q is not a CIDR range; write address/bits, as in 10.0.0.0/8 or fd00::/8", host)
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				return Entry{}, "an IPv4-mapped IPv6 range shorter than /96 is not an IPv4 range; write the IPv4 range, as in 10.0.0.0/8"
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if bracketed && !p.Addr().Is6() {
			return Entry{}, "brackets are for IPv6 ranges; write IPv4 ranges as 10.0.0.0/8 or 10.0.0.0/8:443"
		}
		if p.Bits() == 0 {
			return Entry{}, fmt.Sprintf("%s covers every address; list the ranges you need", p)
		}
		if m := p.Masked(); m != p {
			return Entry{}, fmt.Sprintf("%s has bits set past the prefix length; write %s, or %s/%d for the single address", p, m, p.Addr(), p.Addr().BitLen())
		}
		e.prefix, e.cidr = p, true
		return e, ""
	}
	a, err := netip.ParseAddr(host)
	switch {
	case err != nil && bracketed:
		return Entry{}, "brackets must hold an IPv6 address or range, as in [::1]:443"
	case err != nil && hasPort:
		return Entry{}, fmt.Sprintf("%q is not a host name or IP address", host)
	case err != nil:
		return Entry{}, fmt.Sprintf("%q is not a host name or IP address (write IPv6 addresses with a port as [::1]:443)", host)
	case a.Zone() != "":
		return Entry{}, "IPv6 zones (%...) are not allowed; write the address alone"
	case bracketed && !a.Is6():
		return Entry{}, "brackets are for IPv6 addresses; write IPv4 addresses as 10.0.0.7 or 10.0.0.7:443"
	}
	a = a.Unmap()
	e.prefix = netip.PrefixFrom(a, a.BitLen())
	return e, ""
}

// hostPart is what an entry with a path, scheme or user info probably
// meant: the text before the first "/", "?" or "#", without user info.
func hostPart(s string) string {
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// String returns the entry in its canonical form, which ParseEntry reads
// back as the same Entry: lower-case names without a trailing dot, IP
// addresses in their standard form, ":port" when the entry has one (IPv6
// inside brackets).
func (e Entry) String() string {
	var host string
	switch {
	case e.name != "" && e.wildcard:
		host = "*." + e.name
	case e.name != "":
		host = e.name
	case !e.prefix.IsValid():
		return ""
	case e.cidr:
		host = e.prefix.String()
	default:
		host = e.prefix.Addr().String()
	}
	if e.port == 0 {
		return host
	}
	if e.name == "" && e.prefix.Addr().Is6() {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(int(e.port))
}

// Port returns the entry's port, or 0 when it covers every port.
func (e Entry) Port() int { return int(e.port) }

// Matches reports whether the entry covers host (a name, or an IP
// literal with or without brackets; no port) on port. Name entries match
// names only and address entries IP literals only: an address entry does
// not match a name that resolves into it (see Contains). A malformed host
// or a port outside 1-65535 matches nothing.
func (e Entry) Matches(host string, port int) bool {
	name, ip, err := normalizeHost(host)
	if err != nil || port < 1 || port > 65535 {
		return false
	}
	if ip.IsValid() {
		return e.Contains(ip, port)
	}
	return e.matchName(name, uint16(port))
}

// Contains reports whether the entry is an address or range entry that
// holds a (IPv4-mapped forms unmapped) and covers port. Name entries
// contain no address.
func (e Entry) Contains(a netip.Addr, port int) bool {
	if port < 1 || port > 65535 || !e.prefix.IsValid() || !e.portOK(uint16(port)) {
		return false
	}
	return e.prefix.Contains(a.WithZone("").Unmap())
}

func (e Entry) portOK(port uint16) bool { return e.port == 0 || e.port == port }

// matchName matches a normalized name.
func (e Entry) matchName(name string, port uint16) bool {
	if e.name == "" || !e.portOK(port) {
		return false
	}
	if !e.wildcard {
		return name == e.name
	}
	return len(name) > len(e.name)+1 && strings.HasSuffix(name, e.name) && name[len(name)-len(e.name)-1] == '.'
}

// normalizeHost checks a requested host (a name, or an IP literal with or
// without brackets; no port, no wildcard) and returns its canonical form:
// the lower-case name without a trailing dot, or the address (IPv4-mapped
// IPv6 unmapped) and its text.
func normalizeHost(h string) (string, netip.Addr, error) {
	if strings.HasPrefix(h, "[") || strings.HasSuffix(h, "]") {
		inner, ok := strings.CutPrefix(h, "[")
		inner, ok2 := strings.CutSuffix(inner, "]")
		a, err := netip.ParseAddr(inner)
		if !ok || !ok2 || err != nil || !a.Is6() {
			return "", netip.Addr{}, errors.New("brackets must hold an IPv6 address")
		}
		h = inner
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", netip.Addr{}, errors.New("IPv6 zones are not allowed")
		}
		a = a.Unmap()
		return a.String(), a, nil
	}
	if strings.Contains(h, ":") {
		return "", netip.Addr{}, errors.New("not a valid host name or IP address")
	}
	name, err := normalizeName(h)
	return name, netip.Addr{}, err
}

// normalizeName checks a DNS name (no wildcard, no port) and returns it in
// lower case without a trailing dot. Labels hold letters, digits, "-" and
// "_"; names that a resolver could read as a number ("2130706433",
// "0x7f.1", "127.1") are refused rather than guessed at.
func normalizeName(h string) (string, error) {
	if strings.IndexByte(h, 0) >= 0 {
		return "", errors.New("contains a NUL byte")
	}
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			return "", errors.New(`non-ASCII host name; write its ASCII (punycode) form, whose labels start with "xn--" (bücher.de is xn--bcher-kva.de)`)
		}
	}
	name := strings.ToLower(strings.TrimSuffix(h, "."))
	if name == "" {
		return "", errors.New("empty host name; write a name such as example.com")
	}
	if len(name) > 253 {
		return "", fmt.Errorf("host name is %d bytes long; DNS names have at most 253", len(name))
	}
	var label string
	for rest, more := name, true; more; {
		label, rest, more = strings.Cut(rest, ".")
		if label == "" || len(label) > 63 {
			return "", errors.New("not a valid host name: empty label or a label longer than 63 bytes (check for \"..\")")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("invalid character %q in host name; use letters, digits, \"-\" and \"_\"", c)
			}
		}
	}
	if numericLabel(label) { // the last label
		return "", errors.New("looks like a numeric IP address; write IPv4 addresses as four decimal numbers")
	}
	return name, nil
}

// numericLabel reports whether l is a decimal, octal or 0x-hex number.
func numericLabel(l string) bool {
	digits := l
	hex := false
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		digits, hex = rest, true
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if !(c >= '0' && c <= '9' || hex && c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
