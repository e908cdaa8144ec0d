package policy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/policy"
)

// Review 14 found that negativeLimit (639434d) writes every limit as a
// bare int64, so a negative CPU time — `hutch run --cpu-time -1s`, or
// cpu_time: -2s in a policy file — is reported in nanoseconds with no
// unit: "cpu time limit -1000000000 is negative". The input was -1s.
// Fix: write the CPU time as a time.Duration (and the sizes with their
// unit), as the other CPU-time errors of Normalize do.
func TestReview14NegativeCPUTimeIsNamedAsWritten(t *testing.T) {
	_, err := policy.Policy{Limits: policy.Limits{CPUTime: -time.Second}}.Normalize("/")
	if err == nil || !strings.Contains(err.Error(), "cpu time limit -1s is negative") {
		t.Errorf("a cpu time of -1s: %v; want it named as -1s", err)
	}
}
