package rules_test

import (
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/permission/rules"
)

// shellRules are the rules the shell tests match against.
const shellRules = `rules:
  - allow: shell npm test *
  - allow: shell git status
  - allow: shell cat *
  - deny: shell rm -rf *
  - ask: shell curl *
`

func mustSet(t testing.TB, text string) *rules.Set {
	t.Helper()
	rs, err := rules.Parse("rules.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	s, err := rules.New(rs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// verdictOf is what the set says of a shell call running line: allow,
// ask, deny, or "" for no rule.
func verdictOf(s *rules.Set, tool, line string) string {
	m, ok := s.Match(permission.Request{Capability: permission.Shell, Tool: tool, Detail: line, Command: line})
	if !ok {
		return ""
	}
	return string(m.Verdict)
}

func TestShellAllowsOnlyWhatItUnderstandsAndDeniesWhatItSees(t *testing.T) {
	s := mustSet(t, shellRules)
	tests := []struct {
		line, want string
	}{
		{"npm test", "allow"},
		{"npm test --watch=false", "allow"},
		{"git status", "allow"},
		{"git status --short", ""}, // no final *: exactly these words
		{"npm test && git status", "allow"},
		{"npm test || git status", "allow"},
		{"(npm test)", "allow"},
		{"{ npm test; }", "allow"},
		{"npm test 2>&1 >/dev/null", "allow"},
		{"npm test 'a b' \"c\"", "allow"},
		{"npm test $(git status)", "allow"}, // every command allowed
		// Hostile: a second command, in every form.
		{"npm test; rm -rf /", "deny"},
		{"npm test\nrm -rf /", "deny"},
		{"true && rm -rf /", "deny"},
		{"npm test $(curl x)", "ask"},
		{"npm test `rm -rf /`", "deny"},
		{"npm test && eval \"$X\"", ""},
		{"npm test && eval 'rm -rf /'", "deny"},
		{"cat <<EOF\n$(rm -rf /)\nEOF", "deny"},
		{"cat <<EOF\n$(date)\nEOF", ""},
		{"cat <<'EOF'\n$(rm -rf /)\nEOF", "allow"}, // a quoted here-document expands nothing
		{"npm test <(curl x)", "ask"},
		{"npm test <(git status)", ""}, // process substitution is not understood
		{"npm test | sh", ""},
		{"f() { rm -rf /; }; f", "deny"},
		{"f() { npm test; }; f", ""},
		{"exec rm -rf /", "deny"},
		{"exec npm test", ""},
		{"command npm test", ""},
		{"env npm test", ""},
		{"sudo rm -rf /", "deny"},
		{"xargs rm -rf < list", "deny"},
		{"sh -c 'rm -rf /'", "deny"},
		{"bash -ec \"npm test; rm -rf /\"", "deny"},
		{"/bin/rm -rf /tmp/x", "deny"},
		{"r''m -rf /", "deny"},
		{`\rm -rf /`, "deny"},
		{"$X -rf /", "deny"}, // the name may be rm
		{"$X", "deny"},       // unquoted: it may split into rm -rf /
		{`"$X"`, "ask"},      // quoted: one word, which may be curl (never rm -rf, two words)
		{"${X:-rm} -rf /", "deny"},
		// Spellings that are not plain: never allowed.
		{`\npm test`, ""},
		{`npm tes\t`, "allow"}, // sh reads tes\t as test
		{"npm te\\\nst", "allow"},
		{"'npm' test", ""},
		{"np\"m\" test", ""},
		{"npm test > ~/.bashrc", ""},
		{"npm test >> log", ""},
		{"npm test < .env", ""},
		{"npm test >&file", ""},
		{"FOO=1 npm test", ""},
		{"LD_PRELOAD=x npm test", ""},
		{"PATH=/tmp; npm test", ""},
		{"export PATH=/tmp; npm test", ""},
		{"npm test &", ""},
		{"coproc npm test", ""},
		{"npm test $((1+1))", ""},
		{"(( x = 1 )); npm test", ""},
		{"[[ $X -eq 1 ]] && npm test", ""},
		{"npm test ${X:=1}", ""},
		{"npm test ${a[$(rm -rf /)]}", "deny"},
		{"for i in 1; do npm test; done", ""},
		{"if true; then npm test; fi", ""},
		{"time npm test", ""},
		{"npm test 'unterminated", ""},
		{"npm test; rm -rf / 'unterminated", "deny"}, // unparsable: a plain scan still sees rm -rf
		{"", ""},
		{"# just a comment", ""},
		{"npm\x00 test", ""},
		{"npm test \xff", ""},
		{"npm test " + strings.Repeat("a ", rules.MaxCommandLine), ""},
		{strings.Repeat("npm test; ", rules.MaxCommandLine/8) + "rm -rf /", "deny"},
		// A carriage return is a word's character to sh and bash, a
		// blank to the parser: never plain, and \\\r\n is no line
		// continuation (the shell runs the next line).
		{"npm test \\\r\nrm -rf /", "deny"},
		{"git status\r\n", ""},   // git gets "status\r"
		{"cat\r/tmp/x", ""},      // runs the program ./cat\r/tmp/x
		{"npm test\rcurl x", ""}, // npm gets "test\rcurl"
		{"npm test\r\nrm -rf /", "deny"},
		// Read otherwise by dash (/bin/sh) than by bash: both readings count.
		{"npm test $'\\' ; rm -rf / ; #'", "deny"}, // dash: $ '\\' ; rm -rf / ; #...
		{"npm test $'\\' ; curl x ; #'", "ask"},
		{"npm test $'\\' ; git status ; #'", "allow"}, // every command of both readings is allowed
		{"npm test &>/dev/null rm -rf /", ""},         // dash: npm test & >/dev/null rm -rf /
		{"npm test &>/dev/null", ""},
		{"npm test |& cat", ""}, // a syntax error to dash
		{"npm test <<< x", ""},
		{"npm test $'x' $\"y\"", "allow"}, // arguments either way
		{"[[ -n $X ]] && echo hi", ""},    // [[ is not a glob that may be rm
		// Command lines given as text, which deny rules look into.
		{"trap 'rm -rf /' EXIT", "deny"},
		{"alias ll='rm -rf /'", "deny"},
		{"sh <<EOF\nrm -rf /\nEOF", "deny"},
		{"sh <<'EOF'\nrm -rf /\nEOF", "deny"},
		{"sudo bash <<< 'rm -rf /'", "deny"},
		{"bash -c -e 'rm -rf /'", "deny"}, // the command line is the first non-option
		{"bash -o errexit -c 'rm -rf /'", "deny"},
		{"watch 'rm -rf /'", "deny"},
		{"script -c 'rm -rf /'", "deny"},
		{"flock /tmp/l -c 'rm -rf /'", "deny"},
		{"pkexec rm -rf /", "deny"},
		{"gosu root rm -rf /", "deny"},
		// A glob naming the command matches by its base name.
		{"/???/rm -rf /", "deny"},
		{"/bin/r? -rf /", "deny"},
		{"r[m] -rf /", "deny"},
	}
	for _, tt := range tests {
		if got := verdictOf(s, "shell", tt.line); got != tt.want {
			t.Errorf("%.80q: %q, want %q", tt.line, got, tt.want)
		}
	}
}

func TestProcessInputIsNeverAllowedByAPrefixRule(t *testing.T) {
	s := mustSet(t, shellRules)
	for line, want := range map[string]string{"npm test\n": "", "rm -rf /\n": "deny", "curl x": "ask"} {
		if got := verdictOf(s, "process_input", line); got != want {
			t.Errorf("%q: %q, want %q", line, got, want)
		}
	}
	all := mustSet(t, "rules:\n  - allow: shell *\n")
	if got := verdictOf(all, "process_input", "anything"); got != "allow" {
		t.Errorf("shell * on process_input: %q, want allow", got)
	}
}

func TestShellStarMatchesEveryCommandLine(t *testing.T) {
	s := mustSet(t, "rules:\n  - allow: shell *\n  - deny: shell rm *\n")
	for line, want := range map[string]string{"anything $(x) > y": "allow", "'unterminated": "allow", "rm x": "deny"} {
		if got := verdictOf(s, "shell", line); got != want {
			t.Errorf("%q: %q, want %q", line, got, want)
		}
	}
}

func TestQuoteArgsReadsBackAsTheSameWords(t *testing.T) {
	s := mustSet(t, "rules:\n  - allow: shell npm test *\n  - deny: shell rm *\n")
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"npm", "test", "a b", "it's", "$X", "*"}, "allow"},
		{[]string{"npm", "test;", "rm"}, ""}, // the word is "test;", not test
		{[]string{"npm", "install"}, ""},
		{[]string{"FOO=1", "npm", "test"}, ""},
		{[]string{"rm", "-rf", "/"}, "deny"},
		{[]string{"if", "rm"}, ""}, // runs a program named if
	}
	for _, tt := range tests {
		if got := verdictOf(s, "", rules.QuoteArgs(tt.argv)); got != tt.want {
			t.Errorf("%q (%s): %q, want %q", tt.argv, rules.QuoteArgs(tt.argv), got, tt.want)
		}
	}
}

// FuzzShellAllow checks that no command line is allowed by prefix rules
// unless every simple command in it — found independently, by walking
// the syntax tree as bash and as dash (POSIX sh) read it — is a plain
// literal command matching an allow prefix, with no assignment before
// it. The parser is the matcher's: the oracle also refuses what the
// parser is known to read otherwise than sh (a carriage return).
func FuzzShellAllow(f *testing.F) {
	for _, seed := range []string{
		"npm test", "npm test; rm -rf /", "npm test $(curl x)", "cat <<EOF\n$(rm -rf /)\nEOF",
		"FOO=1 npm test", "(npm test) | git status", "npm test `x`", "f() { x; }; f", "npm test <(x)",
		"eval x", "npm test > /dev/null 2>&1", "\\npm test", "'npm' test", "npm test &", "git status",
		"npm test \\\r\nrm", "ls\r/x", "npm test $'\\' ; rm ; #'", "npm test &>/dev/null rm",
		"npm tes\\t", "npm te\\\nst",
	} {
		f.Add(seed)
	}
	s := mustSet(f, "rules:\n  - allow: shell npm test *\n  - allow: shell git status\n")
	prefixes := [][]string{{"npm", "test"}}
	exact := [][]string{{"git", "status"}}
	f.Fuzz(func(t *testing.T, line string) {
		if verdictOf(s, "shell", line) != "allow" {
			return
		}
		if strings.ContainsRune(line, '\r') {
			t.Fatalf("%q allowed, but it holds a carriage return", line)
		}
		for _, lang := range []syntax.LangVariant{syntax.LangBash, syntax.LangPOSIX} {
			checkAllowed(t, line, lang, prefixes, exact)
		}
	})
}

// checkAllowed fails unless every simple command of line, as lang reads
// it, is plain and matches an allow prefix (or exact rule).
func checkAllowed(t *testing.T, line string, lang syntax.LangVariant, prefixes, exact [][]string) {
	t.Helper()
	file, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(line), "")
	if err != nil {
		t.Fatalf("%q allowed, but it does not parse as %s: %v", line, lang, err)
	}
	n := 0
	syntax.Walk(file, func(node syntax.Node) bool {
		switch node := node.(type) {
		case *syntax.FuncDecl, *syntax.DeclClause, *syntax.ArithmExp, *syntax.ArithmCmd, *syntax.ProcSubst, *syntax.CoprocClause, *syntax.LetClause:
			t.Fatalf("%q allowed, but it holds a %T", line, node)
		case *syntax.Stmt:
			if node.Background || node.Coprocess {
				t.Fatalf("%q allowed, but it runs in the background", line)
			}
		case *syntax.CallExpr:
			n++
			if len(node.Assigns) > 0 || len(node.Args) == 0 {
				t.Fatalf("%q allowed, but a command has assignments", line)
			}
			var words []string
			for i, w := range node.Args {
				lit := w.Lit()
				if i == 0 && (lit == "" || strings.Contains(lit, `\`)) {
					t.Fatalf("%q allowed, but command %d's name is not a plain literal", line, n)
				}
				words = append(words, unescapeUnquoted(lit))
			}
			if !hasPrefix(words, prefixes, true) && !hasPrefix(words, exact, false) {
				t.Fatalf("%q allowed, but command %q matches no allow rule", line, words)
			}
		}
		return true
	})
	if n == 0 {
		t.Fatalf("%q allowed, but it runs no command", line)
	}
}

// unescapeUnquoted is the value sh gives an unquoted literal: a
// backslash takes the next character as itself, and a backslash before a
// newline joins the lines.
func unescapeUnquoted(lit string) string {
	var b strings.Builder
	escaped := false
	for _, r := range lit {
		switch {
		case escaped:
			escaped = false
			if r != '\n' {
				b.WriteRune(r)
			}
		case r == '\\':
			escaped = true
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// hasPrefix reports whether words start with one of the prefixes (are
// one of them, when open is false), comparing literal words only.
func hasPrefix(words []string, prefixes [][]string, open bool) bool {
	for _, p := range prefixes {
		if len(words) < len(p) || (!open && len(words) != len(p)) {
			continue
		}
		ok := true
		for i, w := range p {
			// A quoted word has no Lit(); the rule's word must then be
			// its value, which the matcher compared: accept it here.
			if words[i] != w && !(i > 0 && words[i] == "") {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}
