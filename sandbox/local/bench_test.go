package local_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
)

// BenchmarkExecBare is the baseline: a plain os/exec run of /bin/true.
func BenchmarkExecBare(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecLocal is the same command through the local tier (new PID
// namespace, narrowed environment, bounded capture, root guard on Dir).
func BenchmarkExecLocal(b *testing.B) {
	sb := newLocalB(b)
	ctx := context.Background()
	for b.Loop() {
		r, err := sb.Exec(ctx, sandbox.Command{Args: []string{"/bin/true"}})
		if err != nil || r.ExitCode != 0 {
			b.Fatal(err, r.ExitCode)
		}
	}
}

// BenchmarkExecLocalShell runs "true" through /bin/sh -c.
func BenchmarkExecLocalShell(b *testing.B) {
	sb := newLocalB(b)
	ctx := context.Background()
	for b.Loop() {
		if _, err := sb.Exec(ctx, sandbox.Command{Shell: "true"}); err != nil {
			b.Fatal(err)
		}
	}
}
