package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes. In files and flags it is written as a plain
// number of bytes or with a unit: K, M, G, T (powers of 1024; "KiB", "MB"
// and "kb" spellings are accepted and mean the same).
type Size int64

var units = []struct {
	suffix string
	mult   int64
}{
	{"tib", 1 << 40}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
	{"tb", 1 << 40}, {"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10},
	{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10},
	{"b", 1}, {"", 1},
}

// ParseSize reads "512MiB", "1G", "4096".
func ParseSize(s string) (Size, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	for _, u := range units {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok || num == "" {
			continue
		}
		num = strings.TrimSpace(num)
		n, err := strconv.ParseFloat(num, 64)
		if err != nil || n < 0 || math.IsNaN(n) || strings.ContainsAny(num, "eEpPxX") {
			break
		}
		v := n * float64(u.mult)
		switch {
		case v > float64(1<<62):
			return 0, fmt.Errorf("size %q is too large", s)
		case v != math.Trunc(v):
			// 0.5 would read as 0, which means no limit at all.
			return 0, fmt.Errorf("size %q is not a whole number of bytes: give bytes or a larger unit's fraction (0.5G)", s)
		}
		return Size(v), nil
	}
	return 0, fmt.Errorf("bad size %q: write a number of bytes, optionally with K, M, G or T (512M, 1G)", s)
}

// String writes the size with the largest unit that divides it.
func (s Size) String() string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if int64(s) >= u.mult && int64(s)%u.mult == 0 {
			return fmt.Sprintf("%d %s", int64(s)/u.mult, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", int64(s))
}

// UnmarshalText lets YAML and flags use units.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalText writes a form ParseSize reads back.
func (s Size) MarshalText() ([]byte, error) {
	str := s.String()
	if n, ok := strings.CutSuffix(str, " bytes"); ok {
		return []byte(n), nil
	}
	return []byte(strings.ReplaceAll(str, " ", "")), nil
}
