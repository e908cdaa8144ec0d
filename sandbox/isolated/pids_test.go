package isolated_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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
// helpers hold a couple of dozen threads) do not count against it; a
// session with a limit of 4 used to lose its init.
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
			sb, err := isolated.New(bg, pol)
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
	sb, err := isolated.New(bg, e.pol.Extend(policy.Policy{Limits: policy.Limits{Processes: 4}}))
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
