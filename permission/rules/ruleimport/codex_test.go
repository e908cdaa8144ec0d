package ruleimport

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/policy"
)

// checkRules fails unless res's rules, each as "origin: rule", are want,
// in order.
func checkRules(t *testing.T, res *Result, want []string) {
	t.Helper()
	var got []string
	for _, r := range res.Rules {
		got = append(got, r.Origin.String()+": "+r.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// noteLines is each note as its String.
func noteLines(ns []Note) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.String())
	}
	return out
}

// checkNotes fails unless every want is a substring of one line of got,
// and every line of got is wanted (so that no report goes untested).
func checkNotes(t *testing.T, what string, got, want []string) {
	t.Helper()
	used := make([]bool, len(got))
	for _, w := range want {
		i := slices.IndexFunc(got, func(g string) bool { return strings.Contains(g, w) })
		if i < 0 {
			t.Errorf("%s: no line holds %q; got:\n%s", what, w, strings.Join(got, "\n"))
			continue
		}
		used[i] = true
	}
	for i, u := range used {
		if !u {
			t.Errorf("%s: line not covered by the test: %s", what, got[i])
		}
	}
}

// errCase is a file's text and the one-line error importing it gives.
type errCase struct{ name, text, want string }

// wantOneLineErrors imports each case's text, as file name in a temporary
// directory, and fails unless the error matches ErrImport, holds want,
// and is one line.
func wantOneLineErrors(t *testing.T, src Source, name string, cases []errCase) {
	t.Helper()
	dir := t.TempDir()
	for _, c := range cases {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Import(src, []string{p}, Options{Root: "/proj"})
		if !errors.Is(err, ErrImport) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want one line holding %q", c.name, err, c.want)
		}
	}
}

// The Codex files in testdata/codex follow the published format
// (developers.openai.com/codex/rules; openai/codex
// codex-rs/execpolicy/README.md, docs/sandbox.md): each prefix_rule maps
// to one shell rule per alternative, decisions forbidden/prompt/allow to
// deny/ask/allow, every allow is reported as running inside hutch's
// sandbox, network rules become fetch rules and the policy's host lists,
// and config.toml's sandbox settings a policy with the differences
// reported.
func TestCodexRulesAndConfigMapWithEveryDifferenceReported(t *testing.T) {
	res, err := Import(Codex, []string{"testdata/codex/default.rules", "testdata/codex/config.toml"}, Options{Root: "/proj", Home: "/home/u"})
	if err != nil {
		t.Fatal(err)
	}
	const rf, cf = "testdata/codex/default.rules", "testdata/codex/config.toml"
	wantRules := []string{
		rf + ":7: ask shell gh pr view *",
		rf + ":22: ask shell git push *",
		rf + ":22: ask shell git fetch *",
		rf + ":29: deny shell rm -rf *",
		rf + ":36: allow shell npm test *",
		rf + ":36: allow shell npm run *",
		rf + ":42: allow fetch api.example.com",
		rf + ":43: deny fetch tracker.example.com",
	}
	checkRules(t, res, wantRules)
	if res.Rules[0].Reason != "Viewing PRs is allowed with approval" {
		t.Errorf("justification not kept as the reason: %q", res.Rules[0].Reason)
	}
	checkNotes(t, "reported", noteLines(res.Reported), []string{
		rf + `:40: host_executable("git"): hutch matches a command by the word it is run as`,
		rf + `:36: prefix_rule allow ["npm", "test"]: Codex's allow runs the command outside its sandbox; imported as an allow inside hutch's sandbox; hutch never runs commands outside it`,
		rf + `:36: prefix_rule allow ["npm", "run"]: Codex's allow runs the command outside its sandbox`,
		rf + `:38: prefix_rule allow ["echo", "Hello, world!"]: word "Hello, world!" is empty or holds a space`,
		rf + `:44: network_rule 10.0.0.1 socks5_tcp allow: protocol "socks5_tcp"`,
		cf + ":3: model: not a permission or sandbox setting",
		cf + ":5: sandbox_mode workspace-write: Codex also reads the whole disk",
		cf + ":6: network_access true: the host's whole network",
	})
	checkNotes(t, "mapped", noteLines(res.Mapped), []string{
		"gh pr view", "git push", "git fetch", "rm -rf", "npm test", "npm run",
		"-> allow fetch api.example.com", "-> policy network allow api.example.com",
		"-> deny fetch tracker.example.com", "-> policy network deny tracker.example.com",
		cf + ":5: sandbox_mode workspace-write -> policy write /proj, network only the hosts network_rule allows",
		"writable_roots /var/cache/build -> policy write /var/cache/build",
		"writable_roots out -> policy write /proj/out",
		"network_access true -> policy network all",
	})
	p := res.Policy
	if p == nil || !slices.Equal(p.Write, []string{"/proj", "/var/cache/build", "/proj/out"}) || p.Network != policy.NetworkAll ||
		!slices.Equal(p.Hosts, []string{"api.example.com"}) || !slices.Equal(p.DenyHosts, []string{"tracker.example.com"}) {
		t.Errorf("policy: %+v", p)
	}
	if res.Mode != permission.Ask || !strings.Contains(res.ModeWhy, "approval_policy on-request") {
		t.Errorf("mode %q (%s), want ask from approval_policy", res.Mode, res.ModeWhy)
	}
	if got := res.Summary(); got != "8 rules and 6 policy settings mapped, 8 reported" {
		t.Errorf("summary %q", got)
	}
}

// A prefix_rule's match and not_match examples are run against the hutch
// rules imported from it: a failing one fails the import, naming the
// rule and the example, unless Force.
func TestCodexExamplesAreRunAgainstTheImportedRules(t *testing.T) {
	_, err := Import(Codex, []string{"testdata/codex/bad-example.rules"}, Options{Root: "/proj"})
	if !errors.Is(err, ErrExamples) || !strings.Contains(err.Error(), `bad-example.rules:2: prefix_rule ["cargo", "test"]: match example "cargo build" matches no imported rule`) ||
		!strings.Contains(err.Error(), "--force") {
		t.Fatalf("err = %v", err)
	}
	res, err := Import(Codex, []string{"testdata/codex/bad-example.rules"}, Options{Root: "/proj", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	checkNotes(t, "failed", noteLines(res.Failed), []string{
		`match example "cargo build" matches no imported rule`,
		`not_match example "cargo test --all" matches the imported rule testdata/codex/bad-example.rules:2: allow shell cargo test *`,
	})
	// The passing examples of default.rules (gh pr view, git push/fetch,
	// rm -rf) held: that import had no failure.
	res, err = Import(Codex, []string{"testdata/codex/default.rules"}, Options{Root: "/proj"})
	if err != nil || len(res.Failed) != 0 {
		t.Fatalf("default.rules: %v %v", err, res.Failed)
	}
}

// A .rules file is a program: evaluation is bounded in steps, load() is
// refused, recursion is refused, expansion and rule counts are bounded,
// and bad calls are one-line errors naming the file and line.
func TestCodexHostileRulesFilesAreRefused(t *testing.T) {
	dir := t.TempDir()
	inline := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, file, want string
	}{
		{"endless loop", "testdata/codex/loop.rules", "loop.rules:2: evaluation took more than 1000000 steps"},
		{"load", "testdata/codex/load.rules", "load.rules:1: cannot load other.rules: load() is refused"},
		{"huge expansion", "testdata/codex/expand.rules", "expand.rules:3: prefix_rule's alternatives expand into more than 1000 rules"},
		{"recursion", "testdata/codex/recursion.rules", "called recursively"},
		{"too many calls", inline("many.rules", "for i in range(20000):\n    prefix_rule(pattern = [\"x\"])\n"), "many.rules:2: more than 10000 rules"},
		{"bad decision", inline("dec.rules", "prefix_rule(pattern = [\"ls\"], decision = \"maybe\")\n"), `dec.rules:1: prefix_rule: decision "maybe": write allow, prompt or forbidden`},
		{"empty pattern", inline("empty.rules", "prefix_rule(pattern = [])\n"), "empty.rules:1: prefix_rule: pattern cannot be empty"},
		{"non-string element", inline("num.rules", "prefix_rule(pattern = [\"ls\", 3])\n"), "num.rules:1: prefix_rule: pattern element 1 is a int"},
		{"unknown builtin", inline("open.rules", "open(\"/etc/passwd\")\n"), "open.rules:1:1: undefined: open"},
		{"syntax error", inline("syn.rules", "prefix_rule(\n"), "syn.rules:2"},
		{"repetition", inline("big.rules", "x = [\"a\"] * (1 << 28)\n"), "big.rules:1: the operator * is not available"},
		{"methods", inline("join.rules", "x = \"\".join([\"a\"])\n"), "join.rules:1: .join: methods are not available"},
		{"list of a huge range", inline("range.rules", "x = list(range(1073741824))\n"), "range.rules:1: list() is not available"},
		{"doubling", inline("double.rules", "s = \"ab\"\nfor i in range(60):\n    s = s + s\n"), "double.rules:3: evaluation allocated more than 64 MiB"},
		// A built-in's own loop is one step: bounded on its own.
		{"all over a huge range", inline("all.rules", "x = all(range(1, 1000000000000000000))\n"), "all.rules:1: all() over more than 100000 elements"},
		{"max over a huge range", inline("max.rules", "x = max(range(1000000000000000000))\n"), "max.rules:1: max() over more than 100000 elements"},
		{"int of a huge string", inline("int.rules", "x = int(\""+strings.Repeat("9", 100000)+"\")\n"), "int.rules:1: int(): a string of 100000 characters"},
		{"huge pattern word", inline("word.rules", "s = \"a\"\nfor i in range(20):\n    s = s + s\nprefix_rule(pattern = [s])\n"), "word.rules:4: prefix_rule: a pattern word of 1048576 bytes"},
		{"too many examples", inline("exs.rules", "m = [\"x\" for i in range(20000)]\nprefix_rule(pattern = [\"x\"], match = m)\n"), "exs.rules:2: prefix_rule: more than 10000 match and not_match examples"},
		{"deep nesting", inline("nest.rules", "x = "+strings.Repeat("[", 100000)+strings.Repeat("]", 100000)+"\n"), "nest.rules:1:82: excessive nesting"},
		{"larger than MaxFile", inline("huge.rules", "# "+strings.Repeat("x", MaxFile)+"\n"), "larger than 1048576 bytes"},
		{"bad example", inline("ex.rules", "prefix_rule(pattern = [\"ls\"], match = [\"'unclosed\"])\n"), "match example 0"},
		{"danger-full-access without --full-access", "testdata/codex/full.toml", "full.toml:2: sandbox_mode danger-full-access runs commands without a sandbox, which hutch never does: pass --full-access"},
		{"bad toml", inline("bad.toml", "sandbox_mode = \n"), "bad.toml"},
		{"unknown sandbox mode", inline("mode.toml", "sandbox_mode = \"yolo\"\n"), `mode.toml:1: unknown sandbox_mode "yolo"`},
	}
	for _, c := range cases {
		_, err := Import(Codex, []string{c.file}, Options{Root: "/proj"})
		if !errors.Is(err, ErrImport) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v; want one line holding %q", c.name, err, c.want)
		}
	}
}

// danger-full-access maps to hutch's widest policy only with FullAccess,
// and approval_policy never suggests auto.
func TestCodexFullAccessNeedsTheFlag(t *testing.T) {
	res, err := Import(Codex, []string{"testdata/codex/full.toml"}, Options{Root: "/proj", FullAccess: true})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Policy
	if !slices.Equal(p.Read, []string{"/"}) || !slices.Equal(p.Write, []string{"/proj"}) || p.Network != policy.NetworkAll {
		t.Errorf("policy %+v", p)
	}
	checkNotes(t, "reported", noteLines(res.Reported), []string{"full.toml:2: sandbox_mode danger-full-access: no hutch equivalent; mapped to hutch's widest policy"})
	if res.Mode != permission.Auto {
		t.Errorf("mode %q", res.Mode)
	}
}
