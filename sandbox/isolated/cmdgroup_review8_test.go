package isolated_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// review8Probe prints the command's pids cgroup, its open descriptors,
// then tries to move itself (and its parents) out of the commands'
// group through every descriptor of every process it can see, and
// prints its group again.
const review8Probe = `grep pids /proc/self/cgroup; echo FDS $(ls /proc/self/fd | tr '\n' ' ');
for f in /proc/[0-9]*/fd/[3-9]; do echo 0 2>/dev/null > "$f" && echo "WROTE $f"; done;
for f in /sys/fs/cgroup/pids/tasks /sys/fs/cgroup/pids/cgroup.procs /sys/fs/cgroup/cgroup.procs; do echo 0 2>/dev/null > "$f" && echo "WROTE $f"; done;
grep pids /proc/self/cgroup`

// review8PidsDirs are the sandbox groups below the pids hierarchy's
// root, by name.
func review8PidsDirs(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir("/sys/fs/cgroup/pids")
	if err != nil {
		testenv.Missing(t, "no v1 pids hierarchy: %v", err)
	}
	m := map[string]bool{}
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "hutch-") {
			m[e.Name()] = true
		}
	}
	return m
}

// review8Leaked are groups made since before that are still there and
// empty (another process's live sandbox has processes in them).
func review8Leaked(t *testing.T, before map[string]bool) []string {
	t.Helper()
	time.Sleep(1500 * time.Millisecond)
	var leaked []string
	for name := range review8PidsDirs(t) {
		if before[name] {
			continue
		}
		dir := filepath.Join("/sys/fs/cgroup/pids", name)
		var procs []byte
		_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Name() == "cgroup.procs" {
				b, _ := os.ReadFile(p)
				procs = append(procs, b...)
			}
			return nil
		})
		if len(strings.TrimSpace(string(procs))) == 0 {
			leaked = append(leaked, name)
		}
	}
	return leaked
}

// Every command of every path (one-shot, session runner, exec helper
// beside a busy runner, the init's final command of an allow-list run)
// runs in the commands' group, sees no descriptor of hutch's, and cannot
// move itself out; the groups are gone afterwards.
func TestReview8CommandsStayInCmdGroup(t *testing.T) {
	e := newEnv(t)
	before := review8PidsDirs(t)
	pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Processes: 16}})
	check := func(t *testing.T, r sandbox.Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := string(r.Stdout)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) < 3 {
			t.Fatalf("probe output %q (stderr %q)", out, r.Stderr)
		}
		for _, l := range []string{lines[0], lines[len(lines)-1]} {
			if !strings.HasSuffix(l, "/cmd") {
				t.Errorf("command's pids group %q, want .../cmd (output %q)", l, out)
			}
		}
		if strings.Contains(out, "WROTE") {
			t.Errorf("the command wrote to a group file: %q", out)
		}
		for _, l := range lines {
			if strings.HasPrefix(l, "FDS ") {
				// ls's own directory descriptor is 3.
				if f := strings.Fields(l); len(f) > 5 {
					t.Errorf("the command holds more than its standard streams: %q", l)
				}
			}
		}
	}
	t.Run("one-shot", func(t *testing.T) {
		r, err := isolated.Run(bg, pol, sandbox.Command{Shell: review8Probe, Timeout: 20 * time.Second})
		check(t, r, err)
	})
	t.Run("allow-list-final", func(t *testing.T) {
		p := pol.Extend(policy.Policy{Network: policy.NetworkAllow, Hosts: []string{"example.invalid"}})
		r, err := isolated.Run(bg, p, sandbox.Command{Shell: review8Probe, Timeout: 20 * time.Second})
		check(t, r, err)
	})
	t.Run("session", func(t *testing.T) {
		sb, err := isolated.New(bg, pol)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		r, err := sb.Exec(bg, sandbox.Command{Shell: review8Probe, Timeout: 20 * time.Second})
		check(t, r, err)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = sb.Exec(bg, sandbox.Command{Args: []string{"sleep", "2"}, Timeout: 20 * time.Second})
		}()
		time.Sleep(300 * time.Millisecond)
		r, err = sb.Exec(bg, sandbox.Command{Shell: review8Probe, Timeout: 20 * time.Second})
		check(t, r, err)
		wg.Wait()
	})
	if leaked := review8Leaked(t, before); len(leaked) > 0 {
		t.Errorf("pids groups left behind: %v", leaked)
	}
}

// A session whose start fails (ctx already done) and one cancelled in
// the middle of a command leave no group behind.
func TestReview8NoGroupLeakOnErrors(t *testing.T) {
	e := newEnv(t)
	before := review8PidsDirs(t)
	pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Processes: 8}})
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if sb, err := isolated.New(ctx, pol); err == nil {
		sb.Close()
	}
	if _, err := isolated.Run(ctx, pol, sandbox.Command{Shell: "true"}); err == nil {
		t.Log("a one-shot ran under a done context")
	}
	ctx2, cancel2 := context.WithTimeout(bg, 500*time.Millisecond)
	defer cancel2()
	_, _ = isolated.Run(ctx2, pol, sandbox.Command{Shell: "sleep 5 & sleep 5 & wait", Timeout: 20 * time.Second})
	sb, err := isolated.New(bg, pol)
	if err != nil {
		t.Fatal(err)
	}
	ctx3, cancel3 := context.WithTimeout(bg, 500*time.Millisecond)
	defer cancel3()
	_, _ = sb.Exec(ctx3, sandbox.Command{Shell: "sleep 5 & sleep 5 & wait", Timeout: 20 * time.Second})
	sb.Close()
	if leaked := review8Leaked(t, before); len(leaked) > 0 {
		t.Errorf("pids groups left behind: %v", leaked)
	}
}
