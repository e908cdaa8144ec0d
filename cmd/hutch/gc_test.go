package main

import (
	"strings"
	"testing"
)

// hutch gc wires its flags to container.GC: a runtime it cannot sweep is
// a one-line error (exit 125), and a dry run on docker lists, removes
// nothing and exits 0.
func TestGCCommand(t *testing.T) {
	needRuntime(t, "docker", envOrDefault("HUTCH_TEST_IMAGE", "hutch-test-busybox:latest"))
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"gc", "--dry-run"}, 0, ""},
		{[]string{"gc", "--runtime", "apple"}, 125, "Apple's container runtime is not supported"},
		{[]string{"gc", "--runtime", "lxc"}, 125, `unknown runtime "lxc"`},
		{[]string{"gc", "extra"}, 125, "unknown command"},
	} {
		code, out, errs := hutch(t, "", c.args...)
		if code != c.code || !strings.Contains(errs, c.err) || strings.Count(errs, "\n") > 1 || (c.args[1] == "--dry-run" && strings.Contains(out, "removed")) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d and %q", c.args, code, out, errs, c.code, c.err)
		}
	}
}
