package isolated_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// countProcesses forks sleeping children until the kernel refuses, and
// prints how many processes it had at once, itself included. Perl (always
// there on Debian: perl-base) is one thread, and survives a refused fork,
// where sh exits. It forks from its first instant: no helper thread of
// hutch's ever counts among the limit's N, not even while the command
// starts.
const countProcesses = `exec perl -e 'my $n = 1; my @kids; while ($n < 200) { my $p = fork; last unless defined $p; if ($p == 0) { sleep 10; exit 0 } push @kids, $p; $n++ } print "$n\n"; kill 9, @kids'`

// A process limit is the command's: exactly that many processes at once,
// in a one-shot run, in a session (through its runner, through an exec
// helper beside a busy runner, and from the init of an allow-list run),
// however few. hutch's own processes in the sandbox (a session's Go
// helpers hold a couple of dozen threads) do not count against it: a
// session with a limit of 4 keeps its init.
func TestProcessLimitIsTheCommands(t *testing.T) {
	e := newEnv(t)
	count := func(t *testing.T, r sandbox.Result, err error, want int) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(r.Stdout)); got != strconv.Itoa(want) || r.Limit != "pids" {
			t.Errorf("%q processes (limit %q, exit %d, stderr %q); want %d and limit pids", got, r.Limit, r.ExitCode, r.Stderr, want)
		}
	}
	for _, n := range []int{4, 9} {
		pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Processes: n}})
		t.Run("one-shot/"+strconv.Itoa(n), func(t *testing.T) {
			r, err := isolated.Run(bg, pol, sandbox.Command{Shell: countProcesses, Timeout: 20 * time.Second})
			count(t, r, err, n)
		})
		t.Run("allow-list/"+strconv.Itoa(n), func(t *testing.T) {
			p := pol.Extend(policy.Policy{Network: policy.NetworkAllow, Hosts: []string{"example.invalid"}})
			r, err := isolated.Run(bg, p, sandbox.Command{Shell: countProcesses, Timeout: 20 * time.Second})
			count(t, r, err, n)
		})
		t.Run("session/"+strconv.Itoa(n), func(t *testing.T) {
			sb, err := isolated.New(bg, isolated.Options{Policy: pol})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			for range 2 {
				r, err := sb.Exec(bg, sandbox.Command{Shell: countProcesses, Timeout: 20 * time.Second})
				count(t, r, err, n)
			}
			// Beside a command holding the runner: an exec helper's
			// command shares the limit with it (one sleep).
			var wg sync.WaitGroup
			wg.Add(1)
			holding := filepath.Join(e.work, "holding-"+strconv.Itoa(n))
			go func() {
				defer wg.Done()
				_, _ = sb.Exec(bg, sandbox.Command{Shell: "touch " + holding + "; exec sleep 5", Timeout: 20 * time.Second})
			}()
			// Counting starts once the sleep is sure to run.
			waitForFile(t, holding, "the command beside")
			r, err := sb.Exec(bg, sandbox.Command{Shell: countProcesses, Timeout: 20 * time.Second})
			count(t, r, err, n-1)
			wg.Wait()
			// A fork bomb ends by the limit or the timeout, and the
			// session carries on.
			r, err = sb.Exec(bg, sandbox.Command{Shell: "bomb() { bomb | bomb & }; bomb; sleep 2", Timeout: 2 * time.Second})
			if err != nil || !r.TimedOut && r.Limit != "pids" {
				t.Errorf("fork bomb: %+v %v", r, err)
			}
			if r, err := sb.Exec(bg, sandbox.Command{Shell: "echo alive", Timeout: 10 * time.Second}); err != nil || string(r.Stdout) != "alive\n" {
				t.Errorf("after the bomb: %q %v", r.Stdout, err)
			}
		})
	}
}

// A session's command does not start while its running commands fill the
// process limit: it joins the group by a move, which the kernel does not
// hold to the limit, so it checks the count itself. It says why on its
// own stderr and exits 126; once the others end, commands run again.
func TestNoCommandStartsInAFullGroup(t *testing.T) {
	e := newEnv(t)
	sb, err := isolated.New(bg, isolated.Options{Policy: e.pol.Extend(policy.Policy{Limits: policy.Limits{Processes: 4}})})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	full := filepath.Join(e.work, "full")
	done := make(chan struct{})
	go func() {
		defer close(done)
		// sh and three sleeps: all 4 (the file is made without a fork).
		_, _ = sb.Exec(bg, sandbox.Command{Shell: "sleep 3 & sleep 3 & sleep 3 & : > " + full + "; wait", Timeout: 20 * time.Second})
	}()
	waitForFile(t, full, "the command filling the group")
	r, err := sb.Exec(bg, sandbox.Command{Args: []string{"echo", "ran"}, Timeout: 10 * time.Second})
	if err != nil || r.ExitCode != 126 || len(r.Stdout) != 0 || !strings.Contains(string(r.Stderr), "the policy's 4 processes are all running") {
		t.Errorf("a command beside 4 of 4: exit %d, stdout %q, stderr %q, %v; want 126 and the reason", r.ExitCode, r.Stdout, r.Stderr, err)
	}
	<-done
	if r, err := sb.Exec(bg, sandbox.Command{Args: []string{"echo", "ran"}, Timeout: 10 * time.Second}); err != nil || string(r.Stdout) != "ran\n" {
		t.Errorf("after the others ended: %q %q %v", r.Stdout, r.Stderr, err)
	}
}

// waitForFile waits up to 10 s for path, which command (what) makes once
// it runs.
func waitForFile(t *testing.T, path, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start in 10 s", what)
		}
	}
}

// cmdGroupProbe prints the command's pids cgroup, its open descriptors,
// then tries to move itself (and its parents) out of the commands'
// group through every descriptor of every process it can see, and
// prints its group again.
const cmdGroupProbe = `grep pids /proc/self/cgroup; echo FDS $(ls /proc/self/fd | tr '\n' ' ');
for f in /proc/[0-9]*/fd/[3-9]; do echo 0 2>/dev/null > "$f" && echo "WROTE $f"; done;
for f in /sys/fs/cgroup/pids/tasks /sys/fs/cgroup/pids/cgroup.procs /sys/fs/cgroup/cgroup.procs; do echo 0 2>/dev/null > "$f" && echo "WROTE $f"; done;
grep pids /proc/self/cgroup`

// pidsDirs are the sandbox groups below the pids hierarchy's
// root, by name.
func pidsDirs(t *testing.T) map[string]bool {
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

// leakedGroups are groups made since before that are still there and
// empty (another process's live sandbox has processes in them), once
// the one-shots' teardowns are done and the groups made ahead for a next
// one removed (isolated.Drain).
func leakedGroups(t *testing.T, before map[string]bool) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	if err := isolated.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	var leaked []string
	for name := range pidsDirs(t) {
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
func TestCommandsStayInCmdGroup(t *testing.T) {
	e := newEnv(t)
	before := pidsDirs(t)
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
		r, err := isolated.Run(bg, pol, sandbox.Command{Shell: cmdGroupProbe, Timeout: 20 * time.Second})
		check(t, r, err)
	})
	t.Run("allow-list-final", func(t *testing.T) {
		p := pol.Extend(policy.Policy{Network: policy.NetworkAllow, Hosts: []string{"example.invalid"}})
		r, err := isolated.Run(bg, p, sandbox.Command{Shell: cmdGroupProbe, Timeout: 20 * time.Second})
		check(t, r, err)
	})
	t.Run("session", func(t *testing.T) {
		sb, err := isolated.New(bg, isolated.Options{Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		r, err := sb.Exec(bg, sandbox.Command{Shell: cmdGroupProbe, Timeout: 20 * time.Second})
		check(t, r, err)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = sb.Exec(bg, sandbox.Command{Args: []string{"sleep", "2"}, Timeout: 20 * time.Second})
		}()
		time.Sleep(300 * time.Millisecond)
		r, err = sb.Exec(bg, sandbox.Command{Shell: cmdGroupProbe, Timeout: 20 * time.Second})
		check(t, r, err)
		wg.Wait()
	})
	if leaked := leakedGroups(t, before); len(leaked) > 0 {
		t.Errorf("pids groups left behind: %v", leaked)
	}
}

// A session whose start fails (ctx already done) and one cancelled in
// the middle of a command leave no group behind.
func TestNoCgroupLeakOnErrors(t *testing.T) {
	e := newEnv(t)
	before := pidsDirs(t)
	pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Processes: 8}})
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if sb, err := isolated.New(ctx, isolated.Options{Policy: pol}); err == nil {
		sb.Close()
	}
	if _, err := isolated.Run(ctx, pol, sandbox.Command{Shell: "true"}); err == nil {
		t.Log("a one-shot ran under a done context")
	}
	ctx2, cancel2 := context.WithTimeout(bg, 500*time.Millisecond)
	defer cancel2()
	_, _ = isolated.Run(ctx2, pol, sandbox.Command{Shell: "sleep 5 & sleep 5 & wait", Timeout: 20 * time.Second})
	sb, err := isolated.New(bg, isolated.Options{Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	ctx3, cancel3 := context.WithTimeout(bg, 500*time.Millisecond)
	defer cancel3()
	_, _ = sb.Exec(ctx3, sandbox.Command{Shell: "sleep 5 & sleep 5 & wait", Timeout: 20 * time.Second})
	sb.Close()
	if leaked := leakedGroups(t, before); len(leaked) > 0 {
		t.Errorf("pids groups left behind: %v", leaked)
	}
}
