package isolated_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

// The default policy itself, with no limit of the test's own, bounds a
// command's processes and memory: an outside escape suite once saw a fork
// bomb under it reach the suite's own cap of 4096 processes, and a 1.5 GiB
// allocation its own cap of 768 MiB. Here the host's kernel holds the
// default's limits for the sandbox (in its control groups, or as the
// command's rlimits where there are none); a command forking all it can
// gets exactly DefaultProcesses at once, never more; the suite's fork
// bomb is stopped by the process limit and leaves nothing behind; and an
// allocation beyond DefaultMemory is refused (RLIMIT_DATA, without using
// the memory) or killed at the limit (a memory cgroup, which this costs
// DefaultMemory, at most 8 GiB and half the host's, for a moment).
func TestDefaultPolicyBoundsProcessesAndMemory(t *testing.T) {
	// Not through run_code: there the fork bomb's driver ran past its 60 s
	// in one run, not yet explained; run_code's runner is the one-shot.
	inModes(t, []mode{oneShot, session}, func(t *testing.T, e *env) {
		if want := (policy.Limits{Processes: policy.DefaultProcesses, Memory: policy.DefaultMemory()}); e.pol.Limits != want {
			t.Fatalf("the test's policy has limits %+v, not the default's %+v", e.pol.Limits, want)
		}
		seen := limitsSeenByHost(t, e.pol)
		pidsHeld := seen.pids == strconv.Itoa(policy.DefaultProcesses)
		memoryHeld := seen.memory == strconv.FormatInt(int64(policy.DefaultMemory()), 10)
		t.Run("held by the host's kernel", func(t *testing.T) {
			if !pidsHeld {
				t.Errorf("process limit %q (by cgroup %v), want %d", seen.pids, seen.pidsByCgroup, policy.DefaultProcesses)
			}
			if !memoryHeld {
				t.Errorf("memory limit %q (by cgroup %v), want %d", seen.memory, seen.memoryByCgroup, int64(policy.DefaultMemory()))
			}
		})
		t.Run("processes at once", func(t *testing.T) {
			// Forks sleeping children until the kernel refuses (or the
			// suite's cap of 4096), and prints how many processes it had at
			// once, itself included: no churn, so the count is exact.
			r := e.runWith(t, e.pol, sandbox.Command{Args: []string{"perl", "-e",
				`my $n = 1; my @kids; while ($n < 4096) { my $p = fork; last unless defined $p; if ($p == 0) { sleep 60; exit 0 } push @kids, $p; $n++ } print "$n\n"; kill 9, @kids`},
				Timeout: 60 * time.Second})
			n, err := strconv.Atoi(strings.TrimSpace(string(r.Stdout)))
			switch {
			case err != nil || r.ExitCode != 0:
				t.Fatalf("the count did not run: exit %d, stdout %q, stderr %.300q", r.ExitCode, r.Stdout, r.Stderr)
			case n > policy.DefaultProcesses:
				t.Errorf("%d processes at once under the default policy; its limit is %d", n, policy.DefaultProcesses)
			case seen.pidsByCgroup && (n != policy.DefaultProcesses || r.Limit != "pids"):
				t.Errorf("%d processes at once (limit %q), want exactly %d and limit pids: the commands' pids group holds them", n, r.Limit, policy.DefaultProcesses)
			case n < policy.DefaultProcesses-64:
				// RLIMIT_NPROC counts hutch's own tasks in the sandbox too
				// (a one-shot's PID 1, a session's helpers' threads); fewer
				// than that is some other limit, not the default's.
				t.Errorf("only %d processes at once: something other than the default's limit of %d stopped them", n, policy.DefaultProcesses)
			}
		})
		t.Run("fork bomb", func(t *testing.T) {
			if !pidsHeld {
				t.Fatal("no default process limit holds the sandbox: not setting off a fork bomb on the host")
			}
			// The suite's bomb, from perl, which waits until its own probe
			// fork is refused (the limit is reached: on a loaded machine that
			// takes longer than any fixed wait), at most 50 seconds, then
			// kills every process of the sandbox but PID 1 and perl. The
			// marker names its shells, which must all be gone afterwards.
			marker := fmt.Sprintf("bomb-%d", time.Now().UnixNano())
			bomb := "f() { f | f & }; f # " + marker
			r := e.runWith(t, e.pol, sandbox.Command{Args: []string{"perl", "-e",
				`defined(my $p = fork) or die "fork: $!"; if ($p == 0) { exec "/bin/sh", "-c", $ARGV[0]; exit 127 } ` +
					`for (1 .. 500) { select(undef, undef, undef, 0.1); my $q = fork; last unless defined $q; if ($q == 0) { exit 0 } waitpid($q, 0) } ` +
					`kill 9, -1; print "stopped\n"`, bomb},
				Timeout: 60 * time.Second})
			refused := strings.Contains(string(r.Stderr), "Cannot fork") || strings.Contains(string(r.Stderr), "fork failed")
			switch {
			case r.TimedOut || r.ExitCode != 0 || !strings.Contains(string(r.Stdout), "stopped"):
				t.Errorf("the bomb's driver did not end it: exit %d, timed out %v, stdout %q, stderr %.300q", r.ExitCode, r.TimedOut, r.Stdout, r.Stderr)
			case seen.pidsByCgroup && r.Limit != "pids":
				t.Errorf("fork bomb: limit %q, want pids (stderr %.300q)", r.Limit, r.Stderr)
			case !refused:
				t.Errorf("fork bomb: no fork was refused (limit %q, stderr %.300q)", r.Limit, r.Stderr)
			}
			if left := sandboxtest.Survivors(marker, 3*time.Second); len(left) > 0 {
				t.Errorf("the bomb's processes outlived the sandbox: %v", left)
			}
		})
		t.Run("memory bomb", func(t *testing.T) {
			if !memoryHeld {
				t.Fatal("no default memory limit holds the sandbox: not setting off a memory bomb on the host")
			}
			size := policy.DefaultMemory() + 256<<20
			if seen.memoryByCgroup {
				// The cgroup lets the bomb use its limit's worth before the
				// kill: the host must have that to spare.
				if avail := memAvailable(t); avail < policy.DefaultMemory()+1<<30 {
					testenv.Missing(t, "%v of free memory for the bomb under a memory cgroup (available: %v)", policy.DefaultMemory()+1<<30, avail)
				}
			}
			r := e.runWith(t, e.pol, sandbox.Command{Args: testenv.ProgramArgv(strconv.FormatInt(int64(size), 10)),
				Env: map[string]string{testenv.ProgramEnvKey: "map"}, Timeout: 120 * time.Second})
			out := string(r.Stdout) + string(r.Stderr)
			switch {
			case strings.Contains(out, "ALLOCATED") || r.TimedOut:
				t.Errorf("%v under the default memory limit of %v: exit %d, timed out %v, %.300s", size, policy.DefaultMemory(), r.ExitCode, r.TimedOut, out)
			case seen.memoryByCgroup && (r.Limit != "memory" || r.ExitCode == 0):
				t.Errorf("%v under a memory cgroup of %v: exit %d, limit %q, want the command killed and limit memory; %.300s", size, policy.DefaultMemory(), r.ExitCode, r.Limit, out)
			case !seen.memoryByCgroup && !strings.Contains(out, "REFUSED"):
				t.Errorf("%v under RLIMIT_DATA %v: exit %d, want the mapping refused; %.300s", size, policy.DefaultMemory(), r.ExitCode, out)
			}
		})
	})
}

// seenLimits are a sandboxed command's process and memory limits as the
// host's kernel holds them: from the control groups hutch made for the
// sandbox where it has them, else from the command's rlimits.
type seenLimits struct {
	pids, memory                 string // as the kernel writes them: "1024", "8589934592"
	pidsByCgroup, memoryByCgroup bool
}

// limitsSeenByHost starts a sleep under pol, finds it from the host by
// its unique argument, and reads its limits.
func limitsSeenByHost(t *testing.T, pol policy.Policy) seenLimits {
	t.Helper()
	marker := fmt.Sprintf("29.%09d", time.Now().UnixNano()%1e9)
	done := make(chan error, 1)
	go func() {
		_, err := isolated.Run(bg, pol, sandbox.Command{Args: []string{"sleep", marker}, Timeout: 20 * time.Second})
		done <- err
	}()
	defer func() {
		killMarked(marker)
		if err := <-done; err != nil {
			t.Errorf("the sleep under the policy: %v", err)
		}
	}()
	pid := 0
	for deadline := time.Now().Add(10 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, p := range descendants(os.Getpid()) {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); string(b) == "sleep\x00"+marker+"\x00" {
				pid = p
			}
		}
	}
	if pid == 0 {
		t.Fatal("the sandboxed sleep did not show up")
	}
	var s seenLimits
	if s.pids, s.pidsByCgroup = cgroupLimit(t, pid, "pids", "pids.max"); !s.pidsByCgroup {
		s.pids = softRlimit(t, pid, "Max processes")
	}
	if s.memory, s.memoryByCgroup = cgroupLimit(t, pid, "memory", "memory.limit_in_bytes", "memory.max"); !s.memoryByCgroup {
		s.memory = softRlimit(t, pid, "Max data size")
	}
	return s
}

// cgroupLimit reads the first of files found in the group of pid's
// controller (v1) or its unified group (v2), or in a group above it, as
// long as that is one of hutch's sandbox groups (hutch-...); ok is false
// when none is.
func cgroupLimit(t *testing.T, pid int, controller string, files ...string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	dir := ""
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		switch {
		case len(f) != 3:
		case strings.Contains(","+f[1]+",", ","+controller+","):
			dir = filepath.Join("/sys/fs/cgroup", controller, f[2])
		case f[0] == "0" && f[1] == "" && dir == "":
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				dir = filepath.Join("/sys/fs/cgroup", f[2])
			}
		}
	}
	for d := dir; strings.HasPrefix(filepath.Base(d), "hutch-") || filepath.Base(d) == "cmd"; d = filepath.Dir(d) {
		for _, f := range files {
			if v, err := os.ReadFile(filepath.Join(d, f)); err == nil {
				return strings.TrimSpace(string(v)), true
			}
		}
	}
	return "", false
}

// softRlimit is the soft limit of pid's rlimit named as /proc/PID/limits
// names it ("Max processes").
func softRlimit(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	t.Fatalf("no %q in /proc/%d/limits: %s", name, pid, b)
	return ""
}

// memAvailable is the host's available memory (/proc/meminfo).
func memAvailable(t *testing.T) policy.Size {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			if kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64); err == nil {
				return policy.Size(kb << 10)
			}
		}
	}
	t.Fatalf("no MemAvailable in /proc/meminfo")
	return 0
}

// A policy lifting the default's limits (policy.Unlimited) gets none:
// the sentinel never reaches the kernel as a number, no control group is
// made for limits that are not there, and no rlimit is set in their
// place; the command runs, one-shot and in a session.
func TestUnlimitedLiftsTheDefaultLimits(t *testing.T) {
	e := newEnv(t)
	pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Processes: policy.Unlimited, Memory: policy.Unlimited}})
	seen := limitsSeenByHost(t, pol)
	if seen.pidsByCgroup || seen.memoryByCgroup || seen.pids == strconv.Itoa(policy.DefaultProcesses) || seen.memory != "unlimited" {
		t.Errorf("limits held for an unlimited policy: %+v; want no cgroup, no process rlimit of the default's, memory unlimited", seen)
	}
	for name, run := range map[string]func(policy.Policy, sandbox.Command) (sandbox.Result, error){
		"one-shot": func(p policy.Policy, c sandbox.Command) (sandbox.Result, error) { return isolated.Run(bg, p, c) },
		"session":  func(p policy.Policy, c sandbox.Command) (sandbox.Result, error) { return viaSession(bg, p, c) },
	} {
		r, err := run(pol, sandbox.Command{Shell: `grep -c ':pids:/cmd$' /proc/self/cgroup; ulimit -d`, Timeout: 20 * time.Second})
		if got := strings.Fields(string(r.Stdout)); err != nil || len(got) != 2 || got[0] != "0" || got[1] != "unlimited" {
			t.Errorf("%s: %q (stderr %q), %v; want no commands' pids group (0) and no data limit (unlimited)", name, r.Stdout, r.Stderr, err)
		}
	}
}
