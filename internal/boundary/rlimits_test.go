//go:build linux

package boundary

import (
	"math"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/policy"
)

// The CPU-time limit rounds up to whole seconds without wrapping, up to
// the largest duration (2562047h47m16.854775807s, which the isolated
// policy accepts): RLIMIT_CPU is that many seconds, not 2^64 less some.
// Origin: review 14.
func TestCPUSecondsDoNotWrap(t *testing.T) {
	for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, 1500 * time.Millisecond} {
		want := uint64(d / time.Second)
		if d%time.Second != 0 {
			want++
		}
		for _, r := range Rlimits(policy.Limits{CPUTime: d}, true) {
			if r.Resource == unix.RLIMIT_CPU && (r.Cur != want || r.Max != want+1) {
				t.Errorf("cpu time %v: RLIMIT_CPU %d/%d, want %d/%d", d, r.Cur, r.Max, want, want+1)
			}
		}
	}
}
