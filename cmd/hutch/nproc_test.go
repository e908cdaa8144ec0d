package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// Without a pids cgroup (hutch not root, no delegated subtree) a process
// limit falls back to RLIMIT_NPROC, which counts every task in the
// sandbox: in a session, hutch's helpers hold about 20 threads. A limit
// below that fails the command with a reason (RLIMIT_NPROC counts every
// task; a pids cgroup would not), not a bare "resource temporarily
// unavailable". Run as nobody, from a copy of this test binary (which is
// also hutch's CLI, see hutchCommand).
func TestRunProcessLimitFallbackSaysWhy(t *testing.T) {
	run := asNobody(t)
	session := []string{"run", "--network", "allow=example.com"}
	// Controls: the same session with room, and a one-shot (whose PID 1
	// is a single task) under the small limit, both run.
	if code, out := run("", append(session, "--pids", "64", "--", "sh", "-c", "echo ran")...); code != 0 || !strings.Contains(out, "ran") {
		t.Fatalf("control, a session with --pids 64 as nobody: exit %d, %q", code, out)
	}
	if code, out := run("", "run", "--pids", "8", "--", "sh", "-c", "echo ran"); code != 0 || !strings.Contains(out, "ran") {
		t.Fatalf("control, a one-shot with --pids 8 as nobody: exit %d, %q", code, out)
	}
	code, out := run("", append(session, "--pids", "8", "--", "sh", "-c", "echo ran")...)
	if code != 126 || !strings.Contains(out, "RLIMIT_NPROC counts every task in the sandbox") || !strings.Contains(out, "pids cgroup") {
		t.Errorf("a session with --pids 8 as nobody: exit %d, %q; want 126 saying why", code, out)
	}
}

// asNobody returns a function running hutch (a copy of this test binary)
// as nobody with the given arguments, from a directory of its own; with
// cgroup set, from inside that cgroup directory (entered as root, before
// setpriv drops to nobody). It needs root and setpriv (util-linux).
func asNobody(t *testing.T) func(cgroup string, args ...string) (int, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "needs root, to run hutch as nobody where no cgroup is hutch's")
	}
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "the isolated tier: %v", err)
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		testenv.Missing(t, "setpriv (util-linux): %v", err)
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
	return func(cgroup string, args ...string) (int, string) {
		argv := append([]string{bin}, testenv.ProgramArgv(args...)[1:]...) // the copy, as the program "hutch"
		c := exec.Command("/bin/sh", append([]string{"-c", `[ -z "$1" ] || echo $$ > "$1/cgroup.procs" || exit 99; shift; exec "$@"`,
			"sh", cgroup, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}, argv...)...)
		c.Dir = dir
		c.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, testenv.ProgramEnv("hutch")}
		return exitAndOutput(t, c)
	}
}

// A runner that dies before it answers (here: its Go runtime cannot make
// a thread, under a pids cgroup around hutch with little room) fails the
// session at once: the session's init does not wait for its answer until
// the command's timeout (it holds no end of the runner's socket itself).
// And the death of the exec helper it falls back to, which cannot make its
// threads either, is a one-line error (exit 125), not its Go runtime's
// 160-line crash on the command's stderr with the result reading as
// killed (exit 137).
func TestSessionDoesNotWaitForADeadRunner(t *testing.T) {
	run := asNobody(t)
	root := "/sys/fs/cgroup/pids"
	if _, err := os.Stat(root + "/cgroup.procs"); err != nil {
		testenv.Missing(t, "a cgroup v1 pids hierarchy at %s: %v", root, err)
	}
	cg := filepath.Join(root, fmt.Sprintf("hutch-test-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() { // once the sandbox's processes have gone
		for deadline := time.Now().Add(10 * time.Second); os.Remove(cg) != nil && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
	}()
	if err := os.WriteFile(cg+"/pids.max", []byte("23"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, out := run(cg, "run", "--timeout", "20s", "--pids", "64", "--network", "allow=example.com", "--", "sh", "-c", "echo ran")
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("a session whose runner could not start took %v (exit %d) for a 20 s timeout: it waited for the dead runner; output %.300q", d, code, out)
	}
	switch {
	case code == 0 && out == "ran\n": // the exec helper found its threads after all
	case code != 125 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "exec helper died"):
		t.Errorf("want the command's output or a one-line error naming the exec helper's death (exit 125), got exit %d: %.600q", code, out)
	}
	if ev, _ := os.ReadFile(cg + "/pids.events"); !strings.Contains(string(ev), "max ") || strings.Contains(string(ev), "max 0") {
		t.Errorf("control: the cgroup refused no fork (%q), so nothing was tested; exit %d, %.300q", ev, code, out)
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
