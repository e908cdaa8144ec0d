package helper

import (
	"math"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/policy"
)

// Review 14 found that rlimits rounds the CPU time up to whole seconds as
// (CPUTime + 999_999_999) / 1e9 in int64, which wraps for a duration
// within a second of the largest (time.ParseDuration takes
// 2562047h47m16.854775807s; the isolated policy, unlike the container
// tier's MaxCPUSeconds, sets no upper bound). The RLIMIT_CPU set is then
// 18446744064486179581 s, and CheckHardLimits says so: under `ulimit -t
// 100`, `hutch run --cpu-time 2562047h47m16.854775807s -- true` says
// "needs a hard limit of 18446744064486179582 s". Fix: round without
// overflow (secs := CPUTime / time.Second, plus one when there is a
// remainder), or bound cpu_time in Normalize as the container tier does.
func TestReview14CPUSecondsDoNotWrap(t *testing.T) {
	for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, 1500 * time.Millisecond} {
		want := uint64(d / time.Second)
		if d%time.Second != 0 {
			want++
		}
		for _, r := range rlimits(policy.Limits{CPUTime: d}, true) {
			if r.resource == unix.RLIMIT_CPU && (r.cur != want || r.max != want+1) {
				t.Errorf("cpu time %v: RLIMIT_CPU %d/%d, want %d/%d", d, r.cur, r.max, want, want+1)
			}
		}
	}
}
