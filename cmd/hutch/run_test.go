package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
)

// hutch run --help states the default policy's limits, this host's
// memory limit among them, and how to lift them.
func TestRunHelpStatesTheDefaultLimits(t *testing.T) {
	code, out, _ := hutch(t, "", "run", "--help")
	help := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"at most 1024 processes and threads", "half the host's memory (at most 8 GiB; " + policy.DefaultMemory().String() + " here)",
		"--pids unlimited and --memory unlimited lift those two limits", "--pids N isolated: at most N processes and threads at once, or unlimited (default 1024)"} {
		if code != 0 || !strings.Contains(help, want) {
			t.Errorf("run --help: exit %d, lacks %q:\n%s", code, want, out)
		}
	}
}

// sandboxGroupParents are the directories where this process's sandboxes
// make their memory and pids groups (what it inherits, its children do
// too): v1's per controller, or v2's one.
func sandboxGroupParents(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "memory" || c == "pids" {
				dirs = append(dirs, filepath.Join("/sys/fs/cgroup", c, f[2]))
			}
		}
		if f[0] == "0" && f[1] == "" {
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				dirs = append(dirs, filepath.Join("/sys/fs/cgroup", f[2]))
			}
		}
	}
	return dirs
}

// sandboxGroups are the hutch groups in dirs.
func sandboxGroups(dirs []string) map[string]bool {
	m := map[string]bool{}
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), "hutch-") {
				m[filepath.Join(d, e.Name())] = true
			}
		}
	}
	return m
}

// killTree kills pid and every process below it with SIGKILL, and reaps c.
func killTree(c *exec.Cmd) {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := strings.LastIndexByte(string(stat), ')'); err == nil && i > 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 {
				p, _ := strconv.Atoi(e.Name())
				parent[p], _ = strconv.Atoi(f[1])
			}
		}
	}
	var kill func(int)
	kill = func(p int) {
		_ = syscall.Kill(p, syscall.SIGSTOP) // no new children meanwhile
		for c, pp := range parent {
			if pp == p {
				kill(c)
			}
		}
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	kill(c.Process.Pid)
	_ = c.Wait()
}

// A hutch killed with SIGKILL cannot remove its sandbox's memory and pids
// groups (one pair per run, since the default policy has limits): every
// sandbox first removes the empty groups of hutch processes that are
// gone, and only those; a running sandbox's stay.
func TestRunKilledLeavesNoCgroupBehind(t *testing.T) {
	if os.Getuid() != 0 {
		testenv.Missing(t, "cgroups need root")
	}
	dirs := sandboxGroupParents(t)
	if len(dirs) == 0 {
		testenv.Missing(t, "no memory or pids cgroup here")
	}
	start := func(t *testing.T) (*exec.Cmd, []string) {
		t.Helper()
		before := sandboxGroups(dirs)
		c := hutchCommand("run", "--pids", "32", "--memory", "128M", "--", "sleep", "100")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		var made []string
		t.Cleanup(func() {
			killTree(c)
			time.Sleep(100 * time.Millisecond) // its processes leave the groups
			for _, g := range made {
				sweepForTest(g)
			}
		})
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			made = nil
			for g := range sandboxGroups(dirs) {
				if !before[g] {
					made = append(made, g)
				}
			}
			if len(made) == len(dirs) {
				return c, made
			}
		}
		t.Fatal("hutch run made no groups within 10 s")
		return nil, nil
	}
	killed, leaked := start(t)
	_, running := start(t)
	killTree(killed)
	// The killed sandbox's processes leave its groups.
	for _, g := range leaked {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if procs, err := os.ReadFile(filepath.Join(g, "cgroup.procs")); err != nil || len(procs) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("processes still in %s 10 s after the kill", g)
			}
		}
	}
	if code, out := hutchChild(t, t.TempDir(), "run", "--pids", "32", "--memory", "128M", "--", "true"); code != 0 {
		t.Fatalf("hutch run true: exit %d: %s", code, out)
	}
	for _, g := range leaked {
		if _, err := os.Stat(g); err == nil {
			t.Errorf("the killed hutch's group %s is still there after the next sandbox", g)
			sweepForTest(g)
		}
	}
	for _, g := range running {
		if _, err := os.Stat(g); err != nil {
			t.Errorf("a running sandbox's group %s was removed: %v", g, err)
		}
	}
}

// sweepForTest removes a group a test leaked, its subgroups first.
func sweepForTest(g string) {
	for _, sub := range []string{"cmd", "hutch"} {
		_ = os.Remove(filepath.Join(g, sub))
	}
	_ = os.Remove(g)
}

// Deny wins on the container tier as on the isolated one: with --read
// DIR/sub --deny DIR the command cannot read DIR/sub, and with --write
// DIR/sub --deny DIR it cannot write there.
// Origin: review 5.
func TestRunContainerDenyHidesBindBelow(t *testing.T) {
	image := dockerImage(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub", "f"), "s3cret\n")
	// Control: the isolated tier hides it.
	if code, out, errs := hutch(t, "", "run", "--read", dir+"/sub", "--deny", dir, "--", "cat", dir+"/sub/f"); strings.Contains(out, "s3cret") {
		t.Fatalf("isolated: exit %d %q %q", code, out, errs)
	}
	code, out, errs := hutch(t, "", "run", "--tier", "container", "--image", image, "--read", dir+"/sub", "--deny", dir, "--", "cat", dir+"/sub/f")
	if strings.Contains(out, "s3cret") {
		t.Errorf("container: --deny %s did not hide %s/sub/f (exit %d, %q %q)", dir, dir, code, out, errs)
	}
	code, out, errs = hutch(t, "", "run", "--tier", "container", "--image", image, "--write", dir+"/sub", "--deny", dir, "--dir", "/tmp",
		"--", "sh", "-c", "echo x > "+dir+"/sub/planted")
	if _, err := os.Stat(filepath.Join(dir, "sub", "planted")); err == nil {
		t.Errorf("container: wrote inside the denied %s (exit %d, %q %q)", dir, code, out, errs)
	}
}

// --root is the local tier's: on the isolated (default) tier it is
// refused, as other tiers' flags are on the wrong tier, not ignored while
// the command runs without the directory the user named.
// Origin: review 5.
func TestRunRootRefusedOffLocalTier(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := hutch(t, "", "run", "--root", dir, "--", "pwd")
	if code == 0 {
		t.Errorf("--root %s on the isolated tier was ignored (ran in %q, stderr %q); want 125: --root applies to --tier local", dir, strings.TrimSpace(out), errs)
	}
}

// hutch run --rules checks the command against the file's shell rules
// before it runs: a deny or an ask (nobody can be asked) refuses it with
// one line naming the rule and exit status 125; an allow or no match
// runs it.
func TestRunChecksTheCommandAgainstTheRules(t *testing.T) {
	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesFile, []byte("rules:\n  - allow: shell echo *\n  - deny: shell touch *\n    reason: no files\n  - ask: shell rm *\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	local := []string{"run", "--tier", "local", "--root", dir, "--rules", rulesFile}
	cases := []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"--", "echo", "hi"}, 0, "hi\n", ""},
		{[]string{"-c", "echo a && touch " + dir + "/x"}, 125, "", "denied by rule " + rulesFile + ":3: deny shell touch * (no files)"},
		{[]string{"--", "touch", dir + "/x"}, 125, "", "deny shell touch *"},
		{[]string{"-c", "true; rm " + dir + "/x"}, 125, "", "rule " + rulesFile + ":5: ask shell rm * asks a person"},
		{[]string{"--", "true"}, 0, "", ""},
	}
	for _, c := range cases {
		code, out, errOut := hutch(t, "", append(slices.Clone(local), c.args...)...)
		if code != c.code || out != c.stdout || !strings.Contains(errOut, c.stderr) || strings.Count(errOut, "\n") > 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q, %q", c.args, code, out, errOut, c.code, c.stdout, c.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("a refused command ran")
	}
	code, _, errOut := hutch(t, "", "run", "--tier", "local", "--root", dir, "--rules", filepath.Join(dir, "missing.yaml"), "--", "true")
	if code != 125 || !strings.Contains(errOut, "rules file") {
		t.Errorf("missing rules file: exit %d, %q", code, errOut)
	}
}
