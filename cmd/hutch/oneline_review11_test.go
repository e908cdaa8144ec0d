package main

import (
	"testing"
	"unicode/utf8"
)

// oneLine's fast path (no non-printable rune found) returns s unchanged,
// and strings.IndexFunc sees an invalid byte as U+FFFD, which is
// printable: a raw 0x9b (the 8-bit CSI, acted on by terminals not in
// UTF-8 mode) or 0x90/0x9d (DCS, OSC) reaches the terminal as is, while
// the same bytes next to an escape are replaced. The error line must be
// valid UTF-8 with no C1 control byte.
func TestReview11OneLineInvalidUTF8(t *testing.T) {
	for _, in := range []string{"open /w/\x9b31mred: no such file", "path /w/\x9d0;title\x9c: bad"} {
		got := oneLine(in)
		if !utf8.ValidString(got) {
			t.Errorf("oneLine(%q) = %q: raw C1 / invalid bytes reach the terminal", in, got)
		}
	}
}
