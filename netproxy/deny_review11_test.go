package netproxy

import (
	"net/netip"
	"testing"
)

// ::1 (loopback) and :: (unspecified) lie in ::/96 but are not
// IPv4-compatible addresses (RFC 4291 2.5.5.1 excludes them): a deny of
// an IPv4 range such as 0.0.0.0/8 or 0.0.0.0/1 must not deny [::1] that
// an allow entry names.
func TestReview11DenyEmbeddedSparesLoopbackV6(t *testing.T) {
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
