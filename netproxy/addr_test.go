package netproxy

import (
	"net/netip"
	"strings"
	"testing"
)

func TestNonPublicReason(t *testing.T) {
	tests := []struct {
		addr string
		want string // "" for public; else a substring of the reason
	}{
		// public
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"93.184.216.34", ""},
		{"172.15.255.255", ""},
		{"172.32.0.0", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"169.253.255.255", ""},
		{"198.17.255.255", ""},
		{"198.20.0.0", ""},
		{"11.0.0.1", ""},
		{"2606:4700::1111", ""},
		{"2001:4860:4860::8888", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""},      // NAT64 of 8.8.8.8
		{"2002:808:808::1", ""},       // 6to4 of 8.8.8.8
		{"2002:0808:0808:1234::", ""}, // 6to4 of 8.8.8.8
		// loopback
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"127.1.2.3", "loopback"},
		{"::1", "loopback"},
		// private
		{"10.0.0.1", "private"},
		{"10.255.255.255", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.0.1", "private"},
		{"192.168.255.255", "private"},
		{"fc00::1", "private"},
		{"fd12:3456:789a::1", "private"},
		// link-local and metadata
		{"169.254.0.1", "link-local"},
		{"169.254.169.254", "metadata"},
		{"169.254.170.2", "metadata"},
		{"100.100.100.200", "metadata"},
		{"fd00:ec2::254", "metadata"},
		{"fd20:ce::254", "metadata"},
		{"fd00:ec2::253", "private"},
		{"fe80::1", "link-local"},
		{"febf:ffff::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		// unspecified
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		// CGNAT
		{"100.64.0.1", "CGNAT"},
		{"100.127.255.255", "CGNAT"},
		// multicast and broadcast
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"ff05::2", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"240.0.0.1", "reserved"},
		// documentation and benchmarking
		{"192.0.2.1", "documentation"},
		{"198.51.100.1", "documentation"},
		{"203.0.113.1", "documentation"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"2001:db8::1", "documentation"},
		{"192.0.0.170", "reserved"},
		// IPv4-mapped and -compatible forms
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:10.0.0.1", "private"},
		{"::ffff:169.254.169.254", "metadata"},
		{"::ffff:0.0.0.0", "unspecified"},
		{"::ffff:100.64.0.1", "CGNAT"},
		{"::ffff:255.255.255.255", "broadcast"},
		{"::127.0.0.1", "loopback"},
		{"::10.0.0.1", "private"},
		{"::8.8.8.8", "IPv4-compatible"},
		{"::ffff:0:7f00:1", "not a global unicast"}, // SIIT form
		// NAT64 embedding refused addresses
		{"64:ff9b::7f00:1", "loopback"},
		{"64:ff9b::a00:1", "private"},
		{"64:ff9b::a9fe:a9fe", "metadata"},
		{"64:ff9b:1::a00:1", "NAT64"},
		// 6to4 embedding refused addresses
		{"2002:7f00:1::", "loopback"},
		{"2002:a00:1::1", "private"},
		{"2002:c0a8:101::1", "private"},
		{"2002:a9fe:a9fe::", "metadata"},
		// other non-global IPv6
		{"fec0::1", "site-local"},
		{"100::1", "discard"},
		{"2001::1", "reserved"}, // Teredo
		{"3fff::1", "documentation"},
		{"4000::1", "not a global unicast"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			got := NonPublicReason(netip.MustParseAddr(tt.addr))
			if tt.want == "" {
				if got != "" {
					t.Errorf("%s judged %q, want public", tt.addr, got)
				}
				return
			}
			if got == "" || !strings.Contains(got, tt.want) {
				t.Errorf("%s reason = %q, want one mentioning %q", tt.addr, got, tt.want)
			}
		})
	}
	if got := NonPublicReason(netip.Addr{}); got == "" {
		t.Error("the zero Addr is public; want it refused")
	}
}
