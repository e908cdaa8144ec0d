package container

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReview6HelperCPUTimeWithinServeBound (fails since e243935): normalize
// takes any CPU time from 1s up (policy sets no upper bound either), and
// before the change `--ulimit cpu=N:N+1` carried it to the container
// whatever its size. HelperArgs now passes --cpu-time=N to the helper,
// whose serveArgs parses it with bitSize 32 and refuses N > 4294967295 (a
// cpu_time of 1193047h or more): the helper exits 2 and bringUp reports
// "the helper could not start ... use a static Linux build of hutch",
// which is not the cause. Either normalize refuses such a limit with a
// config error or HelperArgs stays within what serve accepts.
func TestReview6HelperCPUTimeWithinServeBound(t *testing.T) {
	o, err := Options{Image: "i", CPUTime: 1300000 * time.Hour}.normalize()
	if err != nil {
		return // refused up front: fine
	}
	for _, a := range o.HelperArgs("ID") {
		if v, ok := strings.CutPrefix(a, "--cpu-time="); ok {
			if _, err := strconv.ParseUint(v, 10, 32); err != nil {
				t.Errorf("HelperArgs passes %s, which hutch-helper serve refuses (a whole number up to 4294967295)", a)
			}
		}
	}
}
