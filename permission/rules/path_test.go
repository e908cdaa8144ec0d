package rules_test

import (
	"cmp"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/permission/rules"
)

func toolPathVerdict(s *rules.Set, tool string, c permission.Capability, recursive bool, paths ...string) string {
	m, ok := s.Match(permission.Request{Capability: c, Tool: tool, Paths: paths, Recursive: recursive})
	if !ok {
		return ""
	}
	return string(m.Verdict)
}

func TestPathsMatchGitignoreStyleBelowTheRoot(t *testing.T) {
	s := mustSet(t, `rules:
  - allow: read src/**
  - allow: write /build/
  - allow: edit docs/*.md
  - deny: read *.env
  - deny: write **/secrets/*
  - ask: write /Makefile
  - deny: read /private/key
`)
	tests := []struct {
		c         permission.Capability
		recursive bool
		paths     []string
		want      string
		tool      string // "t" if empty
	}{
		{permission.Read, false, []string{"src/a.go"}, "allow", ""},
		{permission.Read, false, []string{"src/deep/a.go"}, "allow", ""},
		{permission.Read, false, []string{"src"}, "", ""}, // src/** is what is inside src
		{permission.Read, false, []string{"./src/../src/a.go"}, "allow", ""},
		{permission.Read, false, []string{"src/.env"}, "deny", ""},
		{permission.Read, false, []string{".env"}, "deny", ""},
		{permission.Read, false, []string{"a/b/prod.env"}, "deny", ""},
		{permission.Glob, false, []string{"x/.env"}, "deny", ""}, // read rules cover glob
		{permission.Read, false, []string{"src/a.go", "x/.env"}, "deny", ""},
		{permission.Read, false, []string{"src/a.go", "other.go"}, "", ""}, // every path must be allowed
		{permission.Write, false, []string{"build/out/x.o"}, "allow", ""},
		{permission.Write, false, []string{"build"}, "allow", ""},
		{permission.Write, false, []string{"sub/build/x"}, "", ""}, // anchored at the root
		{permission.Write, false, []string{"docs/a.md"}, "allow", ""},
		{permission.Write, false, []string{"docs/x/a.md"}, "", ""},
		{permission.Write, false, []string{"a/secrets/k"}, "deny", ""},
		{permission.Write, false, []string{"secrets/k/deeper"}, "deny", ""},
		{permission.Write, false, []string{"Makefile"}, "ask", ""},
		{permission.Write, false, []string{"build/a", "Makefile"}, "ask", ""},
		{permission.Write, false, []string{"build/a", "a/secrets/x"}, "deny", ""},
		// Recursive calls: a deny below the directory applies.
		{permission.Read, true, []string{"."}, "deny", ""}, // *.env may lie anywhere
		{permission.Write, true, []string{"a"}, "deny", ""},
		{permission.Write, true, []string{"build"}, "deny", ""}, // build/secrets/x may be below
		// Paths that cannot be normalised are never allowed.
		{permission.Read, false, []string{"../src/a.go"}, "", ""},
		{permission.Read, false, []string{"src/../../src/a.go"}, "", ""},
		{permission.Read, false, []string{"/src/a.go"}, "", ""},
		{permission.Read, false, []string{"src/a\x00.go"}, "", ""},
		{permission.Read, false, []string{""}, "", ""},
		{permission.Read, false, []string{"../.env"}, "deny", ""},
		{permission.Read, false, []string{"/etc/x.env"}, "deny", ""},
		// Deny and ask rules ignore case (a file system may): .ENV is .env.
		{permission.Read, false, []string{".ENV"}, "deny", ""},
		{permission.Read, false, []string{"a/PROD.Env"}, "deny", ""},
		{permission.Write, false, []string{"A/Secrets/k"}, "deny", ""},
		{permission.Read, false, []string{"SRC/a.go"}, "", ""}, // allow rules do not
		// A write that moves or reads a file is checked against read
		// deny and ask rules too: moved, .env could be read as x.
		{permission.Write, false, []string{".env", "build/x"}, "deny", "move"},
		{permission.Write, false, []string{"build/x", "build/y.env"}, "allow", "move"}, // the target is not read
		{permission.Write, true, []string{"private", "build/p"}, "deny", "move"},       // private/key moves with it
		{permission.Write, false, []string{"build/a", "private/key"}, "deny", "apply_patch"},
		{permission.Write, false, []string{"private/key"}, "deny", "edit_file"},
		{permission.Write, false, []string{"private/key"}, "", "write_file"},
	}
	for _, tt := range tests {
		got := toolPathVerdict(s, cmp.Or(tt.tool, "t"), tt.c, tt.recursive, tt.paths...)
		if got != tt.want {
			t.Errorf("%s %q (recursive %v): %q, want %q", tt.c, tt.paths, tt.recursive, got, tt.want)
		}
	}
}

func TestARequestWithoutPathsIsNeverAllowedByAPathRule(t *testing.T) {
	s := mustSet(t, "rules:\n  - allow: read *\n  - allow: read a.txt\n  - deny: read b.txt\n")
	if got, ok := s.Match(permission.Request{Capability: permission.Read, Detail: "b.txt"}); !ok || got.Verdict != permission.VerdictDeny {
		t.Errorf("deny on Detail: %+v %v", got, ok)
	}
	only := mustSet(t, "rules:\n  - allow: read a.txt\n")
	if _, ok := only.Match(permission.Request{Capability: permission.Read, Detail: "a.txt"}); ok {
		t.Error("a request without Paths was allowed by a path rule")
	}
}

func TestFetchRulesUseTheNetworkGrammar(t *testing.T) {
	s := mustSet(t, `rules:
  - allow: fetch *.example.com
  - allow: fetch example.org:8443
  - allow: fetch 10.0.0.0/8
  - deny: fetch bad.example.com
`)
	tests := []struct {
		host, detail, want string
	}{
		{"api.example.com:443", "", "allow"},
		{"example.com:443", "", ""}, // *. is subdomains only
		{"bad.example.com:443", "", "deny"},
		{"example.org:8443", "", "allow"},
		{"example.org:443", "", ""},
		{"10.1.2.3:80", "", "allow"},
		{"", "https://api.example.com/x", "allow"},
		{"", "http://example.org:8443/", "allow"},
		{"", "not a url", ""},
	}
	for _, tt := range tests {
		m, ok := s.Match(permission.Request{Capability: permission.Fetch, Host: tt.host, Detail: tt.detail})
		got := ""
		if ok {
			got = string(m.Verdict)
		}
		if got != tt.want {
			t.Errorf("%q %q: %q, want %q", tt.host, tt.detail, got, tt.want)
		}
	}
}

func TestToolAndSearchRulesMatchEveryCallOfTheirTool(t *testing.T) {
	s := mustSet(t, "rules:\n  - deny: tool web_search\n  - allow: tool mkdir\n  - ask: search\n")
	tests := []struct {
		req  permission.Request
		want permission.Verdict
	}{
		{permission.Request{Capability: permission.Search, Tool: "web_search"}, permission.VerdictDeny},
		{permission.Request{Capability: permission.Search, Tool: "other"}, permission.VerdictAsk},
		{permission.Request{Capability: permission.Write, Tool: "mkdir", Paths: []string{"x"}}, permission.VerdictAllow},
	}
	for _, tt := range tests {
		if m, ok := s.Match(tt.req); !ok || m.Verdict != tt.want {
			t.Errorf("%+v: %+v, want %s", tt.req, m, tt.want)
		}
	}
	if !s.Covers(permission.Shell) { // a tool rule may cover any capability
		t.Error("Covers(shell) false with an allow tool rule")
	}
}

// FuzzPathRule checks that no pattern or path makes the matcher panic,
// and that a path leaving the root or absolute is never allowed (but by
// a pattern matching everything: "*" or "").
func FuzzPathRule(f *testing.F) {
	for _, seed := range [][2]string{{"*.env", "../a.env"}, {"src/**", "/src/a"}, {"[a-", "x"}, {"**/x/**", "a/x/b"}, {`\`, "a"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, p string) {
		s, err := rules.New([]rules.Rule{{Decision: rules.Allow, Kind: rules.KindRead, Pattern: pattern}, {Decision: rules.Deny, Kind: rules.KindWrite, Pattern: pattern}})
		if err != nil {
			return
		}
		m, ok := s.Match(permission.Request{Capability: permission.Read, Paths: []string{p}, Recursive: len(p)%2 == 0})
		escapes := strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "\x00")
		if ok && m.Verdict == permission.VerdictAllow && escapes && pattern != "*" && pattern != "" {
			t.Fatalf("pattern %q allowed the escaping path %q", pattern, p)
		}
		s.Match(permission.Request{Capability: permission.Write, Paths: []string{p, p}, Recursive: true})
	})
}
