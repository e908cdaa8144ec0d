package ruleimport

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"runtime/metrics"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/permission/rules"
	"github.com/hutchsandbox/hutch/policy"
)

// Bounds on evaluating a Codex .rules file, which is a program.
const (
	// MaxCodexSteps bounds the Starlark steps one .rules file may take.
	MaxCodexSteps = 1_000_000
	// MaxCodexCalls bounds the prefix_rule and network_rule calls of one
	// import.
	MaxCodexCalls = 10_000
	// MaxExpansion bounds the hutch rules one prefix_rule's alternatives
	// expand into.
	MaxExpansion = 1_000
	// MaxCodexRules bounds the hutch rules of one Codex import.
	MaxCodexRules = 10_000
	// MaxCodexTime bounds the time one .rules file's evaluation takes.
	MaxCodexTime = 10 * time.Second
	// MaxCodexIter bounds the elements any, all, min and max go
	// through in one call (a step the step bound cannot interrupt).
	MaxCodexIter = 100_000
	// MaxCodexWord bounds a pattern word or an example, in bytes.
	MaxCodexWord = 4096
	// MaxCodexExamples bounds the match and not_match examples of one
	// import, each run against every imported rule.
	MaxCodexExamples = 10_000
)

// codexPrefixRule is one prefix_rule call, as written.
type codexPrefixRule struct {
	where         rules.Origin
	pattern       [][]string // each element's alternatives
	decision      string
	justification string
	match         [][]string
	notMatch      [][]string
}

// codexNetworkRule is one network_rule call.
type codexNetworkRule struct {
	where                               rules.Origin
	host, protocol, decision, justified string
}

// codexFile is what evaluating one .rules file recorded.
type codexFile struct {
	prefix   []codexPrefixRule
	network  []codexNetworkRule
	notes    []Note
	calls    *int
	examples *int
}

// codex imports .rules files (Starlark) and config.toml files.
func (im *importer) codex(files []string) error {
	calls, examples := 0, 0
	for _, f := range files {
		data, err := readFile(f)
		if err != nil {
			return err
		}
		if strings.HasSuffix(f, ".toml") {
			if err := im.codexConfig(f, data); err != nil {
				return err
			}
			continue
		}
		cf, err := evalCodexRules(f, data, &calls, &examples)
		if err != nil {
			return err
		}
		im.res.Reported = append(im.res.Reported, cf.notes...)
		for _, pr := range cf.prefix {
			if err := im.codexPrefix(pr); err != nil {
				return err
			}
		}
		for _, nr := range cf.network {
			im.codexNetwork(nr)
		}
	}
	return nil
}

// evalCodexRules runs a .rules file with only prefix_rule, network_rule
// and host_executable predeclared: no load, no file or network access, at
// most MaxCodexSteps steps. A panic inside the interpreter is an error.
func evalCodexRules(file string, data []byte, calls, examples *int) (cf *codexFile, err error) {
	cf = &codexFile{calls: calls, examples: examples}
	thread := &starlark.Thread{
		Name: file,
		Load: func(*starlark.Thread, string) (starlark.StringDict, error) {
			return nil, errors.New("load() is refused: an imported .rules file must stand alone; inline the rules it loads")
		},
		Print: func(*starlark.Thread, string) {},
	}
	predeclared := starlark.StringDict{
		"prefix_rule":     starlark.NewBuiltin("prefix_rule", cf.prefixRule),
		"network_rule":    starlark.NewBuiltin("network_rule", cf.networkRule),
		"host_executable": starlark.NewBuiltin("host_executable", cf.hostExecutable),
	}
	// Starlark's built-ins that can make a large value in one step
	// (list(range(1 << 30))) or reach outside values are shadowed by one
	// that refuses.
	for name := range starlark.Universe {
		if !slices.Contains(safeUniverse, name) {
			predeclared[name] = starlark.NewBuiltin(name, refused)
		}
	}
	for _, name := range []string{"any", "all", "min", "max", "int"} {
		predeclared[name] = starlark.NewBuiltin(name, bounded(starlark.Universe[name].(*starlark.Builtin)))
	}
	opts := &syntax.FileOptions{While: true, TopLevelControl: true, GlobalReassign: true}
	defer func() {
		if p := recover(); p != nil {
			cf, err = nil, fmt.Errorf("%w: %s: evaluating the rules failed: %v", ErrImport, file, p)
		}
	}()
	f, err := opts.Parse(file, data, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrImport, starlarkError(file, err))
	}
	if err := checkCodexSyntax(file, f); err != nil {
		return nil, err
	}
	prog, err := starlark.FileProgram(f, predeclared.Has)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrImport, starlarkError(file, err))
	}
	limitSteps(thread)
	if _, err := prog.Init(thread, predeclared); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrImport, starlarkError(file, err))
	}
	return cf, nil
}

// safeUniverse are Starlark's built-ins an imported .rules file may use:
// none makes a value much larger than its arguments.
var safeUniverse = []string{"None", "True", "False", "len", "str", "repr", "type", "bool", "int",
	"fail", "range", "any", "all", "min", "max", "abs", "hash", "chr", "ord"}

// bounded is the built-in b refusing an argument it would take one long
// step over: an iterable of more than MaxCodexIter elements, or a string
// of more than 4300 characters (int's digits).
func bounded(b *starlark.Builtin) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		for _, a := range args {
			if s, ok := a.(starlark.String); ok {
				if len(s) > 4300 {
					return nil, fmt.Errorf("%s(): a string of %d characters; at most 4300", b.Name(), len(s))
				}
				continue
			}
			if _, ok := a.(starlark.Iterable); ok {
				if n := starlark.Len(a); n < 0 || n > MaxCodexIter {
					return nil, fmt.Errorf("%s() over more than %d elements is not available in an imported .rules file", b.Name(), MaxCodexIter)
				}
			}
		}
		return starlark.Call(thread, b, args, kwargs)
	}
}

func refused(_ *starlark.Thread, b *starlark.Builtin, _ starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	return nil, fmt.Errorf("%s() is not available in an imported .rules file: write the rules' lists out", b.Name())
}

// checkCodexSyntax refuses what a rules file never needs and a hostile
// one would use to make huge values in a few steps: repetition (*),
// formatting (%), shifts, and methods (.join, .format).
func checkCodexSyntax(file string, f *syntax.File) error {
	var bad error
	syntax.Walk(f, func(n syntax.Node) bool {
		if bad != nil {
			return false
		}
		var op syntax.Token
		switch n := n.(type) {
		case *syntax.BinaryExpr:
			op = n.Op
		case *syntax.AssignStmt:
			op = n.Op
		case *syntax.DotExpr:
			start, _ := n.Span()
			bad = fmt.Errorf("%w: %s: .%s: methods are not available in an imported .rules file: write the rules' lists out", ErrImport, where(file, int(start.Line)), n.Name.Name)
			return false
		}
		switch op {
		case syntax.STAR, syntax.STAR_EQ, syntax.PERCENT, syntax.PERCENT_EQ, syntax.LTLT, syntax.LTLT_EQ:
			start, _ := n.Span()
			bad = fmt.Errorf("%w: %s: the operator %s is not available in an imported .rules file: write the rules' lists out", ErrImport, where(file, int(start.Line)), op)
		}
		return true
	})
	return bad
}

// MaxCodexAlloc bounds the memory one .rules file's evaluation may
// allocate, in bytes.
const MaxCodexAlloc = 64 << 20

// limitSteps bounds thread to MaxCodexSteps steps and MaxCodexAlloc bytes
// allocated (measured after every step, so that no value can double past
// the bound unseen).
func limitSteps(thread *starlark.Thread) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	start := sample[0].Value.Uint64()
	began := time.Now()
	thread.SetMaxExecutionSteps(1)
	thread.OnMaxSteps = func(thread *starlark.Thread) {
		if thread.Steps >= MaxCodexSteps {
			thread.Cancel("too many steps")
			return
		}
		if time.Since(began) > MaxCodexTime {
			thread.Cancel("too long")
			return
		}
		metrics.Read(sample)
		if sample[0].Value.Uint64()-start > MaxCodexAlloc {
			thread.Cancel("too much memory")
			return
		}
		thread.SetMaxExecutionSteps(thread.Steps + 1)
	}
}

// starlarkError is a Starlark error on one line, with its position.
func starlarkError(file string, err error) string {
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		pos := file
		if stack := ee.CallStack; len(stack) > 0 {
			// The innermost Starlark frame: a builtin's own frame has no line.
			for i := len(stack) - 1; i >= 0; i-- {
				if stack[i].Pos.Line > 0 {
					pos = where(file, int(stack[i].Pos.Line))
					break
				}
			}
		}
		msg := ee.Msg
		switch {
		case strings.Contains(msg, "too many steps"):
			msg = fmt.Sprintf("evaluation took more than %d steps (an endless or huge loop); a .rules file only calls prefix_rule and network_rule", MaxCodexSteps)
		case strings.Contains(msg, "too long"):
			msg = fmt.Sprintf("evaluation took more than %v; a .rules file only calls prefix_rule and network_rule", MaxCodexTime)
		case strings.Contains(msg, "too much memory"):
			msg = fmt.Sprintf("evaluation allocated more than %d MiB; a .rules file only calls prefix_rule and network_rule", MaxCodexAlloc>>20)
		}
		return pos + ": " + strings.Join(strings.Fields(msg), " ")
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// callerOrigin is where the builtin being run was called.
func callerOrigin(thread *starlark.Thread) rules.Origin {
	if thread.CallStackDepth() < 2 {
		return rules.Origin{File: thread.Name}
	}
	return rules.Origin{File: thread.Name, Line: int(thread.CallFrame(1).Pos.Line)}
}

func (cf *codexFile) count() error {
	*cf.calls++
	if *cf.calls > MaxCodexCalls {
		return fmt.Errorf("more than %d rules: split the file", MaxCodexCalls)
	}
	return nil
}

// prefixRule is Codex's prefix_rule(pattern, decision="allow",
// justification=None, match=None, not_match=None).
func (cf *codexFile) prefixRule(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := cf.count(); err != nil {
		return nil, err
	}
	var pattern *starlark.List
	var decision, justification string = "allow", ""
	var match, notMatch *starlark.List
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "pattern", &pattern, "decision?", &decision,
		"justification?", &justification, "match?", &match, "not_match?", &notMatch); err != nil {
		return nil, err
	}
	pr := codexPrefixRule{where: callerOrigin(thread), decision: decision, justification: justification}
	switch decision {
	case "allow", "prompt", "forbidden":
	default:
		return nil, fmt.Errorf("prefix_rule: decision %q: write allow, prompt or forbidden", decision)
	}
	if pattern.Len() == 0 {
		return nil, errors.New("prefix_rule: pattern cannot be empty")
	}
	if pattern.Len() > 64 {
		return nil, fmt.Errorf("prefix_rule: a pattern of %d elements; at most 64", pattern.Len())
	}
	for i := range pattern.Len() {
		switch v := pattern.Index(i).(type) {
		case starlark.String:
			pr.pattern = append(pr.pattern, []string{string(v)})
		case *starlark.List:
			alts, err := stringList(v)
			if err != nil || len(alts) == 0 {
				return nil, fmt.Errorf("prefix_rule: pattern element %d: a list of alternatives holds one string at least, and only strings", i)
			}
			pr.pattern = append(pr.pattern, alts)
		default:
			return nil, fmt.Errorf("prefix_rule: pattern element %d is a %s: write a string or a list of strings", i, v.Type())
		}
	}
	for _, ex := range []struct {
		list *starlark.List
		to   *[][]string
		name string
	}{{match, &pr.match, "match"}, {notMatch, &pr.notMatch, "not_match"}} {
		if ex.list == nil {
			continue
		}
		for i := range ex.list.Len() {
			var toks []string
			var err error
			switch v := ex.list.Index(i).(type) {
			case starlark.String:
				toks, err = shlexSplit(string(v))
			case *starlark.List:
				toks, err = stringList(v)
			default:
				err = fmt.Errorf("is a %s", v.Type())
			}
			if err != nil || len(toks) == 0 {
				return nil, fmt.Errorf("prefix_rule: %s example %d: write a command line or a list of words (%v)", ex.name, i, err)
			}
			if n := len(strings.Join(toks, " ")); n > MaxCodexWord {
				return nil, fmt.Errorf("prefix_rule: %s example %d is longer than %d bytes", ex.name, i, MaxCodexWord)
			}
			if *cf.examples++; *cf.examples > MaxCodexExamples {
				return nil, fmt.Errorf("prefix_rule: more than %d match and not_match examples in all", MaxCodexExamples)
			}
			*ex.to = append(*ex.to, toks)
		}
	}
	for _, alts := range pr.pattern {
		for _, w := range alts {
			if len(w) > MaxCodexWord {
				return nil, fmt.Errorf("prefix_rule: a pattern word of %d bytes; at most %d", len(w), MaxCodexWord)
			}
		}
	}
	cf.prefix = append(cf.prefix, pr)
	return starlark.None, nil
}

// networkRule is Codex's network_rule(host, protocol, decision,
// justification=None).
func (cf *codexFile) networkRule(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := cf.count(); err != nil {
		return nil, err
	}
	var nr codexNetworkRule
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "host", &nr.host, "protocol", &nr.protocol,
		"decision", &nr.decision, "justification?", &nr.justified); err != nil {
		return nil, err
	}
	nr.where = callerOrigin(thread)
	cf.network = append(cf.network, nr)
	return starlark.None, nil
}

// hostExecutable is Codex's host_executable(name, paths): reported.
func (cf *codexFile) hostExecutable(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var paths *starlark.List
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "paths", &paths); err != nil {
		return nil, err
	}
	cf.notes = append(cf.notes, Note{callerOrigin(thread).String(), fmt.Sprintf("host_executable(%q): hutch matches a command by the word it is run as (deny and ask rules by its base name too, /usr/bin/%s as %s); the paths are not kept", name, name, name)})
	return starlark.None, nil
}

// stringList is a Starlark list of strings.
func stringList(l *starlark.List) ([]string, error) {
	out := make([]string, 0, l.Len())
	for i := range l.Len() {
		s, ok := starlark.AsString(l.Index(i))
		if !ok {
			return nil, fmt.Errorf("element %d is a %s, not a string", i, l.Index(i).Type())
		}
		out = append(out, s)
	}
	return out, nil
}

// shlexSplit splits a command line into words as a POSIX shell's quoting
// does (what Codex's examples use): quotes and backslashes, no
// expansions.
func shlexSplit(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unclosed single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			inWord = true
			for i++; ; i++ {
				if i >= len(s) {
					return nil, errors.New("unclosed double quote")
				}
				if s[i] == '"' {
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// codexDecision maps a Codex decision to hutch's.
func codexDecision(d string) rules.Decision {
	switch d {
	case "forbidden", "deny":
		return rules.Deny
	case "prompt", "ask":
		return rules.Ask
	}
	return rules.Allow
}

// codexPrefix maps one prefix_rule: its alternatives expanded into one
// hutch shell rule each ("word word *": Codex's pattern is a prefix of
// the command's words), then its examples run against them.
func (im *importer) codexPrefix(pr codexPrefixRule) error {
	where := pr.where.String()
	n := 1
	for _, alts := range pr.pattern {
		n *= len(alts)
		if n > MaxExpansion {
			return fmt.Errorf("%w: %s: prefix_rule's alternatives expand into more than %d rules: split it into several rules", ErrImport, where, MaxExpansion)
		}
	}
	if len(im.res.Rules)+n > MaxCodexRules {
		return fmt.Errorf("%w: %s: more than %d rules in all: split the import", ErrImport, where, MaxCodexRules)
	}
	d := codexDecision(pr.decision)
	var mine []rules.Rule
	for _, words := range expand(pr.pattern) {
		text := fmt.Sprintf("prefix_rule %s %s", pr.decision, quoteList(words))
		if i := slices.IndexFunc(words, func(w string) bool { return w == "" || strings.ContainsAny(w, " \t\n") }); i >= 0 {
			im.report(where, "%s: word %q is empty or holds a space; hutch's shell rules compare words without spaces", text, words[i])
			continue
		}
		r := rules.Rule{Decision: d, Kind: rules.KindShell, Pattern: strings.Join(words, " ") + " *", Reason: pr.justification, Origin: pr.where}
		if im.add(r, text) {
			mine = append(mine, r)
			if d == rules.Allow {
				im.report(where, "%s: Codex's allow runs the command outside its sandbox; imported as an allow inside hutch's sandbox; hutch never runs commands outside it", text)
			}
		}
	}
	im.codexExamples(pr, mine, d)
	return nil
}

// codexExamples checks pr's examples against the rules imported from it:
// each match example must get the rule's decision, each not_match
// example none.
func (im *importer) codexExamples(pr codexPrefixRule, mine []rules.Rule, d rules.Decision) {
	set, err := rules.New(mine)
	if err != nil {
		return // add checked each rule
	}
	fail := func(kind string, ex []string, got string) {
		n := Note{pr.where.String(), fmt.Sprintf("prefix_rule %s: %s example %q %s", quoteList(flatten(pr.pattern)), kind, rules.QuoteArgs(ex), got)}
		im.res.Failed = append(im.res.Failed, n)
		im.res.Reported = append(im.res.Reported, n)
	}
	for _, ex := range pr.match {
		m, ok := set.Match(permission.Request{Capability: permission.Shell, Tool: "shell", Command: rules.QuoteArgs(ex)})
		switch {
		case !ok:
			fail("match", ex, "matches no imported rule")
		case string(m.Verdict) != string(d):
			fail("match", ex, "gets "+string(m.Verdict)+", not "+string(d))
		}
	}
	for _, ex := range pr.notMatch {
		if m, ok := set.Match(permission.Request{Capability: permission.Shell, Tool: "shell", Command: rules.QuoteArgs(ex)}); ok {
			fail("not_match", ex, "matches the imported rule "+m.Rule)
		}
	}
}

// expand is every choice of one alternative per element.
func expand(pattern [][]string) [][]string {
	out := [][]string{nil}
	for _, alts := range pattern {
		var next [][]string
		for _, prefix := range out {
			for _, a := range alts {
				next = append(next, append(slices.Clone(prefix), a))
			}
		}
		out = next
	}
	return out
}

// flatten is a pattern written as words, alternatives as a|b.
func flatten(pattern [][]string) []string {
	out := make([]string, len(pattern))
	for i, alts := range pattern {
		out[i] = strings.Join(alts, "|")
	}
	return out
}

// quoteList is words as Codex writes a list: ["a", "b"].
func quoteList(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = fmt.Sprintf("%q", w)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// codexNetwork maps one network_rule to a fetch rule, and to the policy's
// network lists.
func (im *importer) codexNetwork(nr codexNetworkRule) {
	where := nr.where.String()
	text := fmt.Sprintf("network_rule %s %s %s", nr.host, nr.protocol, nr.decision)
	switch nr.protocol {
	case "http", "https", "https_connect", "http-connect":
	default:
		im.report(where, "%s: protocol %q: hutch's fetch tool and network proxy carry HTTP and HTTPS only", text, nr.protocol)
		return
	}
	switch nr.decision {
	case "allow", "deny", "forbidden", "prompt", "ask":
	default:
		im.report(where, "%s: unknown decision %q (Codex takes allow, prompt or forbidden)", text, nr.decision)
		return
	}
	d := codexDecision(nr.decision)
	host := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(nr.host), "."))
	if !im.add(rules.Rule{Decision: d, Kind: rules.KindFetch, Pattern: host, Reason: nr.justified, Origin: nr.where}, text) {
		return
	}
	if nr.protocol == "http" && d == rules.Allow {
		im.report(where, "%s: hutch's fetch rule matches the host on any port and scheme, https too", text)
	}
	switch d {
	case rules.Allow:
		p := im.policy()
		addUnique(&p.Hosts, host)
		p.Network = policy.NetworkAllow
		im.mapped(where, "%s -> policy network allow %s (commands' network)", text, host)
	case rules.Deny:
		p := im.policy()
		addUnique(&p.DenyHosts, host)
		im.mapped(where, "%s -> policy network deny %s (commands' network)", text, host)
	default:
		im.report(where, "%s: hutch's network policy cannot ask; commands cannot reach %s unless the policy allows it (the fetch tool asks)", text, host)
	}
}

// codexConfig is the part of Codex's config.toml that hutch maps.
type codexConfig struct {
	SandboxMode    *string `toml:"sandbox_mode"`
	ApprovalPolicy any     `toml:"approval_policy"`
	Workspace      *struct {
		WritableRoots       []string `toml:"writable_roots"`
		NetworkAccess       *bool    `toml:"network_access"`
		ExcludeTmpdirEnvVar *bool    `toml:"exclude_tmpdir_env_var"`
		ExcludeSlashTmp     *bool    `toml:"exclude_slash_tmp"`
	} `toml:"sandbox_workspace_write"`
}

// tomlKeyLine finds the line of "key =" or "[key]" in data (0 if none).
func tomlKeyLine(data []byte, key string) int {
	re := regexp.MustCompile(`(?m)^\s*(\[\s*` + regexp.QuoteMeta(key) + `\s*\]|` + regexp.QuoteMeta(key) + `\s*=)`)
	if loc := re.FindIndex(data); loc != nil {
		return lineOf(data, loc[0])
	}
	return 0
}

// codexConfig maps config.toml's sandbox and approval settings.
func (im *importer) codexConfig(file string, data []byte) error {
	var c codexConfig
	md, err := toml.Decode(string(data), &c)
	if err != nil {
		return fmt.Errorf("%w: %s: %s", ErrImport, file, oneLine(err))
	}
	at := func(key string) string { return where(file, tomlKeyLine(data, key)) }
	seen := map[string]bool{}
	for _, k := range md.Undecoded() {
		top := k[0]
		if seen[top] {
			continue
		}
		seen[top] = true
		if top == "sandbox_workspace_write" {
			im.report(at(k.String()), "%s: not a sandbox setting hutch maps", k)
			continue
		}
		im.report(at(top), "%s: not a permission or sandbox setting; not imported", top)
	}
	root := im.opts.Root
	mode := ""
	if c.SandboxMode != nil {
		mode = *c.SandboxMode
		w := at("sandbox_mode")
		p := im.policy()
		switch mode {
		case "read-only":
			addUnique(&p.Read, root)
			im.mapped(w, "sandbox_mode read-only -> policy read %s, no writes, %s", root, noNetwork(p))
			im.report(w, "sandbox_mode read-only: Codex reads the whole disk; hutch reads the system paths (%s) and the root only: add read paths the commands need", strings.Join(policy.SystemPaths, " "))
		case "workspace-write":
			addUnique(&p.Write, root)
			im.mapped(w, "sandbox_mode workspace-write -> policy write %s, %s", root, noNetwork(p))
			im.report(w, "sandbox_mode workspace-write: Codex also reads the whole disk and writes $TMPDIR and /tmp; hutch reads the system paths and its read and write paths, and gives commands a private /tmp")
		case "danger-full-access":
			if !im.opts.FullAccess {
				return fmt.Errorf("%w: %s: sandbox_mode danger-full-access runs commands without a sandbox, which hutch never does: pass --full-access to map it to hutch's widest policy (read /, write the root, the host's network), or set another sandbox_mode", ErrImport, w)
			}
			addUnique(&p.Read, "/")
			addUnique(&p.Write, root)
			p.Network = policy.NetworkAll
			im.mapped(w, "sandbox_mode danger-full-access (--full-access) -> policy read /, write %s, network all", root)
			im.report(w, "sandbox_mode danger-full-access: no hutch equivalent; mapped to hutch's widest policy, still a sandbox: writes outside %s, other users' processes and the denied system secrets stay out of reach", root)
		default:
			return fmt.Errorf("%w: %s: unknown sandbox_mode %q: Codex takes read-only, workspace-write or danger-full-access", ErrImport, w, mode)
		}
	}
	if ws := c.Workspace; ws != nil {
		w := at("sandbox_workspace_write")
		if mode != "workspace-write" {
			im.report(w, "[sandbox_workspace_write] applies to sandbox_mode workspace-write only (here %q); not imported", mode)
		} else {
			p := im.policy()
			for _, r := range ws.WritableRoots {
				abs := expandHome(r, im.opts.Home)
				if !filepath.IsAbs(abs) {
					abs = filepath.Join(root, abs)
				}
				addUnique(&p.Write, filepath.Clean(abs))
				im.mapped(w, "writable_roots %s -> policy write %s", r, filepath.Clean(abs))
			}
			if ws.NetworkAccess != nil && *ws.NetworkAccess {
				p.Network = policy.NetworkAll
				im.mapped(w, "network_access true -> policy network all")
				im.report(w, "network_access true: the host's whole network; hutch can narrow it to hosts (network: {allow: [...]})")
			}
			if ws.ExcludeSlashTmp != nil || ws.ExcludeTmpdirEnvVar != nil {
				im.report(w, "exclude_slash_tmp, exclude_tmpdir_env_var: hutch never writes the host's /tmp (commands get a private one); not imported")
			}
		}
	}
	if c.ApprovalPolicy != nil {
		im.codexApproval(at("approval_policy"), c.ApprovalPolicy, mode)
	}
	return nil
}

// noNetwork gives p no network unless network rules allowed hosts, and
// says which.
func noNetwork(p *policy.Policy) string {
	if p.Network == policy.NetworkAllow {
		return "network only the hosts network_rule allows"
	}
	p.Network = policy.NetworkNone
	return "network none"
}

// codexApproval turns approval_policy into a mode suggestion.
func (im *importer) codexApproval(w string, v any, sandbox string) {
	s, ok := v.(string)
	if !ok {
		im.report(w, "approval_policy: a table (granular approvals) has no hutch equivalent; not imported")
		return
	}
	switch s {
	case "untrusted", "on-request", "on-failure":
		im.res.Mode, im.res.ModeWhy = permission.Ask, fmt.Sprintf("%s: approval_policy %s asks before what the sandbox does not allow", w, s)
		if s == "on-failure" {
			im.report(w, "approval_policy on-failure: hutch asks before a call, never after a command failed; suggested ask")
		}
	case "never":
		if sandbox == "read-only" {
			im.res.Mode, im.res.ModeWhy = permission.ReadOnly, w+": approval_policy never with a read-only sandbox"
		} else {
			im.res.Mode, im.res.ModeWhy = permission.Auto, w+": approval_policy never; the sandbox policy bounds every command"
		}
	default:
		im.report(w, "approval_policy %q: unknown (Codex takes untrusted, on-request, on-failure or never); no mode suggested", s)
	}
}
