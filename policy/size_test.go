package policy_test

import (
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/policy"
)

func TestParseSize(t *testing.T) {
	good := map[string]policy.Size{
		"4096": 4096, "1k": 1024, "1K": 1024, "1KiB": 1024, "1kb": 1024, "512M": 512 << 20, "512MiB": 512 << 20,
		"1.5G": 3 << 29, "2g": 2 << 30, "1T": 1 << 40, "0": 0, " 8 M ": 8 << 20, "10b": 10,
	}
	for in, want := range good {
		if got, err := policy.ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "-1M", "1X", "1e9", "lots", "1.2.3G", "99999999999T"} {
		if _, err := policy.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
	for _, s := range []policy.Size{512 << 20, 1 << 30, 4097, 3 << 10} {
		b, _ := s.MarshalText()
		if back, err := policy.ParseSize(string(b)); err != nil || back != s {
			t.Errorf("%d -> %q -> %d, %v", s, b, back, err)
		}
	}
	if s := policy.Size(512 << 20).String(); s != "512 MiB" {
		t.Errorf("String = %q", s)
	}
}

// A byte count below 1 is an error, never 0 ("no limit"): --memory 0.5
// or "file_size: 0.9" do not silently remove the limit.
// Origin: review 5.
func TestParseSizeBelowOneByteIsNotNoLimit(t *testing.T) {
	for _, in := range []string{"0.5", "0.99", "0.9b", "0x1p-2"} {
		if v, err := policy.ParseSize(in); err == nil && v == 0 {
			t.Errorf("ParseSize(%q) = 0 (no limit), nil; want an error", in)
		}
	}
	pol, err := policy.Load(policyFile(t, "limits: {memory: 0.5, file_size: 0.9}\n"))
	if err == nil && (pol.Limits.Memory == 0 || pol.Limits.FileSize == 0) {
		t.Errorf("limits 0.5 and 0.9 loaded as no limit: %+v", pol.Limits)
	}
}

// ParseSize("nan") is an error (not a negative Size that a later message
// could not name the input of).
// Origin: review 5.
func TestParseSizeRefusesNaN(t *testing.T) {
	for _, in := range []string{"nan", "NaN", "nanK"} {
		if v, err := policy.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, nil; want an error naming %q", in, v, in)
		}
	}
}

// FuzzParseSize: no input may parse to a negative size, or to 0 unless it
// writes zero; what parses round-trips through MarshalText.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "4096", "1.5G", "512MiB", " 8 M ", "10b", "0.5", "nan", "0x1p-2", "1_6M", "inf", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := policy.ParseSize(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("ParseSize(%q) = %d: negative without an error", s, v)
		}
		if v == 0 && strings.ContainsAny(s, "123456789") && !strings.ContainsAny(strings.ToLower(s), "x") {
			t.Fatalf("ParseSize(%q) = 0 (no limit) for a nonzero number", s)
		}
		b, _ := v.MarshalText()
		if w, err := policy.ParseSize(string(b)); err != nil || w != v {
			t.Fatalf("ParseSize(%q) = %d; MarshalText %q reads back as %d, %v", s, v, b, w, err)
		}
	})
}
