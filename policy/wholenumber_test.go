package policy_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/policy"
)

// Counts are decimal: what YAML or Go's flag parsers would read in another
// base, or with separators, is refused rather than guessed at.
func TestParseWholeNumber(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"0", 0, true}, {"7", 7, true}, {"4194304", 4194304, true}, {"-3", -3, true},
		{"010", 0, false}, {"00", 0, false}, {"-0", 0, false}, {"-05", 0, false},
		{"0x20", 0, false}, {"0o17", 0, false}, {"0b11", 0, false}, {"1_000", 0, false},
		{"+5", 0, false}, {"", 0, false}, {"-", 0, false}, {" 5", 0, false}, {"5 ", 0, false},
		{"1.5", 0, false}, {"1e3", 0, false}, {"٣", 0, false}, {"99999999999999999999", 0, false},
	} {
		v, err := policy.ParseWholeNumber(c.in)
		if (err == nil) != c.ok || v != c.want {
			t.Errorf("ParseWholeNumber(%q) = %d, %v; want %d, ok %v", c.in, v, err, c.want, c.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), strconv.Quote(c.in)) || strings.Contains(err.Error(), "\n")) {
			t.Errorf("ParseWholeNumber(%q): %q does not name the input on one line", c.in, err)
		}
	}
}

// The same holds in a policy file: a count YAML reads as octal, hex or
// with separators is an error naming the line; a negative limit is named.
func TestLoadCountsAreDecimal(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"limits: {processes: 010}\n", `line 1: "010" is not a decimal`},
		{"limits: {open_files: 0x40}\n", `"0x40" is not a decimal`},
		{"nice: 0o7\n", `"0o7" is not a decimal`},
		{"limits: {processes: 1_000}\n", `"1_000" is not a decimal`},
	} {
		_, err := policy.Load(policyFile(t, c.body))
		if !errors.Is(err, policy.ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want a configuration error containing %q", c.body, err, c.want)
		}
	}
	if _, err := (policy.Policy{Limits: policy.Limits{Processes: -4}}).Normalize("/"); err == nil || !strings.Contains(err.Error(), "process limit -4 is negative") {
		t.Errorf("a negative process limit: %v; want it named", err)
	}
	pol, err := policy.Load(policyFile(t, "limits: {processes: 64, open_files: 256}\nnice: 5\n"))
	if err != nil || pol.Limits.Processes != 64 || pol.Limits.OpenFiles != 256 || pol.Nice != 5 {
		t.Errorf("decimal counts: %+v, nice %d, %v", pol.Limits, pol.Nice, err)
	}
}

// Whatever ParseWholeNumber accepts is exactly the decimal form of its
// value (no second spelling of a number gets through), and it never
// panics.
func FuzzParseWholeNumber(f *testing.F) {
	for _, s := range []string{"0", "10", "-7", "010", "0x1F", "1_0", "+1", "9223372036854775807", "-9223372036854775808", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := policy.ParseWholeNumber(s)
		if err != nil {
			return
		}
		if back := strconv.Itoa(v); back != s {
			t.Fatalf("ParseWholeNumber(%q) = %d, which is written %q", s, v, back)
		}
	})
}
