package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

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
