package isolated_test

import (
	"os"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// TestReview6DenyProcStillRuns (fails on the one-shot path since
// 1f4793e): a policy that hides /proc ran its commands before the OOM
// change; now the one-shot PID 1's unconditional open of
// /proc/self/oom_score_adj (oomOps) fails after the deny mask, and every
// command is refused with "building the sandbox: opening
// /proc/self/oom_score_adj: no such file or directory". (A session never
// ran under such a policy: its helpers start from /proc/self/exe.)
func TestReview6DenyProcStillRuns(t *testing.T) {
	if os.Getenv("HUTCH_TEST_VIA_SESSION") == "1" {
		t.Skip("one-shot only: a session's helpers start from /proc/self/exe")
	}
	e := newEnv(t)
	for _, deny := range []string{"/proc", "/proc/self"} {
		pol := e.pol.Extend(policy.Policy{Deny: []string{deny}})
		r := e.runWith(t, pol, sandbox.Command{Shell: "echo ran"})
		if r.ExitCode != 0 || !strings.Contains(string(r.Stdout), "ran") {
			t.Errorf("deny %s: exit %d, %q %q", deny, r.ExitCode, r.Stdout, r.Stderr)
		}
	}
}
