package ruleimport

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission/rules"
)

// testdata/gemini/policy.toml follows Gemini CLI's published schema
// (geminicli.com/docs/reference/policy-engine, "TOML rule schema"):
// tool names map to hutch's kinds, commandPrefix (a string or a list) to
// word-prefix shell rules, a literal commandRegex likewise, denyMessage
// to the reason; argsPattern, a real regular expression, MCP servers,
// unknown tools and keys, conditions hutch cannot test (interactive,
// modes) are reported, and so is every pair where a higher-priority
// weaker rule would win in Gemini CLI but hutch's strictest rule wins.
func TestGeminiPolicyMapsWithPriorityConflictsReported(t *testing.T) {
	const f = "testdata/gemini/policy.toml"
	res, err := Import(Gemini, []string{f}, Options{Root: "/proj"})
	if err != nil {
		t.Fatal(err)
	}
	wantRules := []string{
		f + ":5: ask shell git *",
		f + ":11: allow shell git status *",
		f + ":11: allow shell git diff *",
		f + ":17: deny shell rm -rf *",
		f + ":30: allow shell npm test *",
		f + ":36: ask write *",
		f + ":41: allow read *",
		f + ":52: deny fetch *",
		f + ":58: allow search",
		f + ":81: allow shell npm install *",
	}
	checkRules(t, res, wantRules)
	if i := slices.IndexFunc(res.Rules, func(r rules.Rule) bool { return r.Pattern == "rm -rf *" }); res.Rules[i].Reason != "Deletion is permanent" {
		t.Errorf("denyMessage not kept: %+v", res.Rules[i])
	}
	checkNotes(t, "reported", noteLines(res.Reported), []string{
		f + ":87: colour: not a key of a Gemini CLI policy rule",
		f + `:24: ask_user run_shell_command (priority 10): commandRegex "git (commit|push)" is not a plain literal prefix; hutch's shell rules are word prefixes: not imported (the calls this ask stopped are now decided by the other rules`,
		f + `:46: deny read_file (priority 60): argsPattern "\"file_path\":\".*\\.env\"" is a regular expression over the arguments' JSON; hutch's rules cannot express it: not imported (the calls this deny stopped`,
		f + ":52: deny web_fetch only when modes plan, which hutch cannot test: imported as a deny in every case",
		f + ":58: modes default, autoEdit, yolo: hutch's rules apply in every mode",
		f + ":64: allow save_memory (priority 1): Gemini CLI's save_memory tool has no hutch equivalent",
		f + ":69: mcpName my-custom-server: skipped",
		f + ":74: allow run_shell_command only when interactive = true, which hutch cannot test; without it the rule would cover more calls: not imported",
		f + ":81: allowRedirection: hutch's allow rules never cover a redirection",
		f + `:89: decision "maybe": Gemini CLI takes allow, deny or ask_user`,
		f + ":11: allow shell git status * (priority 200) outranks " + f + ":5: ask shell git * (priority 100) in Gemini CLI for calls both match; hutch's strictest rule wins, so hutch would ask them",
		f + ":11: allow shell git diff * (priority 200) outranks " + f + ":5: ask shell git * (priority 100)",
	})
	checkNotes(t, "mapped", noteLines(res.Mapped), []string{
		`commandPrefix "git" -> ask shell git *`, `commandPrefix "git status" ->`, `commandPrefix "git diff" ->`,
		`commandPrefix "rm -rf" -> deny shell rm -rf *`, `commandRegex "npm test" -> allow shell npm test *`,
		"ask_user write_file (priority 10) -> ask write *", "ask_user replace (priority 10) -> ask write * (already imported from this rule)",
		"allow read_file (priority 50) -> allow read *", "deny web_fetch (priority 5) -> deny fetch *",
		"allow google_web_search (priority 5) -> allow search", `commandPrefix "npm install" -> allow shell npm install *`,
	})
}

// A commandRegex maps only when it is a plain literal prefix.
func TestGeminiRegexMapsOnlyWhenALiteralPrefix(t *testing.T) {
	for _, c := range []struct {
		re, want string
		ok       bool
	}{
		{"npm test", "npm test", true},
		{`^git\s`, "git", true},
		{`make\b`, "make", true},
		{`python3\.11 -m pytest`, "python3.11 -m pytest", true},
		{"python3.11", "", false}, // a bare . is any character
		{"git (commit|push)", "", false},
		{"rm -rf .*", "", false},
		{"", "", false},
	} {
		got, ok := literalPrefix(c.re)
		if ok != c.ok || got != c.want {
			t.Errorf("%q: %q %v, want %q %v", c.re, got, ok, c.want, c.ok)
		}
	}
}

// Bad TOML and wrongly typed fields are reported or refused, one line.
func TestGeminiBadPolicyFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		p := filepath.Join(dir, "p.toml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	_, err := Import(Gemini, []string{write("[[rule]\n")}, Options{Root: "/proj"})
	if !errors.Is(err, ErrImport) || !strings.Contains(err.Error(), "p.toml") || strings.Contains(err.Error(), "\n") {
		t.Errorf("bad TOML: %v", err)
	}
	res, err := Import(Gemini, []string{write("[[rule]]\ntoolName = 3\ndecision = \"allow\"\n[[rule]]\ncommandPrefix = [\"ls\", 1]\ndecision = \"allow\"\n[other]\nx = 1\n")}, Options{Root: "/proj"})
	if err != nil {
		t.Fatal(err)
	}
	checkNotes(t, "reported", noteLines(res.Reported), []string{
		"p.toml:1: toolName is 3: write a string or a list of strings",
		"p.toml:4: commandPrefix holds 1, not a string",
		"other: not a Gemini CLI policy setting",
	})
}
