// Package netproxy enforces a network allow-list: it parses and matches
// host entries, judges the addresses a host resolves to, dials only what
// it checked, and runs a filtering egress proxy that speaks HTTP CONNECT,
// plain HTTP forwarding and SOCKS5 on one listener and reports the hosts
// it refused.
//
// # Entries
//
// An entry is host[:port]; without a port it covers every port.
//
//	example.com          the name exactly (case-insensitive, a trailing dot ignored)
//	*.example.com        every subdomain of example.com at any depth, not example.com itself
//	10.0.0.7             that address (IPv4-mapped IPv6 forms are the same address)
//	10.0.0.0/8           every address in the range
//	::1, fd00::/8        IPv6 addresses and ranges without a port
//	[::1]:8080           IPv6 with a port: brackets around the address
//	[fd00::/8]:443       IPv6 range with a port: brackets around the whole range
//	example.com:443      any of the above with a port (1-65535)
//
// Names are ASCII letters, digits, "-" and "_": a non-ASCII name is
// refused with a hint to write its punycode (xn--) form; it is not
// converted. Names a resolver could read as a number ("2130706433",
// "127.1") are refused. A wildcard is only the whole leftmost label and
// never covers a bare public suffix (*.com, *.co.uk, *.github.io) or a
// single label (*.internal). A range of every address (0.0.0.0/0, ::/0)
// is refused too. Deny entries use the same grammar and win over allow
// entries; deny ranges also apply to the addresses names resolve to.
//
// # Decisions
//
// A connection to host:port is allowed when an allow entry matches the
// host as requested (a name matches name entries, an IP literal matches
// address and range entries) and no deny entry does; then every address
// the host resolves to must be public (see NonPublicReason), or be named
// by an allow entry (an address or a range holding it; the cloud metadata
// addresses only by the address itself), and must not be in a deny range.
// The connection goes to a checked address; the name is never resolved
// again.
package netproxy
