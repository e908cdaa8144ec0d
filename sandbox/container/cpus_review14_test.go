package container

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
)

// Review 14 (asked: are other counts still read in another base or
// guessed at?) found that --cpus is pflag's Float64Var, i.e.
// strconv.ParseFloat, which takes "NaN", "Inf" and hex floats ("0x1p1"
// is 2). normalize refuses only CPUs < 0, and RunArgs adds --cpus only
// for CPUs > 0: NaN passes both tests as false, so `--cpus NaN` gives a
// container with no CPU bound and no word — a silent fallback to
// something wider. (+Inf reaches the runtime as "--cpus +Inf".) Fix:
// refuse a CPU share that is NaN or infinite in normalize (and read the
// flag with a decimal-only parser, as the counts now are).
func TestReview14CPUsNaNIsRefused(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1)} {
		o, err := Options{Image: "i", Name: "n", CPUs: v}.normalize()
		if err == nil {
			t.Errorf("CPUs %v accepted; the runtime's arguments: %q (has --cpus: %v)", v, o.RunArgs("n", "", false), slices.Contains(o.RunArgs("n", "", false), "--cpus"))
		} else if !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("CPUs %v: %v; want ErrConfig", v, err)
		}
	}
}
