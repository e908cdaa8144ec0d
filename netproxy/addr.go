package netproxy

import (
	"net/netip"
	"sync"
)

// addrRange is a block of addresses a host may reach only when an entry
// names them, with the reason shown when it does not.
type addrRange struct {
	prefix   netip.Prefix
	reason   string
	metadata bool // a cloud metadata service: only an entry for the address itself names it
}

// The more specific ranges come first: the first match gives the reason.
// The tables (and the prefixes below) are parsed on first use, not at
// program start: most hutch processes never judge an address.
var nonPublicV4 = sync.OnceValue(func() []addrRange {
	return []addrRange{
		{netip.MustParsePrefix("169.254.169.254/32"), "the cloud metadata address (link-local)", true},
		{netip.MustParsePrefix("169.254.170.2/32"), "the container metadata address (AWS ECS, link-local)", true},
		{netip.MustParsePrefix("100.100.100.200/32"), "the cloud metadata address (Alibaba Cloud, shared CGNAT range)", true},
		// Public address space, but every Azure VM reaches it: the
		// WireServer hands out the VM agent's goal state and extension
		// settings, protected ones included.
		{netip.MustParsePrefix("168.63.129.16/32"), "the cloud platform address (Azure WireServer)", true},
		{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified address", false},
		{netip.MustParsePrefix("10.0.0.0/8"), "a private address", false},
		{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT) address", false},
		{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address", false},
		{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address", false},
		{netip.MustParsePrefix("172.16.0.0/12"), "a private address", false},
		{netip.MustParsePrefix("192.0.0.0/24"), "a reserved (IETF protocol) address", false},
		{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address", false},
		{netip.MustParsePrefix("192.88.99.0/24"), "a reserved (6to4 relay) address", false},
		{netip.MustParsePrefix("192.168.0.0/16"), "a private address", false},
		{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address", false},
		{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address", false},
		{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address", false},
		{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address", false},
		{netip.MustParsePrefix("255.255.255.255/32"), "the broadcast address", false},
		{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address", false},
	}
})

var nonPublicV6 = sync.OnceValue(func() []addrRange {
	return []addrRange{
		{netip.MustParsePrefix("fd00:ec2::254/128"), "the cloud metadata address (AWS, IPv6)", true},
		{netip.MustParsePrefix("fd20:ce::254/128"), "the cloud metadata address (Google Cloud, IPv6)", true},
		{netip.MustParsePrefix("::/128"), "an unspecified address", false},
		{netip.MustParsePrefix("::1/128"), "a loopback address", false},
		{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address", false},
		{netip.MustParsePrefix("100::/64"), "a discard-only address", false},
		{netip.MustParsePrefix("2001:db8::/32"), "a documentation address", false},
		{netip.MustParsePrefix("2001::/23"), "a reserved (IETF protocol) address", false},
		{netip.MustParsePrefix("3fff::/20"), "a documentation address", false},
		{netip.MustParsePrefix("fc00::/7"), "a private address", false},
		{netip.MustParsePrefix("fe80::/10"), "a link-local address", false},
		{netip.MustParsePrefix("fec0::/10"), "a site-local address", false},
		{netip.MustParsePrefix("ff00::/8"), "a multicast address", false},
	}
})

// v6Forms are the IPv6 blocks judged by their form rather than a table.
var v6Forms = sync.OnceValue(func() (f struct{ ipv4Compatible, nat64, sixToFour, globalUnicast netip.Prefix }) {
	f.ipv4Compatible = netip.MustParsePrefix("::/96")
	f.nat64 = netip.MustParsePrefix("64:ff9b::/96")
	f.sixToFour = netip.MustParsePrefix("2002::/16")
	f.globalUnicast = netip.MustParsePrefix("2000::/3")
	return f
})

// NonPublicReason says why a is not a public address — "a loopback
// address", "a private address", "the cloud metadata address
// (link-local)" and so on — or returns "" for a public unicast address.
// It covers loopback, RFC 1918 and fc00::/7 private, link-local,
// unspecified, shared (CGNAT, 100.64.0.0/10), the known cloud metadata
// addresses (169.254.169.254, 169.254.170.2, 100.100.100.200, Azure's
// WireServer 168.63.129.16, fd00:ec2::254, fd20:ce::254), multicast,
// broadcast, documentation, benchmarking and reserved blocks, and IPv6
// outside 2000::/3. IPv6 forms that embed an IPv4 address (IPv4-mapped,
// IPv4-compatible, NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by the
// embedded address. The zero Addr is "an invalid address". It does not
// know about addresses that are private only by a site's own routing.
func NonPublicReason(a netip.Addr) string {
	r, _ := classify(a)
	return r
}

// classify returns NonPublicReason(a) and whether a is a cloud metadata
// address (in any embedding).
func classify(a netip.Addr) (reason string, metadata bool) {
	if !a.IsValid() {
		return "an invalid address", false
	}
	a = a.WithZone("")
	if a.Is4In6() {
		return embedded(a.Unmap(), "IPv4-mapped")
	}
	if a.Is4() {
		return lookupRange(nonPublicV4(), a)
	}
	if r, m := lookupRange(nonPublicV6(), a); r != "" {
		return r, m
	}
	if v4, form, ok := embeddedV4(a); ok {
		return embedded(v4, form)
	}
	if !v6Forms().globalUnicast.Contains(a) {
		return "not a global unicast address", false
	}
	return "", false
}

// embeddedV4 returns the IPv4 address an IPv6 address a (not IPv4-mapped:
// unmap that first) carries in the IPv4-compatible (::/96), NAT64
// (64:ff9b::/96) or 6to4 (2002::/16) form, and the form's name.
func embeddedV4(a netip.Addr) (v4 netip.Addr, form string, ok bool) {
	if !a.Is6() {
		return v4, "", false
	}
	b := a.As16()
	f := v6Forms()
	switch {
	case f.ipv4Compatible.Contains(a) && a != netip.IPv6Unspecified() && a != netip.IPv6Loopback():
		// (:: and ::1 are not forms of 0.0.0.0 and 0.0.0.1: RFC 4291.)
		return netip.AddrFrom4([4]byte(b[12:16])), "IPv4-compatible", true
	case f.nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), "NAT64", true
	case f.sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), "6to4", true
	}
	return v4, "", false
}

func lookupRange(ranges []addrRange, a netip.Addr) (string, bool) {
	for _, r := range ranges {
		if r.prefix.Contains(a) {
			return r.reason, r.metadata
		}
	}
	return "", false
}

// embedded judges an IPv6 address by the IPv4 address v4 it embeds in
// form (as embeddedV4 names it, or "IPv4-mapped"). The deprecated form,
// IPv4-compatible, is refused even around a public address.
func embedded(v4 netip.Addr, form string) (string, bool) {
	r, m := lookupRange(nonPublicV4(), v4)
	switch {
	case r != "":
		return r + " (" + form + ")", m
	case form == "IPv4-compatible":
		return "a deprecated " + form + " address", false
	}
	return "", false
}
