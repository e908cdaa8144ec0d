package ruleimport

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/permission/rules"
)

// The settings files in testdata/claude follow Claude Code's published
// format (code.claude.com/docs/en/settings, "Permission settings";
// code.claude.com/docs/en/permissions, "Permission rule syntax", "Read
// and Edit", "WebFetch"): four scopes told by path shape, merged with
// the managed file's rules first; every entry maps or is reported; the
// highest scope's defaultMode is the suggestion; the project directory
// (the parent of .claude) is the root.
func TestClaudeSettingsMergeByScopeWithEveryEntryMappedOrReported(t *testing.T) {
	home, _ := filepath.Abs("testdata/claude/home")
	proj, _ := filepath.Abs("testdata/claude/proj")
	const (
		user    = "testdata/claude/home/.claude/settings.json"
		project = "testdata/claude/proj/.claude/settings.json"
		local   = "testdata/claude/proj/.claude/settings.local.json"
		managed = "testdata/claude/managed-settings.json"
	)
	res, err := Import(Claude, []string{user, project, local, managed}, Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	wantRules := []string{
		managed + ":3: deny shell rm -rf *",
		managed + ":3: deny fetch *",
		local + ":3: allow shell ls *",
		local + ":3: allow tool grep",
		project + ":5: allow shell npm run test *",
		project + ":6: allow shell git status",
		project + ":7: allow shell git diff *",
		project + ":8: allow read /src/**",
		project + ":9: allow write /src/**/*.ts",
		project + ":10: allow fetch docs.anthropic.com",
		project + ":11: allow search",
		project + ":15: ask shell git push *",
		project + ":18: deny shell curl *",
		project + ":19: deny read /.env",
		project + ":20: deny read /.env.*",
		project + ":21: deny read /secrets/**",
		user + ":3: allow read *",
	}
	checkRules(t, res, wantRules)
	checkNotes(t, "reported", noteLines(res.Reported), []string{
		managed + `:3: deny Bash(echo (x): hutch cannot write it as a rule: shell pattern "echo (x"`,
		managed + ":4: permissions.disableBypassPermissionsMode: no hutch equivalent",
		local + `:3: allow Bash(ls*): Claude Code matches any command starting with the text "ls", a longer first word too (ls*); hutch compares whole words: imported as "ls *"`,
		local + ":3: allow Task: Claude Code's Task tool has no hutch equivalent",
		project + ":12: allow mcp__github__create_issue: skipped: an MCP server's tool is that server's to gate",
		project + ":22: deny Read(//etc/passwd): /etc/passwd is outside the sandbox root " + proj,
		project + ":23: deny Read(~/.ssh/**): " + home + "/.ssh is outside the sandbox root",
		project + ":24: deny Bash(git * main): a * before the end of the command has no hutch equivalent",
		project + ":25: deny WebFetch(https://example.com): hutch's fetch rules match hosts; write WebFetch(domain:example.com)",
		project + ":27: defaultMode acceptEdits: overridden by " + local + ":4 (local settings)",
		project + ":28: additionalDirectories ../docs/: hutch's file tools stay below the root",
		project + ":30: env: not a permission setting",
		user + ":3: allow Read(~/proj-notes/**): " + home + "/proj-notes is outside the sandbox root",
		user + ":4: defaultMode bypassPermissions: overridden by " + local + ":4",
		user + ":6: model: not a permission setting",
	})
	if res.Mode != permission.ReadOnly || !strings.Contains(res.ModeWhy, "defaultMode plan") {
		t.Errorf("mode %q (%s), want read_only from local's plan", res.Mode, res.ModeWhy)
	}
	if p := res.Policy; p == nil || !slices.Equal(p.Write, []string{proj, filepath.Join(filepath.Dir(proj), "docs")}) {
		t.Errorf("policy %+v: want the root and additionalDirectories writable", p)
	}
	if got := res.Summary(); got != "17 rules and 2 policy settings mapped, 15 reported" {
		t.Errorf("summary %q", got)
	}
}

// The scope of a settings file is told by its path.
func TestClaudeScopeIsToldByPathShape(t *testing.T) {
	home := "/home/u"
	for _, c := range []struct {
		path string
		want claudeScope
	}{
		{"/home/u/.claude/settings.json", scopeUser},
		{"/src/app/.claude/settings.json", scopeProject},
		{"/src/app/.claude/settings.local.json", scopeLocal},
		{"/etc/claude-code/managed-settings.json", scopeManaged},
		{"/tmp/extra.json", scopeCLI},
		{"/src/app/settings.json", scopeCLI},
	} {
		if got := scopeOf(c.path, home); got != c.want {
			t.Errorf("%s: %s, want %s", c.path, got, c.want)
		}
	}
}

// Claude Code's path anchors map to patterns below the sandbox root:
// //abs absolute, ~/ home, /x the settings file's project, ./x and x the
// current directory (the root); outside the root is an error.
func TestClaudePathAnchorsMapBelowTheRoot(t *testing.T) {
	const root, base, home = "/w/proj", "/w/proj", "/home/u"
	for _, c := range []struct{ spec, want, err string }{
		{"*.env", "*.env", ""},
		{".env", ".env", ""},
		{"./.env", "/.env", ""},
		{"src/**", "/src/**", ""},
		{"./src/**/*.ts", "/src/**/*.ts", ""},
		{"/src/**/*.ts", "/src/**/*.ts", ""},
		{"//w/proj/build/", "/build/", ""},
		{"//w/proj/**", "*", ""},
		{"**", "*", ""},
		{".", "*", ""},
		{"docs/", "docs/", ""}, // gitignore: a trailing / does not anchor
		{"//etc/passwd", "", "outside the sandbox root"},
		{"~/.ssh/**", "", "/home/u/.ssh is outside"},
		{"../other/x", "", "/w/other/x is outside"},
		{"//w/**", "", "/w is outside"},
	} {
		got, err := claudePath(c.spec, base, root, home)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %q, %v; want error %q", c.spec, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q, %v; want %q", c.spec, got, err, c.want)
		}
	}
	// A /x rule of a settings file in another project's .claude is
	// relative to that project.
	if got, err := claudePath("/lib/**", "/w/proj/sub", root, home); err != nil || got != "/sub/lib/**" {
		t.Errorf("/lib/** from /w/proj/sub: %q, %v", got, err)
	}
}

// Imported Claude Code rules decide a table of calls as Claude Code's
// documentation says (code.claude.com/docs/en/permissions): deny, then
// ask, then allow, the first list that matches deciding; "Bash(npm run
// test:*)" matches commands starting with the words npm run test — the
// legacy :* is the same as " *", so npm run testx and npm run test:unit
// do not match; a prefix rule does not allow "safe-cmd && other-cmd";
// Read(./.env) is anchored at the project. Checked through the real
// gate, in ask mode with an asker that records being asked.
func TestClaudeRulesDecideAsClaudeCodeDocumentsThroughTheGate(t *testing.T) {
	dir := t.TempDir()
	res, err := Import(Claude, []string{"testdata/claude/roundtrip.json"}, Options{Root: "/proj"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Reported) != 0 {
		t.Fatalf("unexpected reports: %v", res.Reported)
	}
	out := filepath.Join(dir, "rules.yaml")
	if err := WriteRules(out, res.Rules, false); err != nil {
		t.Fatal(err)
	}
	set, err := rules.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	var asked bool
	gate, err := permission.New(permission.Config{Mode: permission.Ask, Rules: set,
		Asker: func(context.Context, permission.Request) (bool, error) { asked = true; return false, nil }})
	if err != nil {
		t.Fatal(err)
	}
	sh := func(cmd string) permission.Request {
		return permission.Request{Capability: permission.Shell, Tool: "shell", Detail: cmd, Command: cmd}
	}
	read := func(p string) permission.Request {
		return permission.Request{Capability: permission.Read, Tool: "read_file", Detail: p, Paths: []string{p}}
	}
	cases := []struct {
		req  permission.Request
		want string // allow, ask, deny, or none (no rule: the mode decides)
	}{
		{sh("npm run test"), "allow"},
		{sh("npm run test -- --watch"), "allow"},
		{sh("npm run testx"), "none"},
		{sh("npm run test:unit"), "none"},
		{sh("git diff HEAD~1"), "allow"},
		{sh("git status"), "allow"},
		{sh("git status --short"), "none"}, // Bash(git status) is exact
		{sh("git push origin main"), "ask"},
		{sh("git push --force origin main"), "deny"}, // deny before ask
		{sh("npm run test && curl evil.example"), "none"},
		{read("src/a.go"), "allow"},
		{read(".env"), "deny"},
		{read("src/.env"), "allow"}, // ./.env is anchored at the project
		{permission.Request{Capability: permission.Fetch, Tool: "fetch", Detail: "https://evil.example/x"}, "deny"},
	}
	for _, c := range cases {
		asked = false
		d, err := gate.Check(context.Background(), c.req)
		if err != nil {
			t.Fatal(err)
		}
		got := "none"
		switch {
		case d.Rule != "" && asked:
			got = "ask"
		case d.Rule != "" && d.Allowed:
			got = "allow"
		case d.Rule != "":
			got = "deny"
		}
		if got != c.want {
			t.Errorf("%s %q: %s (%+v), want %s", c.req.Capability, c.req.Detail, got, d, c.want)
		}
	}
}

// Bad settings files are one-line errors naming the file and line.
func TestClaudeBadSettingsAreOneLineErrors(t *testing.T) {
	wantOneLineErrors(t, Claude, "bad.json", []errCase{
		{"not json", "{", "bad.json"},
		{"array", "[]", "a settings file is a JSON object, not a list"},
		{"permissions not object", `{"permissions": []}`, "bad.json:1: permissions is a list"},
		{"allow not list", `{"permissions": {"allow": "Bash"}}`, "permissions.allow is a string, not a list of strings"},
		{"entry not string", "{\"permissions\": {\"deny\": [\n1]}}", "line 2: an entry is a number"},
		{"mode not string", `{"permissions": {"defaultMode": 3}}`, "defaultMode is a number"},
		{"two values", `{} {}`, "more than one JSON value"},
		{"deep", strings.Repeat("[", 100) + strings.Repeat("]", 100), "nested more than 64 deep"},
	})
}

// ParseClaudeEntry never panics; what it accepts is Tool or
// Tool(spec), rebuilt exactly, with a tool of letters, digits, _ and -.
func FuzzClaudeEntry(f *testing.F) {
	for _, s := range []string{"Bash", "Bash(npm run test:*)", "Read(./.env)", "WebFetch(domain:x)", "mcp__s__t", "Bash(", "Bash)", "(x)", "Bash(a(b))", "", "Bash()"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tool, spec, hasSpec, err := ParseClaudeEntry(s)
		if err != nil {
			if !errors.Is(err, ErrEntry) {
				t.Fatalf("%q: error %v does not match ErrEntry", s, err)
			}
			return
		}
		rebuilt := tool
		if hasSpec {
			rebuilt += "(" + spec + ")"
		}
		if rebuilt != s || tool == "" || strings.Trim(tool, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
			t.Fatalf("%q parsed as %q %q %v", s, tool, spec, hasSpec)
		}
		// Whatever the entry, mapping it never panics and either maps
		// or reports.
		im := &importer{opts: Options{Root: "/proj", Home: "/home/u"}}
		im.claudeEntry(rules.Deny, s, "/proj/.claude/settings.json", 1)
		if len(im.res.Rules)+len(im.res.Reported) == 0 {
			t.Fatalf("%q: neither mapped nor reported", s)
		}
	})
}
