package main

// Review 9: bad input to the CLI. Each TestReview9 test fails only while
// its defect is present; TestReview9CLIHolds lists attacks that were
// handled correctly. FuzzReview9PolicyFlags covers the policy flags'
// parser, which had no fuzz target.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/pflag"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

func review9Control(s string) bool {
	return strings.IndexFunc(strings.TrimSuffix(s, "\n"), unicode.IsControl) >= 0
}

// Normalize accepts a process limit up to 4194304 (PID_MAX_LIMIT), but the
// sandbox's pids group gets limit+1024 (hutchProcesses), which the kernel
// refuses above PID_MAX_LIMIT: --pids 4193281..4194304 fail with "a process
// limit needs a pids cgroup here ... invalid argument", blaming the host
// for a value hutch itself accepted.
func TestReview9RunPidsUpperBound(t *testing.T) {
	if code, _, errs := hutch(t, "", "run", "--pids", "64", "--", "true"); code != 0 {
		testenv.Missing(t, "no process limit on this host: %s", errs)
	}
	for _, n := range []string{"4193281", "4194304"} {
		code, _, errs := hutch(t, "", "run", "--pids", n, "--", "true")
		if code != 0 && !strings.Contains(errs, "policy: process limit") {
			t.Errorf("--pids %s (accepted by the policy): exit %d, %q", n, code, strings.TrimSpace(errs))
		}
	}
}

// hutch's one error line folds whitespace but prints other control
// characters raw: a path (or any input echoed with %s) carrying ANSI
// escapes or backspaces rewrites the terminal line the person reads.
func TestReview9ErrorLineEscapesControlChars(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--dir", "/x\x1b[2K\x1b[1Gall good", "--", "true"},
		{"run", "--read", "/x", "--dir", "/y\b\b\b\bz", "--", "true"},
	} {
		code, _, errs := hutch(t, "", args...)
		if code != 125 {
			t.Errorf("%q: exit %d, want 125", args, code)
		}
		if review9Control(errs) {
			t.Errorf("%q: the error line carries control characters: %q", args, errs)
		}
	}
}

// "hutch approvals deni ID" (a typo) prints the help and exits 0: a script
// that denies a request by mistake sees success.
func TestReview9ApprovalsUnknownSubcommand(t *testing.T) {
	store := filepath.Join(t.TempDir(), "a.db")
	for _, args := range [][]string{
		{"approvals", "deni", "abc", "--store", store},
		{"approvals", "--store", store, "aprove", "abc"},
	} {
		code, _, errs := hutch(t, "", args...)
		if code != 125 || !strings.Contains(errs, "unknown command") {
			t.Errorf("%q: exit %d, stderr %q; want 125 and an unknown-command error", args, code, errs)
		}
	}
}

// A writable path that is a symbolic link (allowed in a policy's last
// element) is mounted as the link, whose target is not in the sandbox;
// the start directory then fails with "no such file or directory" for a
// path that exists on the host, naming neither the link nor the fix.
func TestReview9RunWriteSymlinkErrorNamesLink(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("real", link); err != nil {
		t.Fatal(err)
	}
	code, _, errs := hutch(t, "", "run", "--write", link, "--", "true")
	if code != 0 && !strings.Contains(errs, "symbolic link") {
		t.Errorf("--write LINK: exit %d, %q; want it to run, or an error naming the symbolic link", code, strings.TrimSpace(errs))
	}
}

// "hutch mcp --tier isolated --root DIR/missing" says "lstat DIR: no such
// file or directory" for a DIR that exists: the check runs inside the
// sandbox, where the private /tmp hides it.
func TestReview9MCPMissingRootNamesRightPath(t *testing.T) {
	dir := t.TempDir()
	code, out := review5Run(t, dir, "mcp", "--tier", "isolated", "--root", filepath.Join(dir, "missing"))
	if code != 125 {
		t.Fatalf("exit %d, %q; want 125", code, out)
	}
	// The error may name the missing root, never a directory that exists.
	if _, rest, ok := strings.Cut(out, "lstat "); ok {
		named, _, _ := strings.Cut(rest, ":")
		if _, err := os.Stat(named); err == nil {
			t.Errorf("the error says %s does not exist, which it does: %q", named, strings.TrimSpace(out))
		}
	}
}

// Holds: bad flag values that got exit 125 and one line naming the
// problem (and deny winning where flags conflict).
func TestReview9CLIHolds(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--memory", "-1"}, "bad size"},
		{[]string{"--memory", "10MM"}, "bad size"},
		{[]string{"--memory", "0x10M"}, "bad size"},
		{[]string{"--memory", "9999999999999999999999"}, "too large"},
		{[]string{"--memory", " 5M"}, "at least 16 MiB"},
		{[]string{"--file-size", "0.5"}, "whole number"},
		{[]string{"--cpu-time", "1y"}, "unknown unit"},
		{[]string{"--cpu-time", "9999999h"}, "invalid duration"},
		{[]string{"--timeout", "-1s"}, "must be positive"},
		{[]string{"--pids", "3"}, "at least 4"},
		{[]string{"--pids", "4194305"}, "more than any kernel"},
		{[]string{"--pids", "1e3"}, "invalid argument"},
		{[]string{"--nice", "-20"}, "give 0"},
		{[]string{"--nice", "99999999999"}, "give 0"},
		{[]string{"--env", "A\x00=1"}, "NAME"},
		{[]string{"--env", "A=1\x00"}, "NUL"},
		{[]string{"--read", "/a\x00b"}, "NUL"},
		{[]string{"--read", "~/x"}, "does not expand"},
		{[]string{"--network", "None"}, "choose none, all"},
		{[]string{"--network", " allow=example.com"}, "choose none, all"},
		{[]string{"--network", "allow=0.0.0.0/0"}, "every address"},
		{[]string{"--network", "allow=example.com:0"}, "out of range"},
		{[]string{"--network", "allow=example.com", "--network-deny", "a\"b"}, "bare \""},
		{[]string{"--dir", "/root"}, "not readable"},
		{[]string{"--dir", "/etc/shadow"}, "is denied (by /etc/shadow)"},
		{[]string{"--write", dir, "--deny", dir}, "is denied (by"},
		{[]string{"--policy", "/dev/null"}, "not a regular file"},
		{[]string{"--policy", "/nonexistent.yaml"}, "no such file"},
	} {
		args := append(append([]string{"run"}, c.args...), "--", "true")
		code, _, errs := hutch(t, "", args...)
		if code != 125 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%q: exit %d, stderr %q; want 125 and one line with %q", c.args, code, errs, c.want)
		}
	}
	// Deny wins over a writable child and over a written file.
	if err := os.MkdirAll(filepath.Join(dir, "w", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "w", "sub", "s"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := filepath.Join(dir, "w")
	code, out, errs := hutch(t, "", "run", "--write", w+"/sub", "--deny", w, "--dir", "/tmp", "--",
		"sh", "-c", "cat "+w+"/sub/s; echo x > "+w+"/sub/n; echo x > "+w+"/n")
	if code == 125 {
		testenv.Missing(t, "isolated tier unavailable: %s", errs)
	}
	if strings.Contains(out, "secret") {
		t.Errorf("a denied parent's writable child was read: %q", out)
	}
	for _, n := range []string{w + "/sub/n", w + "/n"} {
		if _, err := os.Stat(n); err == nil {
			t.Errorf("%s was written under a denied parent", n)
		}
	}
	// Duplicate --env keys: the last wins, as in env(1) and docker.
	if code, out, _ := hutch(t, "", "run", "--env", "A=1", "--env", "A=2", "--", "sh", "-c", "echo $A"); code != 0 || strings.TrimSpace(out) != "2" {
		t.Errorf("--env A=1 --env A=2: exit %d, %q", code, out)
	}
}

// FuzzReview9PolicyFlags: whatever the flag values, building the policy
// from flags does not panic; an error (from the flags or from Normalize)
// is one line after the CLI's folding and, from Normalize, matches
// ErrConfig; an accepted policy never lets a denied path be read.
func FuzzReview9PolicyFlags(f *testing.F) {
	f.Add("allow=example.com", "evil.example.com", "512M", "1G", "/w", "/w/s", 4, 0)
	f.Add("allow=", "", "0.5", "", "", "", 0, 20)
	f.Add("all", "a,b", "-1", "nan", "rel", "../x", -1, -1)
	f.Add("allow=*.com, ,x", "\"a", "1e9", "99999999T", "~", "/a\x00", 1<<30, 5)
	f.Add("none", "", "unlimited", "unlimited", "/w", "", -1, 0)
	f.Fuzz(func(t *testing.T, network, networkDeny, memory, fileSize, write, deny string, pids, nice int) {
		fl := pflag.NewFlagSet("run", pflag.ContinueOnError)
		var p policyFlags
		p.register(fl)
		args := []string{"--network=" + network, "--memory=" + memory, "--file-size=" + fileSize, "--write=" + write, "--deny=" + deny}
		if networkDeny != "" {
			args = append(args, "--network-deny="+networkDeny)
		}
		if err := fl.Parse(args); err != nil {
			return
		}
		p.pids, p.nice = pids, nice
		pol, err := p.build(fl, "", 0)
		if err == nil {
			pol, err = pol.Normalize("/cwd")
			if err != nil && !errors.Is(err, sandbox.ErrConfig) {
				t.Fatalf("Normalize: %v does not match ErrConfig", err)
			}
		}
		if err != nil {
			if line := oneLine(err.Error()); line == "" || strings.Contains(line, "\n") {
				t.Fatalf("error %q folds to %q", err, line)
			}
			return
		}
		for _, d := range pol.Deny {
			if pol.CanRead(d) || pol.CanWrite(d) {
				t.Fatalf("denied %q is accessible: %+v", d, pol)
			}
		}
		if pol.Limits.Memory < 0 && pol.Limits.Memory != policy.Unlimited || pol.Limits.FileSize < 0 || pol.Nice < 0 || pol.Nice > 19 {
			t.Fatalf("accepted out-of-range values: %+v", pol)
		}
	})
}
