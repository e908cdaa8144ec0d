package policy

import (
	"strings"
	"testing"
)

// Summary shows paths through ShowPath, but host entries as written: the
// proxy's parser trims surrounding white space (strings.TrimSpace), so an
// entry with a line break or a Unicode space around it passes Normalize
// and reaches the summary raw.
func TestReview12SummaryHostsNoRawWhitespace(t *testing.T) {
	for _, h := range []string{"example.com\n", "example.com\u2028", "\u3000example.com", "example.com\r"} {
		p, err := Policy{Network: NetworkAllow, Hosts: []string{"ok.example"}, DenyHosts: []string{h}}.Normalize(t.TempDir())
		if err != nil {
			continue // refused: fine
		}
		s := p.Summary()
		if strings.ContainsAny(s, "\n\r\u2028\u3000") {
			t.Errorf("deny host %+q: Summary carries it raw: %q", h, s)
		}
	}
}
