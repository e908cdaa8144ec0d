package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
)

// --pids unlimited and --memory unlimited reach the policy as
// policy.Unlimited, lifting the default's limits (or a policy file's);
// numbers still replace them, and what might be meant as "none" in
// another way (0, a negative, another spelling) is refused, as is a
// count in another base.
func TestLimitFlagsSayUnlimited(t *testing.T) {
	const u = policy.Unlimited
	dflt, mem := policy.DefaultProcesses, policy.DefaultMemory()
	file := filepath.Join(t.TempDir(), "lifted.yaml")
	if err := os.WriteFile(file, []byte("limits: {processes: unlimited, memory: unlimited}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := func(args ...string) (policy.Policy, error) {
		fl := pflag.NewFlagSet("run", pflag.ContinueOnError)
		var p policyFlags
		p.register(fl)
		if err := fl.Parse(args); err != nil {
			return policy.Policy{}, err
		}
		return p.build(fl, "", 0)
	}
	for _, c := range []struct {
		args  []string
		wantP int
		wantM policy.Size
	}{
		{nil, dflt, mem},
		{[]string{"--pids", "unlimited"}, u, mem},
		{[]string{"--memory", "unlimited"}, dflt, u},
		{[]string{"--pids=unlimited", "--memory=unlimited"}, u, u},
		{[]string{"--pids", "64", "--memory", "1G"}, 64, 1 << 30},
		{[]string{"--policy", file}, u, u},
		{[]string{"--policy", file, "--pids", "64"}, 64, u},
	} {
		pol, err := build(c.args...)
		if err == nil {
			pol, err = pol.Normalize("/")
		}
		if err != nil || pol.Limits.Processes != c.wantP || pol.Limits.Memory != c.wantM {
			t.Errorf("%q: limits %+v, %v; want processes %d, memory %d", c.args, pol.Limits, err, c.wantP, c.wantM)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pids", "010"}, `"010" is not a decimal whole number`},
		{[]string{"--pids", "0x20"}, `"0x20" is not a decimal whole number`},
		{[]string{"--pids", "0"}, "process limit 0 is no limit here: give a number of processes, or unlimited for none"},
		{[]string{"--pids", "-1"}, "process limit -1 is negative: give a number of processes, or unlimited for none"},
		{[]string{"--pids", "Unlimited"}, `"Unlimited" is not a decimal whole number`},
		{[]string{"--memory", "0"}, `--memory: memory limit "0" is no limit here: give a size (512M), or unlimited for none`},
		{[]string{"--memory", "-1"}, "--memory: bad size"},
		{[]string{"--memory", "none"}, "--memory: bad size"},
		{[]string{"--file-size", "unlimited"}, "--file-size: bad size"},
	} {
		if _, err := build(c.args...); err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want one line containing %q", c.args, err, c.want)
		}
	}
	// And through hutch run to the sandbox: the default's commands run in
	// the pids cgroup's commands' group (/cmd), an unlimited one in none.
	code, def, errOut := hutch(t, "", "run", "--", "cat", "/proc/self/cgroup")
	if code != 0 {
		t.Fatalf("run under the default policy: exit %d, %q", code, errOut)
	}
	code, lifted, errOut := hutch(t, "", "run", "--pids", "unlimited", "--memory", "unlimited", "--", "cat", "/proc/self/cgroup")
	if code != 0 || strings.Contains(lifted, ":pids:/cmd") {
		t.Errorf("run --pids unlimited --memory unlimited: exit %d, %q, cgroups %q; want no commands' pids group", code, errOut, lifted)
	}
	if !strings.Contains(def, ":pids:/cmd") {
		t.Logf("no pids cgroup here (%q): the default's limit is an rlimit, which leaves no trace in /proc/self/cgroup", def)
	}
}

// A policy file with a second YAML document is refused (exit 125), so a
// deny list in that document is never dropped while the run goes ahead.
// Origin: review 5.
func TestRunPolicySecondDocumentRefused(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "secret"), "s3cret\n")
	pol := writeFile(t, filepath.Join(dir, "p.yaml"), "read: ["+dir+"]\n---\ndeny: ["+dir+"/secret]\n")
	code, out, errs := hutch(t, "", "run", "--policy", pol, "--", "cat", dir+"/secret")
	if strings.Contains(out, "s3cret") || code != 125 {
		t.Errorf("exit %d, stdout %q, stderr %q: the deny list of the second document was ignored; want 125 and an error", code, out, errs)
	}
}

// --network all (or none) with --network-deny is refused (exit 125: a
// deny list needs --network allow=...), as "network: all" with a deny is
// in a --policy file: the run never gets the whole network with the host
// the user refused still reachable.
// Origin: review 5.
func TestRunNetworkDenyNeedsAllowList(t *testing.T) {
	for _, netw := range []string{"all", "none"} {
		code, _, errs := hutch(t, "", "run", "--network", netw, "--network-deny", "example.com", "--", "true")
		if code != 125 {
			t.Errorf("--network %s --network-deny example.com: exit %d, stderr %q; want 125 (a deny list needs --network allow=...)", netw, code, errs)
		}
	}
}

// --file-size below one byte (0.5) never becomes 0, "no limit": the
// command does not run without a file size limit.
// Origin: review 5.
func TestRunFractionalFileSizeRefused(t *testing.T) {
	code, out, errs := hutch(t, "", "run", "--file-size", "0.5", "--", "sh", "-c", "ulimit -f")
	if code == 0 && strings.TrimSpace(out) == "unlimited" {
		t.Errorf("--file-size 0.5 ran with no file size limit (stdout %q, stderr %q); want 125 and an error", out, errs)
	}
}

// Bad flag values of hutch run get exit 125 and a one-line reason.
// Origin: review 5.
func TestRunRefusesBadFlagValues(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "lnk")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--read", ""}, "empty path"},
		{[]string{"--deny", ""}, "empty path"},
		{[]string{"--write", "/"}, "whole host"},
		{[]string{"--read", "/"}, "whole host"},
		{[]string{"--read", strings.Repeat("a", 5000)}, "longer than"},
		{[]string{"--read", link + "/passwd"}, "symbolic link"},
		{[]string{"--memory", "1e9"}, "bad size"},
		{[]string{"--memory", "99999999T"}, "too large"},
		{[]string{"--memory", "Infinity"}, "too large"},
		{[]string{"--memory", "1M"}, "at least 16 MiB"},
		{[]string{"--memory", ""}, "bad size"},
		{[]string{"--pids", "-1"}, "negative"},
		{[]string{"--pids", "99999999999999999999"}, "out of range"},
		{[]string{"--nice", "20"}, "give 0"},
		{[]string{"--nice", "-1"}, "give 0"},
		{[]string{"--cpu-time", "400ms"}, "at least 1s"},
		{[]string{"--cpu-time", "-1s"}, "negative"},
		{[]string{"--timeout", "0"}, "must be positive"},
		{[]string{"--timeout", "1e9h"}, "invalid argument"},
		{[]string{"--network", "ALL"}, "choose none, all"},
		{[]string{"--network", "allow="}, "lists no host"},
		{[]string{"--network", "allow=example.com,"}, "empty entry"},
		{[]string{"--network", "allow=,example.com"}, "empty entry"},
		{[]string{"--network-deny="}, "names no host"},
		{[]string{"--network", "allow=example.com", "--network-deny="}, "names no host"},
		{[]string{"--network", "allow=*"}, "*"},
		{[]string{"--network-deny", "evil.com"}, "network allow"},
		{[]string{"--network", "allow=example.com", "--network-deny", "a.example.com,"}, "empty entry"},
		{[]string{"--env", "=x"}, "NAME"},
		{[]string{"--env", "NOEQ"}, "NAME=VALUE"},
		{[]string{"--dir", "/nonexistent"}, "not readable"},
		{[]string{"--policy", dir}, "is a directory"},
		{[]string{"--tier", "Isolated"}, "unknown tier"},
		{[]string{"--tier", "isolated", "--cpus", "2"}, "apply to --tier container"},
	} {
		args := append(append([]string{"run"}, c.args...), "--", "true")
		code, _, errs := hutch(t, "", args...)
		if code != 125 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%q: exit %d, stderr %q; want 125 and one line with %q", c.args, code, errs, c.want)
		}
	}
}

// Every --pids the policy accepts, up to 4194304 (PID_MAX_LIMIT), runs
// (or fails with the policy's own error): the sandbox's pids group, which
// allows hutch's processes beyond the limit, stays within what the kernel
// takes, so hutch never blames the host for a value it accepted.
// Origin: review 9.
func TestRunPidsUpToTheKernelMaximum(t *testing.T) {
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

// A writable path that is a symbolic link (allowed in a policy's last
// element) runs, or fails with an error naming the symbolic link (and the
// fix), never with a bare "no such file or directory" for a path that
// exists on the host.
// Origin: review 9.
func TestRunWriteSymlinkErrorNamesLink(t *testing.T) {
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

// Bad flag values get exit 125 and one line naming the problem; deny
// wins where flags conflict; of duplicate --env keys the last wins.
// Origin: review 9.
func TestRunRefusesBadValuesAndDenyWins(t *testing.T) {
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

// FuzzPolicyFlags: whatever the flag values, building the policy
// from flags does not panic; an error (from the flags or from Normalize)
// is one line after the CLI's folding and, from Normalize, matches
// ErrConfig; an accepted policy never lets a denied path be read.
// Origin: review 9.
func FuzzPolicyFlags(f *testing.F) {
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
			if err != nil && !errors.Is(err, policy.ErrConfig) {
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
