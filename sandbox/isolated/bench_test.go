package isolated_test

import (
	"os/exec"
	"testing"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// BenchmarkForkExec is the baseline: a bare fork+exec of /bin/true.
func BenchmarkForkExec(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWarmExec runs /bin/true in an existing sandbox: the setup is
// paid once; each run still gets its own PID namespace and confinement.
func BenchmarkWarmExec(b *testing.B) {
	sb, err := isolated.New(bg, policy.Default())
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	for b.Loop() {
		r, err := sb.Exec(bg, sandbox.Command{Args: []string{"/bin/true"}})
		if err != nil || r.ExitCode != 0 {
			b.Fatal(err, r.ExitCode)
		}
	}
}

// BenchmarkOneShot builds a sandbox, runs /bin/true and tears it down.
func BenchmarkOneShot(b *testing.B) {
	for b.Loop() {
		r, err := isolated.Run(bg, policy.Default(), sandbox.Command{Args: []string{"/bin/true"}})
		if err != nil || r.ExitCode != 0 {
			b.Fatal(err, r.ExitCode)
		}
	}
}

// BenchmarkWarmRead reads a file through an existing sandbox.
func BenchmarkWarmRead(b *testing.B) {
	sb, err := isolated.New(bg, policy.Default())
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	if err := sb.Write(bg, "f.txt", make([]byte, 4096)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := sb.Read(bg, "f.txt"); err != nil {
			b.Fatal(err)
		}
	}
}
