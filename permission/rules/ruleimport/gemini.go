package ruleimport

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/hutchsandbox/hutch/permission/rules"
)

// geminiRule is one [[rule]] of a Gemini CLI policy file.
type geminiRule struct {
	ToolName         any            `toml:"toolName"`
	McpName          string         `toml:"mcpName"`
	Subagent         string         `toml:"subagent"`
	ToolAnnotations  map[string]any `toml:"toolAnnotations"`
	ArgsPattern      string         `toml:"argsPattern"`
	CommandPrefix    any            `toml:"commandPrefix"`
	CommandRegex     string         `toml:"commandRegex"`
	Decision         string         `toml:"decision"`
	Priority         *int64         `toml:"priority"`
	DenyMessage      string         `toml:"denyMessage"`
	Modes            []string       `toml:"modes"`
	Interactive      *bool          `toml:"interactive"`
	AllowRedirection *bool          `toml:"allowRedirection"`
}

// geminiKinds maps Gemini CLI's built-in tools to hutch's rule kinds.
var geminiKinds = map[string]rules.Kind{
	"run_shell_command":   rules.KindShell,
	"read_file":           rules.KindRead,
	"read_many_files":     rules.KindRead,
	"glob":                rules.KindRead,
	"search_file_content": rules.KindRead,
	"list_directory":      rules.KindRead,
	"write_file":          rules.KindWrite,
	"replace":             rules.KindWrite,
	"web_fetch":           rules.KindFetch,
	"google_web_search":   rules.KindSearch,
}

// geminiMapped is an imported rule with the priority it had.
type geminiMapped struct {
	rule     rules.Rule
	priority int64
}

var ruleHeader = regexp.MustCompile(`(?m)^[ \t]*\[\[[ \t]*rule[ \t]*\]\]`)

// gemini imports Gemini CLI policy files.
func (im *importer) gemini(files []string) error {
	var all []geminiMapped
	for _, f := range files {
		data, err := readFile(f)
		if err != nil {
			return err
		}
		var doc struct {
			Rule []geminiRule `toml:"rule"`
		}
		md, err := toml.Decode(string(data), &doc)
		if err != nil {
			return fmt.Errorf("%w: %s: %s", ErrImport, f, oneLine(err))
		}
		seen := map[string]bool{}
		for _, k := range md.Undecoded() {
			key := k[len(k)-1]
			if len(k) > 1 && k[0] == "rule" {
				im.report(where(f, tomlKeyLine(data, key)), "%s: not a key of a Gemini CLI policy rule; ignored (its rule is imported without it)", key)
				continue
			}
			if !seen[k[0]] {
				seen[k[0]] = true
				im.report(where(f, tomlKeyLine(data, k[0])), "%s: not a Gemini CLI policy setting; not imported", k[0])
			}
		}
		headers := ruleHeader.FindAllIndex(data, -1)
		for i, r := range doc.Rule {
			line := 0
			if i < len(headers) {
				line = lineOf(data, headers[i][0])
			}
			all = append(all, im.geminiRule(rules.Origin{File: f, Line: line}, r)...)
		}
	}
	im.geminiPriorities(all)
	return nil
}

// geminiRule maps one [[rule]].
func (im *importer) geminiRule(o rules.Origin, r geminiRule) []geminiMapped {
	w := o.String()
	var d rules.Decision
	switch r.Decision {
	case "allow":
		d = rules.Allow
	case "deny":
		d = rules.Deny
	case "ask_user":
		d = rules.Ask
	default:
		im.report(w, "decision %q: Gemini CLI takes allow, deny or ask_user; rule not imported", r.Decision)
		return nil
	}
	if r.McpName != "" {
		im.report(w, "mcpName %s: skipped: an MCP server's tool is that server's to gate; hutch's rules cover hutch's own tools", r.McpName)
		return nil
	}
	tools, err := stringOrList(r.ToolName)
	if err != nil {
		im.report(w, "toolName %v; rule not imported", err)
		return nil
	}
	prefixes, err := stringOrList(r.CommandPrefix)
	if err != nil {
		im.report(w, "commandPrefix %v; rule not imported", err)
		return nil
	}
	if len(tools) == 0 {
		tools = []string{"*"}
		if len(prefixes) > 0 || r.CommandRegex != "" {
			tools = []string{"run_shell_command"}
		}
	}
	// Conditions hutch cannot test: a deny stays (stricter without
	// them), an allow or ask would cover more calls than in Gemini CLI.
	var conds []string
	if r.Subagent != "" {
		conds = append(conds, "subagent "+r.Subagent)
	}
	if len(r.ToolAnnotations) > 0 {
		conds = append(conds, "toolAnnotations")
	}
	if r.Interactive != nil {
		conds = append(conds, fmt.Sprintf("interactive = %v", *r.Interactive))
	}
	if len(r.Modes) > 0 && !slices.Contains(r.Modes, "default") {
		conds = append(conds, "modes "+strings.Join(r.Modes, ", "))
	}
	if len(conds) > 0 {
		if d != rules.Deny {
			im.report(w, "%s %s only when %s, which hutch cannot test; without it the rule would cover more calls: not imported", r.Decision, strings.Join(tools, ", "), strings.Join(conds, "; "))
			return nil
		}
		im.report(w, "deny %s only when %s, which hutch cannot test: imported as a deny in every case", strings.Join(tools, ", "), strings.Join(conds, "; "))
	} else if len(r.Modes) > 0 {
		im.report(w, "modes %s: hutch's rules apply in every mode", strings.Join(r.Modes, ", "))
	}
	if r.AllowRedirection != nil && *r.AllowRedirection && d == rules.Allow {
		im.report(w, "allowRedirection: hutch's allow rules never cover a redirection other than to or from /dev/null")
	}
	priority := int64(0)
	if r.Priority != nil {
		priority = *r.Priority
	}
	var out []geminiMapped
	add := func(k rules.Kind, pattern, what string) {
		rule := rules.Rule{Decision: d, Kind: k, Pattern: pattern, Reason: r.DenyMessage, Origin: o}
		if slices.Contains(im.res.Rules, rule) {
			im.mapped(w, "%s -> %s (already imported from this rule)", what, rule)
			return
		}
		if im.add(rule, what) {
			out = append(out, geminiMapped{rule, priority})
		}
	}
	for _, tool := range tools {
		what := fmt.Sprintf("%s %s (priority %d)", r.Decision, tool, priority)
		if tool == "*" {
			if r.ArgsPattern != "" || len(prefixes) > 0 || r.CommandRegex != "" {
				im.report(w, "%s: argument conditions on every tool cannot be written as hutch rules; not imported", what)
				continue
			}
			for _, k := range []rules.Kind{rules.KindShell, rules.KindRead, rules.KindWrite, rules.KindFetch} {
				add(k, "*", what)
			}
			add(rules.KindSearch, "", what)
			continue
		}
		kind, ok := geminiKinds[tool]
		if !ok {
			if strings.HasPrefix(tool, "mcp_") {
				im.report(w, "%s: skipped: an MCP server's tool is that server's to gate", what)
			} else {
				im.report(w, "%s: Gemini CLI's %s tool has no hutch equivalent; not imported", what, tool)
			}
			continue
		}
		if r.ArgsPattern != "" {
			im.report(w, "%s: argsPattern %q is a regular expression over the arguments' JSON; hutch's rules cannot express it: not imported%s", what, r.ArgsPattern, leftOut(d))
			continue
		}
		if kind != rules.KindShell {
			if len(prefixes) > 0 || r.CommandRegex != "" {
				im.report(w, "%s: commandPrefix and commandRegex apply to run_shell_command only; not imported", what)
				continue
			}
			pattern := "*"
			if kind == rules.KindSearch {
				pattern = ""
			}
			add(kind, pattern, what)
			continue
		}
		switch {
		case len(prefixes) > 0:
			for _, p := range prefixes {
				add(rules.KindShell, strings.Join(strings.Fields(p), " ")+" *", fmt.Sprintf("%s commandPrefix %q", what, p))
			}
		case r.CommandRegex != "":
			lit, ok := literalPrefix(r.CommandRegex)
			if !ok {
				im.report(w, "%s: commandRegex %q is not a plain literal prefix; hutch's shell rules are word prefixes: not imported%s", what, r.CommandRegex, leftOut(d))
				continue
			}
			add(rules.KindShell, lit+" *", fmt.Sprintf("%s commandRegex %q", what, r.CommandRegex))
		default:
			add(rules.KindShell, "*", what)
		}
	}
	return out
}

// leftOut warns, for a deny or ask rule not imported, that what it
// stopped is now decided by the other rules.
func leftOut(d rules.Decision) string {
	if d == rules.Allow {
		return ""
	}
	return fmt.Sprintf(" (the calls this %s stopped are now decided by the other rules: write a hutch rule for them)", d)
}

// literalPrefix is the command a regular expression names when it is a
// plain literal prefix (Gemini CLI anchors commandRegex at the command's
// start): words of letters, digits, escaped dots (\.) and _ - / = : , @ % +, with an
// optional final \b, \s or space.
func literalPrefix(re string) (string, bool) {
	re = strings.TrimPrefix(re, "^")
	for _, tail := range []string{`\b`, `\s`, ` `} {
		re = strings.TrimSuffix(re, tail)
	}
	// A bare "." is any character in a regular expression: only an
	// escaped one is a literal dot.
	lit := strings.NewReplacer(`\.`, "\x00", `\-`, "-").Replace(re)
	if strings.TrimSpace(lit) == "" || strings.Trim(lit, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-/=:,@%+ \x00") != "" {
		return "", false
	}
	re = strings.ReplaceAll(lit, "\x00", ".")
	return strings.Join(strings.Fields(re), " "), true
}

// stringOrList reads a TOML value that is a string or a list of strings.
func stringOrList(v any) ([]string, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{t}, nil
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("holds %v, not a string", e)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("is %v: write a string or a list of strings", v)
}

// maxPriorityPairs bounds the rules geminiPriorities compares pairwise.
const maxPriorityPairs = 2000

// geminiPriorities reports where Gemini CLI's priority order and hutch's
// strictest-wins disagree: a weaker decision with a higher priority over
// a stricter one that may match the same calls.
func (im *importer) geminiPriorities(all []geminiMapped) {
	if len(all) > maxPriorityPairs {
		im.report("", "more than %d rules: priorities not compared with hutch's strictest-wins; check rules that overlap by hand", maxPriorityPairs)
		return
	}
	strength := func(d rules.Decision) int { return slices.Index(rules.Decisions, d) }
	for _, hi := range all {
		for _, lo := range all {
			if hi.priority <= lo.priority || strength(hi.rule.Decision) >= strength(lo.rule.Decision) || !overlap(hi.rule, lo.rule) {
				continue
			}
			im.report(hi.rule.Origin.String(), "%s (priority %d) outranks %s: %s (priority %d) in Gemini CLI for calls both match; hutch's strictest rule wins, so hutch would %s them",
				hi.rule, hi.priority, lo.rule.Origin, lo.rule, lo.priority, lo.rule.Decision)
		}
	}
}

// overlap reports whether two rules of one kind may match a call
// together: one matches everything, or one's words begin the other's.
func overlap(a, b rules.Rule) bool {
	if a.Kind != b.Kind {
		return false
	}
	if a.Pattern == "*" || a.Pattern == "" || b.Pattern == "*" || b.Pattern == "" || a.Pattern == b.Pattern {
		return true
	}
	if a.Kind != rules.KindShell {
		return false
	}
	wa := strings.Fields(strings.TrimSuffix(a.Pattern, " *"))
	wb := strings.Fields(strings.TrimSuffix(b.Pattern, " *"))
	n := min(len(wa), len(wb))
	return slices.Equal(wa[:n], wb[:n])
}
