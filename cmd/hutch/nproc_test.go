package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// Without a pids cgroup (hutch not root, no delegated subtree) a process
// limit falls back to RLIMIT_NPROC, which counts every task in the
// sandbox: in a session, hutch's helpers hold about 20 threads. A limit
// below that used to fail the command with a bare "resource temporarily
// unavailable"; it now says why and what to do. Run as nobody, from a copy
// of this test binary (which is also hutch's CLI, see review5Child).
func TestRunProcessLimitFallbackSaysWhy(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "needs root, to run hutch as nobody where no cgroup is hutch's")
	}
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "the isolated tier: %v", err)
	}
	dir := t.TempDir()
	for d := dir; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hutch")
	copyFile(t, self, bin)
	run := func(args ...string) (int, string) {
		c := exec.Command(bin, "-test.run=^$")
		c.Dir = dir
		c.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "HUTCH_REVIEW5_ARGS=" + strings.Join(args, "\x1f")}
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := c.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, string(out)
	}
	session := []string{"run", "--network", "allow=example.com"}
	// Controls: the same session with room, and a one-shot (whose PID 1
	// is a single task) under the small limit, both run.
	if code, out := run(append(session, "--pids", "64", "--", "sh", "-c", "echo ran")...); code != 0 || !strings.Contains(out, "ran") {
		t.Fatalf("control, a session with --pids 64 as nobody: exit %d, %q", code, out)
	}
	if code, out := run("run", "--pids", "8", "--", "sh", "-c", "echo ran"); code != 0 || !strings.Contains(out, "ran") {
		t.Fatalf("control, a one-shot with --pids 8 as nobody: exit %d, %q", code, out)
	}
	code, out := run(append(session, "--pids", "8", "--", "sh", "-c", "echo ran")...)
	if code != 126 || !strings.Contains(out, "RLIMIT_NPROC counts every task in the sandbox") || !strings.Contains(out, "pids cgroup") {
		t.Errorf("a session with --pids 8 as nobody: exit %d, %q; want 126 saying why", code, out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
