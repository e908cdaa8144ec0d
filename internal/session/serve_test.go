//go:build linux

package session

import (
	"strings"
	"testing"
)

// firstLine turns a child helper's dying words into one printable line.
func TestFirstLine(t *testing.T) {
	long := strings.Repeat("x", 299) + "é" // the 300-byte cut falls inside é
	cases := []struct{ in, want string }{
		{"", ""},
		{"\n \n\t\n", ""},
		{"runtime: failed to create new OS thread (have 2 already; errno=11)\nruntime: may need to increase max user processes (ulimit -u)\nfatal error: newosproc\n", "runtime: failed to create new OS thread (have 2 already; errno=11)"},
		{"\n  fatal error: x  \nmore", "fatal error: x"},
		{"a\x1b[2Jb\rc\x00d", "a?[2Jb?c?d"},
		{"bad \xff byte", "bad ? byte"},
		{long + "tail", strings.Repeat("x", 299) + "?"},
	}
	for _, c := range cases {
		if got := firstLine([]byte(c.in)); got != c.want {
			t.Errorf("firstLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
