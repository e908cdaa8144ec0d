package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/policy"
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

// hutch rules import writes a rules file that loads, a policy file where
// the source describes the sandbox, the account on stderr, and refuses
// to overwrite without --force or to import failing Codex examples.
func TestRulesImport(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Formats as published: code.claude.com/docs/en/settings,
	// developers.openai.com/codex/rules, the sandbox-runtime README.
	claude := write("proj/.claude/settings.json", `{"permissions": {"allow": ["Bash(npm run test:*)"], "deny": ["Read(./.env)", "mcp__x__y"], "defaultMode": "plan"}}`)
	codex := write("default.rules", "prefix_rule(pattern = [\"git\", \"push\"], decision = \"forbidden\", match = [\"git push origin\"])\n")
	bad := write("bad.rules", "prefix_rule(pattern = [\"cargo\", \"test\"], match = [\"cargo build\"])\n")
	srt := write("srt.json", `{"filesystem": {"allowWrite": ["."], "denyWrite": [".env"]}, "network": {"allowedDomains": ["github.com"]}}`)
	out, pol := filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "policy.yaml")
	cases := []struct {
		name         string
		args         []string
		code         int
		stdout, errs string
	}{
		{"claude to a file", []string{"rules", "import", "--from", "claude", claude, "-o", out}, 0, "",
			"not mapped: " + claude + ":1: deny mcp__x__y: skipped"},
		{"no overwrite", []string{"rules", "import", "--from", "claude", claude, "-o", out}, 125, "", out + " exists: pass --force"},
		{"overwrite with --force", []string{"rules", "import", "--from", "claude", claude, "-o", out, "--force"}, 0, "", "mode: run hutch with --mode read_only"},
		{"codex to stdout", []string{"rules", "import", "--from", "codex", codex}, 0, "- deny: shell git push * # from " + codex + ":1", "1 rules and 0 policy settings mapped, 0 reported"},
		{"failing example", []string{"rules", "import", "--from", "codex", bad}, 125, "", `match example "cargo build" matches no imported rule`},
		{"srt needs --policy-out", []string{"rules", "import", "--from", "srt", srt}, 125, "", "give --policy-out FILE"},
		{"srt policy", []string{"rules", "import", "--from", "srt", srt, "--policy-out", pol, "--root", dir}, 0, "", "denyWrite .env -> policy protect .env"},
		{"unknown source", []string{"rules", "import", "--from", "cursor", srt}, 125, "", `unknown source "cursor"`},
		{"no --from", []string{"rules", "import", srt}, 125, "", "--from is required"},
	}
	for _, c := range cases {
		code, stdout, errOut := hutch(t, "", c.args...)
		if code != c.code || !strings.Contains(stdout, c.stdout) || !strings.Contains(errOut, c.errs) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d, %q, %q", c.name, code, stdout, errOut, c.code, c.stdout, c.errs)
		}
	}
	// The rules file round-trips through hutch rules check; the policy
	// loads (hutch run --policy reads it the same way).
	code, stdout, _ := hutch(t, "", "rules", "check", out)
	if code != 0 || !strings.Contains(stdout, "allow shell npm run test *") || !strings.Contains(stdout, "deny read /.env") {
		t.Errorf("rules check: %d %q", code, stdout)
	}
	if _, err := policy.Load(pol); err != nil {
		t.Errorf("policy: %v", err)
	}
}
