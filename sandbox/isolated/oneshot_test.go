package isolated_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// A one-shot run forks its sandbox's PID 1 from the calling process (no
// helper process): these tests are about what that fork must not carry
// into the sandbox, and about starting the command without a shell.

// The command finds its program the way a shell does, inside the
// sandbox, and says why when it cannot.
func TestOneShotProgramLookup(t *testing.T) {
	e := newEnv(t)
	noexec := filepath.Join(e.work, "bin1")
	good := filepath.Join(e.work, "bin2")
	for _, d := range []string{noexec, good} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(noexec, "tool"), []byte("#!/bin/sh\necho WRONG\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(good, "tool"), []byte("#!/bin/sh\necho RIGHT \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pol := e.pol
	pol.Dir = e.work
	path := map[string]string{"PATH": noexec + ":" + good + ":/usr/bin:/bin"}
	for _, c := range []struct {
		name string
		cmd  sandbox.Command
		code int
		out  string
	}{
		{"found later on PATH", sandbox.Command{Args: []string{"tool", "a b"}, Env: path}, 0, "RIGHT a b"},
		{"only a file that cannot run", sandbox.Command{Args: []string{"tool"}, Env: map[string]string{"PATH": noexec}}, 126, "hutch: tool: permission denied"},
		{"missing", sandbox.Command{Args: []string{"no-such-program-xyz"}}, 127, "hutch: no-such-program-xyz: command not found"},
		{"relative to the start directory", sandbox.Command{Args: []string{"bin2/tool", "x"}}, 0, "RIGHT x"},
		{"relative, missing", sandbox.Command{Args: []string{"./nothing-here"}}, 127, "command not found"},
		{"a directory", sandbox.Command{Args: []string{"/usr"}}, 126, "permission denied"},
		{"a host program outside the policy", sandbox.Command{Args: []string{filepath.Join(e.outside, "x")}}, 127, "command not found"},
	} {
		r := e.runWith(t, pol, c.cmd)
		wantOut(t, c.name, r, c.code, c.out)
	}
}

// PID 1 of a one-shot sandbox is a fork of the caller: the command cannot
// see it at all (the sandbox's /proc hides hutch's processes), let alone
// its arguments, environment, memory or descriptors, and it shrugs off
// the command's signals. On the host its command line is hutch's name,
// nothing of the caller's.
func TestOneShotPID1IsOutOfReach(t *testing.T) {
	e := newEnv(t)
	t.Setenv("HUTCH_TEST_PID1_SECRET", "pid1-s3cret")
	var cmdline string
	r := withStarter(t, e.work, func(script string) sandbox.Result { return e.run(t, sh(script)) }, `ls -d /proc/1 2>&1
tr '\0' ' ' </proc/1/cmdline 2>&1; echo
cat /proc/1/environ 2>/dev/null | tr '\0' '\n' | grep -c pid1-s3cret
ls /proc/1/fd 2>&1 | head -3
dd if=/proc/1/mem bs=1 count=1 skip=4194304 2>&1 | head -1
kill -TERM 1; kill -INT 1; kill -HUP 1; kill -USR1 1; kill -KILL 1; sleep 0.2; echo ALIVE`, func(s starter) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.pid))
		cmdline = strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	})
	out := string(r.Stdout) + string(r.Stderr)
	if cmdline != "hutch-sandbox-init" {
		t.Errorf("PID 1's command line is %q; want hutch-sandbox-init (and nothing of the caller's)", cmdline)
	}
	if !strings.HasPrefix(out, "ls: cannot access '/proc/1'") {
		t.Errorf("PID 1 is visible in the sandbox's /proc:\n%s", out)
	}
	if strings.Contains(out, "pid1-s3cret") || strings.Contains(out, "test.") {
		t.Errorf("PID 1 shows the caller's environment or arguments:\n%s", out)
	}
	if strings.Contains(out, "1+0 records") || !strings.Contains(out, "ls: cannot access '/proc/1/fd'") {
		t.Errorf("PID 1's descriptors or memory are readable:\n%s", out)
	}
	if r.ExitCode != 0 || !strings.Contains(out, "ALIVE") {
		t.Errorf("a signal from the command reached PID 1 (exit %d):\n%s", r.ExitCode, out)
	}
}

// What stops a one-shot run is reported as such, and the caller gets the
// sandbox's errors typed.
func TestOneShotEndings(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, sh("kill -KILL $$"))
	if r.ExitCode != 137 || r.Signal != "SIGKILL" {
		t.Errorf("a command killed by a signal: exit %d signal %q", r.ExitCode, r.Signal)
	}
	r = e.run(t, sh("exit 42"))
	if r.ExitCode != 42 {
		t.Errorf("exit 42: got %d", r.ExitCode)
	}
	r = e.run(t, sandbox.Command{Shell: "cat", Stdin: strings.NewReader("from stdin")})
	if string(r.Stdout) != "from stdin" {
		t.Errorf("stdin: got %q", r.Stdout)
	}
	start := time.Now()
	r = e.run(t, sandbox.Command{Shell: "sleep 30", Timeout: 300 * time.Millisecond})
	if !r.TimedOut || time.Since(start) > 10*time.Second {
		t.Errorf("timeout: %+v after %v", r, time.Since(start))
	}
	// A start directory missing on the host: the reason, not a run.
	missing := filepath.Join(e.work, "not-there")
	pol := e.pol.Extend(policy.Policy{Dir: missing})
	_, err := isolated.Run(bg, pol, sh("true"))
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "start directory") {
		t.Errorf("a missing start directory: %v", err)
	}
	ctx, cancel := context.WithCancel(bg)
	go func() { time.Sleep(200 * time.Millisecond); cancel() }()
	start = time.Now()
	_, err = isolated.Run(ctx, e.pol, sandbox.Command{Shell: "sleep 30", Timeout: time.Minute})
	if !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
		t.Errorf("cancel: %v after %v", err, time.Since(start))
	}
}

// A policy that denies /proc or /proc/self still runs its commands in a
// one-shot run (PID 1 sets its OOM score before the deny masks). A
// session's helpers start from /proc/self/exe, so such a policy is
// one-shot only. Origin: review 6.
func TestDenyProcStillRuns(t *testing.T) {
	e := newEnv(t)
	for _, deny := range []string{"/proc", "/proc/self"} {
		pol := e.pol.Extend(policy.Policy{Deny: []string{deny}})
		r := e.runWith(t, pol, sandbox.Command{Shell: "echo ran"})
		if r.ExitCode != 0 || !strings.Contains(string(r.Stdout), "ran") {
			t.Errorf("deny %s: exit %d, %q %q", deny, r.ExitCode, r.Stdout, r.Stderr)
		}
	}
}
