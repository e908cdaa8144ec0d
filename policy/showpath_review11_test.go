package policy

import (
	"strings"
	"testing"
)

// ShowPath promises a path "cannot end a sentence or hide text" unless
// quoted. Hangul fillers (U+3164, U+115F, U+1160, U+FFA0) are letters
// (Lo) that render as blank space and are default-ignorable; Lisu tone
// letters (U+A4F8 "ꓸ", U+A4F9 "ꓹ", U+A4FD "ꓽ") are letters (Lm) drawn
// as a full stop, comma and colon. Unquoted, they forge a sentence.
func TestReview11ShowPathInvisibleAndDotLetters(t *testing.T) {
	for _, p := range []string{
		"/w\uA4F8\u3164Has\u3164full\u3164network\u3164access",
		"/home/u/proj\u3164",
		"/home/u/a\u115Fb",
		"/home/u/a\u1160b",
		"/home/u/a\uFFA0b",
	} {
		got := ShowPath(p)
		if !strings.HasPrefix(got, `"`) {
			t.Errorf("ShowPath(%+q) = %s: shown unquoted", p, got)
		}
		pol := Policy{Write: []string{p}}
		if s := pol.Summary(); strings.Contains(s, p) {
			t.Errorf("Summary shows %+q as is: %s", p, s)
		}
	}
}
