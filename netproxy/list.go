package netproxy

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// List is a parsed allow-list with its deny-list. A List is immutable and
// safe for concurrent use. A nil *List allows nothing.
type List struct {
	allow, deny entrySet
}

// entrySet indexes entries for matching: exact names and wildcard domains
// by name, address entries in order.
type entrySet struct {
	entries []Entry             // as given, duplicates removed
	names   map[string][]uint16 // exact name -> ports (0: any)
	wild    map[string][]uint16 // wildcard domain -> ports (0: any)
	addrs   []Entry             // address and range entries
}

// NewList parses the allow and deny entries (see ParseEntry). The first
// malformed entry is an error naming its list, matching ErrBadEntry:
//
//	allow-list: bad network entry "http://example.com": has a scheme; write the host only, as in "example.com"
//
// Duplicate entries are dropped. Empty lists are fine: no allow entries
// allow nothing.
func NewList(allow, deny []string) (*List, error) {
	l := &List{}
	if err := l.allow.add("allow-list", allow); err != nil {
		return nil, err
	}
	if err := l.deny.add("deny-list", deny); err != nil {
		return nil, err
	}
	return l, nil
}

func (s *entrySet) add(what string, entries []string) error {
	for _, text := range entries {
		e, err := ParseEntry(text)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if s.has(e) {
			continue
		}
		s.entries = append(s.entries, e)
		switch {
		case e.name == "":
			s.addrs = append(s.addrs, e)
		case e.wildcard:
			s.wild = addPort(s.wild, e.name, e.port)
		default:
			s.names = addPort(s.names, e.name, e.port)
		}
	}
	return nil
}

func (s *entrySet) has(e Entry) bool {
	for _, x := range s.entries {
		if x == e {
			return true
		}
	}
	return false
}

func addPort(m map[string][]uint16, name string, port uint16) map[string][]uint16 {
	if m == nil {
		m = make(map[string][]uint16)
	}
	m[name] = append(m[name], port)
	return m
}

func portsCover(ports []uint16, port uint16) bool {
	for _, p := range ports {
		if p == 0 || p == port {
			return true
		}
	}
	return false
}

// matchName reports whether a normalized name matches an exact or
// wildcard entry: the name itself, then each parent domain for wildcards.
func (s *entrySet) matchName(name string, port uint16) bool {
	if portsCover(s.names[name], port) {
		return true
	}
	if len(s.wild) == 0 {
		return false
	}
	for rest := name; ; {
		_, parent, ok := strings.Cut(rest, ".")
		if !ok {
			return false
		}
		if portsCover(s.wild[parent], port) {
			return true
		}
		rest = parent
	}
}

// matchAddr reports whether an address entry holds a on port; with
// exactOnly, only an entry for the single address counts.
func (s *entrySet) matchAddr(a netip.Addr, port uint16, exactOnly bool) bool {
	for _, e := range s.addrs {
		if e.portOK(port) && e.prefix.Contains(a) && (!exactOnly || e.prefix.IsSingleIP()) {
			return true
		}
	}
	return false
}

// Allows reports whether host (a name, or an IP literal with or without
// brackets; no port) on port matches an allow entry and no deny entry. It
// does not resolve names: a name it allows may still be refused when
// dialled, for resolving to a non-public address no entry names or to a
// denied one (see Dialer). A malformed host or a port outside 1-65535 is
// not allowed.
func (l *List) Allows(host string, port int) bool {
	return l.Check(host, port) == nil
}

// Check is Allows with the reason: nil when host on port is allowed, a
// *Refusal (matching ErrRefused) when the list refuses it, or a *HostError
// (matching ErrBadHost) when host or port is malformed. Like Allows, it
// does not resolve names.
func (l *List) Check(host string, port int) error {
	name, ip, err := normalizeHost(host)
	if err != nil {
		return &HostError{Host: host, Reason: err.Error()}
	}
	if port < 1 || port > 65535 {
		return &HostError{Host: host, Reason: fmt.Sprintf("port %d is out of range; ports are 1 to 65535", port)}
	}
	if r := l.check(name, ip, uint16(port)); r != nil {
		return r
	}
	return nil
}

// check applies the entries to a normalized host.
func (l *List) check(name string, ip netip.Addr, port uint16) *Refusal {
	r := &Refusal{Host: name, Port: int(port)}
	if l == nil {
		return r
	}
	if ip.IsValid() {
		switch {
		case l.deniesAddr(ip, port):
			r.Denied = true
			return r
		case l.allow.matchAddr(ip, port, false):
			return nil
		}
		return r
	}
	switch {
	case l.deny.matchName(name, port):
		r.Denied = true
		return r
	case l.allow.matchName(name, port):
		return nil
	}
	return r
}

// NamesAddr reports whether an allow entry names the address a on port:
// the address itself or a range holding it (IPv4-mapped forms unmapped).
// This is what lets a name resolve to a non-public address. A cloud
// metadata address (see NonPublicReason) is named only by an entry for
// that very address, never by a range around it. Deny entries are not
// consulted (see DeniesAddr).
func (l *List) NamesAddr(a netip.Addr, port int) bool {
	if l == nil || port < 1 || port > 65535 || !a.IsValid() {
		return false
	}
	a = a.WithZone("").Unmap()
	_, metadata := classify(a)
	return l.allow.matchAddr(a, uint16(port), metadata)
}

// DeniesAddr reports whether a deny entry holds the address a on port:
// a itself (IPv4-mapped forms unmapped), or the IPv4 address an
// IPv4-compatible, NAT64 or 6to4 form of it carries, which reaches that
// host all the same where the network translates. Deny ranges apply to
// the addresses names resolve to as well as to IP literals.
func (l *List) DeniesAddr(a netip.Addr, port int) bool {
	if l == nil || port < 1 || port > 65535 || !a.IsValid() {
		return false
	}
	return l.deniesAddr(a.WithZone("").Unmap(), uint16(port))
}

func (l *List) deniesAddr(a netip.Addr, port uint16) bool {
	if l.deny.matchAddr(a, port, false) {
		return true
	}
	v4, _, ok := embeddedV4(a)
	return ok && l.deny.matchAddr(v4, port, false)
}

// Entries returns copies of the allow and deny entries, in the order
// given, without duplicates.
func (l *List) Entries() (allow, deny []Entry) {
	if l == nil {
		return nil, nil
	}
	return append([]Entry(nil), l.allow.entries...), append([]Entry(nil), l.deny.entries...)
}

// String summarizes the list for people and policy descriptions, as in
// "allow example.com, *.example.com:443; deny ads.example.com", or
// "allow nothing". Entries are in their canonical form.
func (l *List) String() string {
	allow, deny := l.Entries()
	if len(allow) == 0 {
		return "allow nothing"
	}
	var b strings.Builder
	b.WriteString("allow ")
	writeEntries(&b, allow)
	if len(deny) > 0 {
		b.WriteString("; deny ")
		writeEntries(&b, deny)
	}
	return b.String()
}

func writeEntries(b *strings.Builder, es []Entry) {
	for i, e := range es {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.String())
	}
}

// hostPort joins a normalized host and a port ("[::1]:80" for IPv6).
func hostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}
