package isolated_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

// A session's commands go through one long-lived runner (PID 1 of a PID
// namespace of its own). These cases try to make one command reach the
// runner or the next command, and check that a runner killed on timeout is
// replaced.
func TestRunner(t *testing.T) {
	e := newEnv(t)
	pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{FileSize: 1 << 20, CPUTime: 30 * time.Second}})
	sb, err := isolated.New(bg, isolated.Options{Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	exec := func(t *testing.T, script string, timeout time.Duration) sandbox.Result {
		t.Helper()
		r, err := sb.Exec(bg, sandbox.Command{Shell: script, Timeout: timeout})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return r
	}
	alive := func(t *testing.T) {
		t.Helper()
		if r := exec(t, "echo alive", 10*time.Second); r.ExitCode != 0 || string(r.Stdout) != "alive\n" {
			t.Fatalf("the session no longer runs commands: exit %d, %q %q", r.ExitCode, r.Stdout, r.Stderr)
		}
	}
	t.Run("signals to PID 1 change nothing", func(t *testing.T) {
		r := exec(t, "for s in TERM INT HUP QUIT USR1 USR2 ALRM XCPU XFSZ TSTP STOP KILL; do kill -$s 1; done; echo done", 10*time.Second)
		if r.ExitCode != 0 || string(r.Stdout) != "done\n" {
			t.Errorf("exit %d, %q %q", r.ExitCode, r.Stdout, r.Stderr)
		}
		alive(t)
	})
	t.Run("the runner's signal handling does not reach commands", func(t *testing.T) {
		// SIGXFSZ must still stop a command that writes past the limit
		// (the shell reports 128+25).
		r := exec(t, "head -c 2000000 /dev/zero > /tmp/big; echo $?", 10*time.Second)
		if string(r.Stdout) != "153\n" {
			t.Errorf("writing past the file size limit: %q %q", r.Stdout, r.Stderr)
		}
		r = exec(t, "trap - TERM; kill -TERM $$; echo survived", 10*time.Second)
		if strings.Contains(string(r.Stdout), "survived") {
			t.Errorf("a command cannot be stopped by SIGTERM: %q", r.Stdout)
		}
	})
	t.Run("leftovers are gone before the next command", func(t *testing.T) {
		exec(t, "setsid sleep 1000 >/dev/null 2>&1 & (sleep 1001 &) ; echo started", 10*time.Second)
		r := exec(t, "ps -eo args 2>/dev/null || cat /proc/[0-9]*/cmdline", 10*time.Second)
		if strings.Contains(string(r.Stdout), "sleep 100") {
			t.Errorf("a previous command's process is still running:\n%s", r.Stdout)
		}
	})
	t.Run("a timeout replaces the runner", func(t *testing.T) {
		r := exec(t, "sleep 30", 300*time.Millisecond)
		if !r.TimedOut {
			t.Errorf("not timed out: %+v", r)
		}
		alive(t)
		alive(t)
	})
	t.Run("commands while the runner is busy", func(t *testing.T) {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := exec(t, "sleep 1; echo slow", 10*time.Second); string(r.Stdout) != "slow\n" {
				t.Errorf("the long command: %q %q", r.Stdout, r.Stderr)
			}
		}()
		time.Sleep(100 * time.Millisecond)
		for range 3 {
			alive(t)
		}
		wg.Wait()
	})
	t.Run("a command cannot reach the helpers' descriptors or memory", func(t *testing.T) {
		// The control line: a command resolves its own descriptors.
		// hutch's processes are not in the listing; by their PIDs (the
		// init is 1, the runner the shell's parent) nothing opens either.
		r := exec(t, `n=0
readlink /proc/self/fd/1 >/dev/null || echo "control: cannot resolve its own descriptor"
for p in /proc/[0-9]*; do
  case "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" in
  hutch-sandbox*) n=$((n+1));;
  esac
done
read -r _ _ _ runner _ < /proc/self/stat
for p in /proc/1 /proc/$runner; do
  for f in environ mem maps cmdline; do cat $p/$f >/dev/null 2>&1 && echo "read $p/$f"; done
  for f in $p/fd/*; do readlink $f >/dev/null 2>&1 && echo "resolved $f"; ( : < $f ) 2>/dev/null && echo "opened $f"; done
done
echo "helpers $n"`, 10*time.Second)
		if got := string(r.Stdout); got != "helpers 0\n" {
			t.Errorf("want none of hutch's processes in sight or reach; got %q %q", got, r.Stderr)
		}
	})
}

// A session's runner killed from the host was reported as the command's
// death: the next command "ran" with exit 137 and no output, though it
// never started. Now a runner that died while idle hands the command to
// a fresh helper, which runs it; one that died with the command in hand
// makes the exec fail saying so, and the session goes on.
func TestKilledRunnerIsNeverAResultOfTheCommand(t *testing.T) {
	e := newEnv(t)
	before, _ := a2HostHelpers(t)
	sb := a2Session(t, e.pol)
	// runner returns the host PID of sb's runner, started by a command.
	runner := func(t *testing.T) int {
		t.Helper()
		if r := a2Exec(t, sb, "true", 10*time.Second); r.ExitCode != 0 {
			t.Fatalf("true: exit %d, %q", r.ExitCode, r.Stderr)
		}
		inits, runners := a2HostHelpers(t)
		parent := processParents()
		for _, p := range runners {
			if !slices.Contains(before, parent[p]) && slices.Contains(inits, parent[p]) {
				return p
			}
		}
		t.Fatal("the session has no runner on the host")
		return 0
	}
	kill := func(t *testing.T, pid int) {
		t.Helper()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || bytes.Contains(stat, []byte(") Z ")) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the runner %d lives on after SIGKILL", pid)
			}
		}
	}
	echo := func(t *testing.T) {
		t.Helper()
		r, err := sb.Exec(bg, sandbox.Command{Shell: "echo x", Timeout: 10 * time.Second})
		if err != nil || r.ExitCode != 0 || string(r.Stdout) != "x\n" {
			t.Fatalf("echo x: exit %d, %q %q, %v", r.ExitCode, r.Stdout, r.Stderr, err)
		}
	}
	t.Run("killed while idle", func(t *testing.T) {
		kill(t, runner(t))
		echo(t)
		echo(t)
		// And with the command sent while the runner is still dying.
		for range 3 {
			_ = syscall.Kill(runner(t), syscall.SIGKILL)
			echo(t)
		}
	})
	t.Run("killed during a command", func(t *testing.T) {
		pid := runner(t)
		go func() {
			time.Sleep(500 * time.Millisecond)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}()
		r, err := sb.Exec(bg, sandbox.Command{Shell: "sleep 5; echo slept", Timeout: 20 * time.Second})
		if err == nil {
			t.Fatalf("no error for a command whose runner was killed: exit %d, timed out %v, %q %q", r.ExitCode, r.TimedOut, r.Stdout, r.Stderr)
		}
		if !strings.Contains(err.Error(), "runner died") {
			t.Errorf("the error does not say the runner died: %v", err)
		}
		echo(t)
	})
}

// A session's command ended by its timeout or a cancel has nothing left
// running when Exec returns, daemons included: the runner's namespace is
// empty by then, not on its way to it.
func TestSessionCommandEndedEarlyLeavesNothingRunning(t *testing.T) {
	sb := a2Session(t, newEnv(t).pol)
	// Repeated: without the wait for the runner's namespace, a run
	// passes only when the kernel happens to finish first.
	for i, how := range []string{"timeout", "cancel", "timeout", "cancel", "timeout", "cancel"} {
		t.Run(how, func(t *testing.T) {
			if r := a2Exec(t, sb, "true", 10*time.Second); r.ExitCode != 0 { // a runner, warm
				t.Fatalf("true: exit %d, %q", r.ExitCode, r.Stderr)
			}
			marker := fmt.Sprintf("4100.%d%d", time.Now().UnixNano()%1e6, i)
			cmd := sandbox.Command{
				// Nothing holds the command's streams: Exec does not wait
				// for its processes through its pipes.
				Shell:   fmt.Sprintf("exec </dev/null >/dev/null 2>&1; setsid sh -c 'sleep %[1]s1 &' ; (sleep %[1]s2 &) ; nohup sleep %[1]s3 & sleep %[1]s4", marker),
				Timeout: 20 * time.Second,
			}
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			if how == "timeout" {
				cmd.Timeout = 500 * time.Millisecond
			} else {
				time.AfterFunc(500*time.Millisecond, cancel)
			}
			r, err := sb.Exec(ctx, cmd)
			switch how {
			case "timeout":
				if err != nil || !r.TimedOut {
					t.Fatalf("not timed out: %+v %v", r, err)
				}
			case "cancel":
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Exec returned %v, want context.Canceled", err)
				}
			}
			if left := sandboxtest.Processes(marker); len(left) > 0 {
				t.Errorf("running when Exec returned: %v", left)
			}
			if r := a2Exec(t, sb, "echo alive", 10*time.Second); string(r.Stdout) != "alive\n" {
				t.Errorf("the session no longer runs commands: %q %q", r.Stdout, r.Stderr)
			}
		})
	}
}
