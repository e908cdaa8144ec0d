package main

import (
	"strings"
	"testing"

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
