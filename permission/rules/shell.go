package rules

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"

	"github.com/hutchsandbox/hutch/permission"
)

// MaxCommandLine is the longest command line the shell matcher parses,
// in bytes. A longer one is allowed by no prefix rule; deny and ask rules
// still match the commands a plain scan of its text finds.
const MaxCommandLine = 256 << 10

// maxNesting bounds how deep the matcher follows command lines inside
// command lines (sh -c '...', eval) for deny and ask rules.
const maxNesting = 8

// shellPattern is a shell rule's words, with or without a final "*".
type shellPattern struct {
	words []string
	open  bool // a final "*": any further words, or none
}

// unsafeNames are commands that run, redefine or hide other commands:
// a command line naming one is allowed by no prefix rule, and an allow
// rule cannot start with one (allowing it would allow whatever follows).
var unsafeNames = []string{
	"eval", "exec", "command", "builtin", "env", "alias", "unalias", "source", ".",
	"trap", "hash", "enable", "export", "declare", "typeset", "local", "readonly",
	"let", "coproc", "function", "shopt", "fc",
}

// wrappers run the command their arguments name: a deny or ask rule
// matches the words after one at any position (sudo rm -rf / is rm -rf /).
var wrappers = []string{
	"env", "command", "builtin", "exec", "nice", "nohup", "timeout", "stdbuf", "setsid",
	"sudo", "doas", "su", "time", "xargs", "unbuffer", "chroot", "ionice", "taskset",
	"strace", "ltrace", "watch", "flock", "busybox", "nsenter", "unshare", "firejail",
	"systemd-run", "parallel", "find", "script", "chrt", "runuser", "setpriv", "fakeroot",
	"pkexec", "gosu", "su-exec", "sg", "eatmydata", "faketime", "proxychains", "proxychains4",
	"torsocks", "numactl", "cgexec", "valgrind", "catchsegv", "tini", "dumb-init",
}

// shells read a command line after -c, which deny and ask rules look into.
var shells = []string{"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "busybox", "su"}

// parseShellPattern reads a shell rule's pattern: plain words, compared
// one by one with a command's, and an optional final "*" (any further
// words). A deny or ask rule matches a command that starts with its
// words, "*" or not; an allow rule without "*" only the command of
// exactly its words.
func parseShellPattern(d Decision, p string) (*shellPattern, error) {
	words := strings.Fields(p)
	sp := &shellPattern{}
	if n := len(words); n > 0 && words[n-1] == "*" {
		sp.open, words = true, words[:n-1]
	}
	sp.words = words
	for i, w := range words {
		if strings.ContainsAny(w, "'\"`$\\;&|<>()*?[]") {
			return nil, fmt.Errorf("shell pattern %q: %q is not a plain word; rules compare plain words, and the only wildcard is a final * word (write %q)", p, w, strings.Join(append(slices.Clone(words[:i]), "*"), " "))
		}
	}
	if strings.Contains(words[0], "=") {
		return nil, fmt.Errorf("shell pattern %q starts with an assignment; a command line that sets a variable before its command is never matched: write the command", p)
	}
	if d == Allow && slices.Contains(unsafeNames, words[0]) {
		return nil, fmt.Errorf("shell pattern %q: an allow rule cannot start with %s, which runs or changes whatever follows it; allow the commands it would run", p, words[0])
	}
	return sp, nil
}

// wordKind is what the shell may make of a word, for deny and ask rules.
type wordKind int

const (
	wordStatic wordKind = iota // exactly val
	wordOne                    // one word, unknown (a quoted expansion)
	wordGlob                   // one or more words matching the pattern val
	wordMany                   // any number of unknown words
)

// cword is one word of a command as the matcher sees it.
type cword struct {
	val    string   // the unquoted text (for wordGlob, a path.Match pattern)
	static bool     // val is exactly what the shell passes: an allow rule may compare it
	kind   wordKind // for deny and ask rules
}

// shellPart is one simple command of a command line.
type shellPart struct {
	words []cword
	// plain: understood well enough for an allow rule (no assignment
	// before it, a plain literal name, only safe redirections, no
	// construct the matcher does not know anywhere in the line).
	plain bool
	// inner are the command lines it runs as text (sh -c, eval, ...),
	// which deny and ask rules look into.
	inner []string
}

func (c shellPart) matches(r *compiled) bool {
	if r.shell == nil {
		return false
	}
	if r.Decision == Allow {
		return c.plain && r.shell.allows(c.words)
	}
	return r.shell.touches(c.words)
}

// allows reports whether the words are the rule's words (and, with a
// final "*", any more).
func (sp *shellPattern) allows(ws []cword) bool {
	n := len(sp.words)
	if len(ws) < n || (!sp.open && len(ws) != n) {
		return false
	}
	for i, w := range sp.words {
		if !ws[i].static || ws[i].val != w {
			return false
		}
	}
	return true
}

// touches reports whether the command may start with the rule's words,
// or may have them after a wrapper (sudo, env, xargs, ...) anywhere in
// it. Unknown words match any rule word; a command's first word matches
// by its base name too (/bin/rm is rm).
func (sp *shellPattern) touches(ws []cword) bool {
	m := matcher{ws: ws, rs: sp.words}
	if m.at(0, 0) {
		return true
	}
	if len(ws) == 0 || !(ws[0].kind != wordStatic || slices.Contains(wrappers, path.Base(ws[0].val))) {
		return false
	}
	for i := 1; i < len(ws); i++ {
		if m.at(i, 0) {
			return true
		}
	}
	return false
}

// matcher matches rule words against a command's words from any offset,
// remembering what it tried (a glob word may stand for several).
type matcher struct {
	ws   []cword
	rs   []string
	seen map[[2]int]bool
}

// at reports whether the rule words from j on are a prefix of what the
// command words from i on may become.
func (m *matcher) at(i, j int) bool {
	if j == len(m.rs) {
		return true
	}
	if i == len(m.ws) {
		return false
	}
	w, r := m.ws[i], m.rs[j]
	switch w.kind {
	case wordStatic:
		return (w.val == r || (j == 0 && path.Base(w.val) == r)) && m.at(i+1, j+1)
	case wordOne:
		return m.at(i+1, j+1)
	case wordMany:
		return true
	}
	// A glob: one or more words each matching it (or itself, unmatched).
	key := [2]int{i, j}
	if v, ok := m.seen[key]; ok {
		return v
	}
	if m.seen == nil {
		m.seen = map[[2]int]bool{}
	}
	m.seen[key] = false
	ok := false
	for k := j; k < len(m.rs) && (globMatch(w.val, m.rs[k]) || (k == 0 && globMatch(globBase(w.val), m.rs[k]))); k++ {
		if m.at(i+1, k+1) {
			ok = true
			break
		}
	}
	m.seen[key] = ok
	return ok
}

// globBase is the last element of a glob pattern (/???/rm is some rm).
func globBase(g string) string {
	return g[strings.LastIndexByte(g, '/')+1:]
}

// globMatch reports whether the shell pattern g may produce s; a pattern
// path.Match cannot read may produce anything, unless no "]" closes its
// "[" (the shell then reads the "[" as itself: [[ is not a glob).
func globMatch(g, s string) bool {
	ok, err := path.Match(g, s)
	if err == nil {
		return ok
	}
	if i := strings.IndexByte(g, '['); i < 0 || !strings.Contains(g[i:], "]") {
		lit, _ := unescape(g, false)
		return lit == s
	}
	return true
}

// shellParts are the commands of a shell request's command line
// (Request.Command, else Detail). The text process_input sends is matched
// by deny and ask rules only.
func shellParts(req permission.Request) []part {
	text := req.Command
	if text == "" {
		text = req.Detail
	}
	cmds := commands(text, 0)
	parts := make([]part, len(cmds))
	for i, c := range cmds {
		if req.Tool == "process_input" {
			c.plain = false
		}
		parts[i] = c
	}
	return parts
}

// commands finds the simple commands of a command line: every one the
// parser sees, anywhere (pipelines, lists, subshells, substitutions,
// here-documents, functions, loops), and those of command lines given to
// sh -c, eval, trap, alias or a shell's here-document as plain text. A
// line the parser cannot read, or too long to parse, yields the commands
// a plain scan finds, none plain.
//
// The line is parsed twice, with bash's grammar and with POSIX sh's (which
// dash, the usual /bin/sh, follows): where the two read it differently
// ($'...', &>, |&), the commands of both are the parts, and one that only
// one grammar can read is not understood. A carriage return is a word's
// character to sh and bash but a blank to the parser: a line holding one
// is parsed with it replaced by another character and is never plain.
func commands(text string, depth int) []shellPart {
	if len(text) > MaxCommandLine || strings.IndexByte(text, 0) >= 0 {
		return scan(text)
	}
	understood := utf8.ValidString(text) && !strings.ContainsRune(text, '\r')
	src := strings.ReplaceAll(text, "\r", "\x01")
	var cmds []shellPart
	seen := map[string]bool{}
	failed := false
	for _, lang := range []syntax.LangVariant{syntax.LangBash, syntax.LangPOSIX} {
		cs, ok, err := parseCommands(src, lang)
		if err != nil {
			failed = true
			continue
		}
		understood = understood && ok
		cmds = appendNew(cmds, seen, cs...)
	}
	if failed {
		understood = false
		cmds = appendNew(cmds, seen, scan(src)...)
	}
	for i := range cmds {
		cmds[i].plain = cmds[i].plain && understood
	}
	if depth < maxNesting {
		for _, c := range slices.Clone(cmds) {
			for _, inner := range c.inner {
				for _, ic := range commands(inner, depth+1) {
					ic.plain = false
					cmds = appendNew(cmds, seen, ic)
				}
			}
		}
	}
	return cmds
}

// appendNew appends the commands of cs not already in cmds (the two
// grammars mostly find the same ones); seen holds the keys of cmds.
func appendNew(cmds []shellPart, seen map[string]bool, cs ...shellPart) []shellPart {
	for _, c := range cs {
		var k strings.Builder
		fmt.Fprintf(&k, "%v", c.plain)
		for _, w := range c.words {
			fmt.Fprintf(&k, "\x00%d%v%q", w.kind, w.static, w.val)
		}
		for _, l := range c.inner {
			fmt.Fprintf(&k, "\x01%q", l)
		}
		if !seen[k.String()] {
			seen[k.String()] = true
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// parseCommands parses src with one grammar: its simple commands, and
// whether the matcher understands every construct in it.
func parseCommands(src string, lang syntax.LangVariant) ([]shellPart, bool, error) {
	f, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(src), "")
	if err != nil {
		return nil, false, err
	}
	understood := true
	var cmds []shellPart
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case nil, *syntax.File, *syntax.Comment, *syntax.Word, *syntax.Lit, *syntax.SglQuoted,
			*syntax.DblQuoted, *syntax.CmdSubst, *syntax.Subshell, *syntax.Block:
		case *syntax.Stmt:
			if n.Background || n.Coprocess || n.Disown || n.Cmd == nil {
				understood = false
			}
			if c, ok := n.Cmd.(*syntax.CallExpr); ok {
				p := callCommand(c)
				p.inner = append(innerLines(p.words), shellInput(src, p.words, n.Redirs)...)
				cmds = append(cmds, p)
			}
		case *syntax.BinaryCmd:
			if n.Op != syntax.AndStmt && n.Op != syntax.OrStmt && n.Op != syntax.Pipe && n.Op != syntax.PipeAll {
				understood = false
			}
		case *syntax.ParamExp:
			if !simpleParam(n) {
				understood = false
			}
		case *syntax.Redirect:
			if !safeRedirect(n) {
				understood = false
			}
		case *syntax.CallExpr:
		default:
			understood = false
		}
		return true
	})
	return cmds, understood, nil
}

// innerLines are the texts a command runs as command lines, for deny and
// ask rules: the words after eval (joined); every word after the -c
// option of a shell (sh, bash, su, ...), since options may come between;
// every argument of trap; the value of each alias; and every word holding
// a blank or an operator after a wrapper (watch, script -c, flock -c,
// ...), which may take a command line. Lines inside those lie inside the
// text, where the next round finds them.
func innerLines(ws []cword) []string {
	var out []string
	for i, w := range ws {
		if w.kind != wordStatic {
			continue
		}
		name := path.Base(w.val)
		rest := ws[i+1:]
		switch {
		case name == "eval":
			var words []string
			for _, a := range rest {
				words = append(words, a.val)
			}
			return append(out, strings.Join(words, " "))
		case name == "trap":
			for _, a := range rest {
				out = append(out, a.val)
			}
			return out
		case name == "alias":
			for _, a := range rest {
				if _, v, ok := strings.Cut(a.val, "="); ok {
					out = append(out, v)
				}
			}
			return out
		case slices.Contains(shells, name):
			for k, o := range rest {
				if strings.HasPrefix(o.val, "-") && !strings.HasPrefix(o.val, "--") && strings.Contains(o.val, "c") {
					for _, a := range rest[k+1:] {
						out = append(out, a.val)
					}
					return out
				}
			}
		}
		if slices.Contains(wrappers, name) || slices.Contains(shells, name) {
			for _, a := range rest {
				if strings.ContainsAny(a.val, " \t\n;&|()<>`$") {
					out = append(out, a.val)
				}
			}
			return out
		}
	}
	return out
}

// shellInput is the text of the here-documents and here-strings given to
// a command naming a shell (sh <<EOF, sudo bash <<<'...'), as written:
// the shell runs it as a command line.
func shellInput(src string, ws []cword, redirs []*syntax.Redirect) []string {
	if !slices.ContainsFunc(ws, func(w cword) bool { return w.kind == wordStatic && slices.Contains(shells, path.Base(w.val)) }) {
		return nil
	}
	var out []string
	for _, r := range redirs {
		w := r.Hdoc
		if r.Op == syntax.WordHdoc {
			w = r.Word
		}
		if w == nil {
			continue
		}
		start, end := int(w.Pos().Offset()), int(w.End().Offset())
		if 0 <= start && start <= end && end <= len(src) {
			text := src[start:end]
			if r.Op == syntax.WordHdoc {
				text = wordOf(w).val
			}
			out = append(out, text)
		}
	}
	return out
}

// scan splits text that cannot be parsed into commands at the shell's
// operators, quotes and escapes removed: what a deny or ask rule may
// recognise of it. No command it finds is plain.
func scan(text string) []shellPart {
	seps := func(r rune) bool { return strings.ContainsRune(";&|()<>{}`\n\x00", r) }
	var out []shellPart
	for seg := range strings.FieldsFuncSeq(strings.ReplaceAll(text, "$(", "("), seps) {
		seg = strings.NewReplacer(`"`, "", `'`, "", `\`, "").Replace(seg)
		var ws []cword
		for f := range strings.FieldsSeq(seg) {
			ws = append(ws, cword{val: f, kind: wordStatic})
		}
		if len(ws) > 0 {
			out = append(out, shellPart{words: ws})
		}
	}
	return out
}

// callCommand is a simple command's words; it is plain when nothing but
// literal text comes before its first word and that word is a plain
// literal naming no unsafe command.
func callCommand(c *syntax.CallExpr) shellPart {
	p := shellPart{words: make([]cword, len(c.Args))}
	for i, a := range c.Args {
		p.words[i] = wordOf(a)
	}
	p.plain = len(c.Assigns) == 0 && len(c.Args) > 0 && plainName(c.Args[0])
	return p
}

// plainName reports whether w is a command name spelled as itself: one
// literal without escapes, glob or brace characters, naming no unsafe
// command.
func plainName(w *syntax.Word) bool {
	if len(w.Parts) != 1 {
		return false
	}
	l, ok := w.Parts[0].(*syntax.Lit)
	return ok && !strings.ContainsAny(l.Value, "\\*?[{~") && !slices.Contains(unsafeNames, l.Value)
}

// wordOf is what the shell may make of w: its value when it has no
// expansion, else how many words it may become.
func wordOf(w *syntax.Word) cword {
	var val, pat strings.Builder
	static := true
	kind := wordStatic
	glob := false
	widen := func(k wordKind) {
		static = false
		kind = max(kind, k)
	}
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			if i == 0 && strings.HasPrefix(v, "~") {
				widen(wordOne) // $HOME or another's home
			}
			if hasBrace(v) {
				widen(wordMany)
			}
			unq, g := unescape(v, false)
			val.WriteString(unq)
			pat.WriteString(g)
			glob = glob || strings.ContainsAny(g, "*?") || (strings.Contains(g, "[") && strings.Contains(g[strings.IndexByte(g, '['):], "]"))
		case *syntax.SglQuoted:
			if p.Dollar {
				widen(wordOne) // $'...' escapes
			}
			val.WriteString(p.Value)
			pat.WriteString(globEscape(p.Value))
		case *syntax.DblQuoted:
			if p.Dollar {
				widen(wordOne)
			}
			for _, q := range p.Parts {
				switch q := q.(type) {
				case *syntax.Lit:
					unq, _ := unescape(q.Value, true)
					val.WriteString(unq)
					pat.WriteString(globEscape(unq))
				case *syntax.ParamExp:
					if q.Param != nil && (q.Param.Value == "@" || q.Param.Value == "*") || q.Index != nil {
						widen(wordMany) // "$@", "${a[@]}"
					} else {
						widen(wordOne)
					}
				default:
					widen(wordOne)
				}
			}
		default:
			widen(wordMany) // unquoted: split into fields, globbed
		}
	}
	if kind == wordStatic && glob {
		return cword{val: pat.String(), static: static, kind: wordGlob}
	}
	return cword{val: val.String(), static: static, kind: kind}
}

// unescape removes a literal's backslashes as the shell does (inside
// double quotes only before $ ` " \ and a newline), and returns its glob
// pattern too (escapes kept for path.Match).
func unescape(s string, quoted bool) (val, glob string) {
	if !strings.Contains(s, `\`) {
		if quoted {
			return s, globEscape(s)
		}
		return s, s
	}
	var v, g strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			v.WriteByte(c)
			if quoted {
				g.WriteString(globEscape(string(c)))
			} else {
				g.WriteByte(c)
			}
			continue
		}
		n := s[i+1]
		switch {
		case n == '\n':
			i++
		case quoted && !strings.ContainsRune("$`\"\\", rune(n)):
			v.WriteByte(c)
			g.WriteString(`\\`)
		default:
			i++
			v.WriteByte(n)
			g.WriteString(globEscape(string(n)))
		}
	}
	return v.String(), g.String()
}

// globEscape escapes the characters path.Match reads as a pattern.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// hasBrace reports whether an unquoted literal may brace-expand
// ({a,b}, {1..3}).
func hasBrace(s string) bool {
	i := strings.IndexByte(s, '{')
	return i >= 0 && strings.IndexByte(s[i:], '}') > 0 && (strings.Contains(s[i:], ",") || strings.Contains(s[i:], ".."))
}

// simpleParam reports whether p only names a parameter: $x, ${x}, $1,
// $@ — no operator, index or indirection, which may run commands or
// assign.
func simpleParam(p *syntax.ParamExp) bool {
	return p.Param != nil && p.Flags == nil && !p.Excl && !p.Length && !p.Width && !p.IsSet &&
		p.Split == syntax.OptUnset && p.GlobSubst == syntax.OptUnset && p.RcExpand == syntax.OptUnset &&
		p.NestedParam == nil && p.Index == nil && len(p.Modifiers) == 0 && p.Slice == nil &&
		p.Repl == nil && p.Names == 0 && p.Exp == nil
}

// safeRedirect reports whether r only joins or closes descriptors,
// discards into /dev/null, or feeds a here-document or here-string.
func safeRedirect(r *syntax.Redirect) bool {
	if r.N != nil && strings.Trim(r.N.Value, "0123456789") != "" {
		return false // {var}>
	}
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return true
	case syntax.DplIn, syntax.DplOut:
		w := wordOf(r.Word)
		return w.static && (w.val == "-" || (w.val != "" && strings.Trim(w.val, "0123456789") == ""))
	case syntax.RdrOut, syntax.AppOut, syntax.RdrIn, syntax.RdrAll, syntax.AppAll, syntax.RdrClob:
		w := wordOf(r.Word)
		return w.static && w.val == "/dev/null"
	}
	return false
}

// reserved are the words a shell reads as syntax where a command's name
// stands.
var reserved = []string{"if", "then", "else", "elif", "fi", "case", "esac", "for", "while", "until",
	"do", "done", "in", "function", "select", "time", "coproc"}

// QuoteArgs is the command line that runs argv as its words: each word
// as it is when the shell would read it so, else in single quotes. The
// shell matcher reads the line back as exactly argv.
func QuoteArgs(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		plain := a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == ""
		if plain && (i > 0 || !strings.Contains(a, "=") && !slices.Contains(reserved, a)) {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
