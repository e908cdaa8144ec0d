package container

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
)

// normalize refuses a CPU share that is NaN or infinite as a
// configuration error: NaN would fail both its own "CPUs < 0" test and
// RunArgs' "CPUs > 0", giving a container with no CPU bound and no word,
// and +Inf would reach the runtime as "--cpus +Inf".
// Origin: review 14.
func TestCPUsNaNOrInfiniteRefused(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1)} {
		o, err := Options{Image: "i", Name: "n", CPUs: v}.normalize()
		if err == nil {
			t.Errorf("CPUs %v accepted; the runtime's arguments: %q (has --cpus: %v)", v, o.RunArgs("n", "", false), slices.Contains(o.RunArgs("n", "", false), "--cpus"))
		} else if !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("CPUs %v: %v; want ErrConfig", v, err)
		}
	}
}
