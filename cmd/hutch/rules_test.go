package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hutch rules check lists a good file's rules and names a bad one's
// problem; hutch rules test prints the decision on one call.
func TestRulesCheckAndTest(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "rules.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(good, []byte("rules:\n  - allow: shell npm test *\n  - deny: shell rm -rf *\n  - deny: read *.env\n"), 0o644))
	must(os.WriteFile(bad, []byte("rules:\n  - allow: shell npm test *\n  - alow: shell x\n"), 0o644))
	cases := []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{[]string{"rules", "check", good}, 0, good + ":3: deny shell rm -rf *\n", ""},
		{[]string{"rules", "check", bad}, 125, "", bad + `:3: unknown key "alow" in a rule`},
		{[]string{"rules", "test", good, "shell", "npm test && rm -rf /"}, 0, "deny by " + good + ":3: deny shell rm -rf *\n", ""},
		{[]string{"rules", "test", good, "shell", "npm test --ci"}, 0, "allow by " + good + ":2: allow shell npm test *\n", ""},
		{[]string{"rules", "test", good, "read", "config/prod.env"}, 0, "deny by " + good + ":4", ""},
		{[]string{"rules", "test", good, "fetch", "example.com"}, 0, "no rule: the permission mode decides\n", ""},
		{[]string{"rules", "test", good, "teleport", "x"}, 125, "", `unknown kind "teleport"`},
	}
	for _, c := range cases {
		code, out, errOut := hutch(t, "", c.args...)
		if code != c.code || !strings.Contains(out, c.stdout) || !strings.Contains(errOut, c.errs) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q, %q", c.args, code, out, errOut, c.code, c.stdout, c.errs)
		}
	}
}
