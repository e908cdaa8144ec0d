package policy

import "testing"

// DefaultMemory is half the host's memory, whole MiB, at most 8 GiB; a
// fixed 4 GiB when the host's memory is unknown.
func TestDefaultMemoryIsHalfTheHostsUpTo8GiB(t *testing.T) {
	for _, c := range []struct {
		total uint64
		ok    bool
		want  Size
	}{
		{24 << 30, true, 8 << 30},
		{16 << 30, true, 8 << 30},
		{15 << 30, true, 15 << 29},
		{8 << 30, true, 4 << 30},
		{2<<30 - 3<<20 + 12345, true, 1<<30 - 2<<20}, // half: 1022.5 MiB and some bytes
		{1 << 62, true, 8 << 30},
		{0, true, 4 << 30},
		{16 << 30, false, 4 << 30},
	} {
		if got := memoryFor(c.total, c.ok); got != c.want {
			t.Errorf("memoryFor(%d, %v) = %v, want %v", c.total, c.ok, got, c.want)
		}
	}
}
