// Package rules holds hutch's allow, ask and deny rules: what a person
// writes to say "run npm test without asking, ask for any other command,
// never touch .env". A [Set] of rules is a [permission.Rules]: put it in
// [permission.Config].Rules and the gate consults it before its mode.
//
// A [Rule] is a decision (allow, ask, deny), a kind (shell, read, write,
// fetch, search, tool) and a pattern, with an optional reason and where it
// was written ([Origin]). Rules come from hutch's rules file ([Parse],
// [Load]; written by [Marshal] and [Write]) or from code (importers of
// other tools' rule files build Rule values and call [New]).
//
// The strictest matching rule wins: deny over ask over allow. Matching is
// sound for allow and conservative for deny and ask: a shell command line
// is allowed by rules only when the matcher understands every command in
// it and each matches an allow rule; it is denied when any command it can
// see matches a deny rule. A deny rule guards against what a command line
// shows, not what it computes (a script it writes and runs, a string a
// variable holds and eval runs): the sandbox, not the rules, bounds what a
// command can reach. docs/permissions.md has the whole grammar.
package rules

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/hutchsandbox/hutch/netproxy"
	"github.com/hutchsandbox/hutch/permission"
)

// Decision is what a rule says of the calls it matches.
type Decision string

// The decisions.
const (
	Allow Decision = "allow"
	Ask   Decision = "ask"
	Deny  Decision = "deny"
)

// Decisions lists every decision, the weakest first.
var Decisions = []Decision{Allow, Ask, Deny}

// Kind is what a rule's pattern is matched against.
type Kind string

// The kinds of rule.
const (
	// Shell rules match shell command lines (the shell tool, the text
	// process_input sends, hutch run's command) by the prefix of each
	// command's words: "npm run test *", "git status".
	KindShell Kind = "shell"
	// Read rules match the paths the reading tools name (read_file,
	// list, grep, glob, edit_file's dry run): a gitignore-style pattern
	// relative to the sandbox root.
	KindRead Kind = "read"
	// Write rules match the paths the changing tools name (write_file,
	// edit_file, apply_patch, move, delete, mkdir). "edit" is read as
	// write.
	KindWrite Kind = "write"
	// Fetch rules match the host a fetch reaches, in the network
	// allow-list grammar (host[:port], *.example.com, an IP, a CIDR).
	KindFetch Kind = "fetch"
	// Search rules match every web_search call (their pattern is "*").
	KindSearch Kind = "search"
	// Tool rules match every call of the tool their pattern names
	// ("tool web_search", "tool run_code").
	KindTool Kind = "tool"
)

// Kinds lists every kind.
var Kinds = []Kind{KindShell, KindRead, KindWrite, KindFetch, KindSearch, KindTool}

// Origin is where a rule was written: a file and a line, or neither for a
// rule made in code.
type Origin struct {
	File string
	Line int
}

// String is "file:line", "file" without a line, or "" for no origin.
func (o Origin) String() string {
	switch {
	case o.File == "":
		return ""
	case o.Line <= 0:
		return o.File
	}
	return fmt.Sprintf("%s:%d", o.File, o.Line)
}

// Rule is one allow, ask or deny rule. The zero Rule is invalid; New
// checks every field.
type Rule struct {
	Decision Decision
	Kind     Kind
	// Pattern is matched as Kind says. "*" (or "", except for tool
	// rules) matches every call of the kind, whatever it holds: "allow
	// shell *" is --allow shell, "deny fetch *" no fetch at all.
	Pattern string
	// Reason, shown with a denial and in the audit log, says why.
	Reason string
	// Origin is where the rule was written (set by Parse).
	Origin Origin
}

// String is the rule as its file writes it: "deny shell rm -rf *".
func (r Rule) String() string {
	if r.Pattern == "" {
		return string(r.Decision) + " " + string(r.Kind)
	}
	return string(r.Decision) + " " + string(r.Kind) + " " + r.Pattern
}

// name is how a decision names the rule: "rules.yaml:4: deny shell rm -rf *".
func (r Rule) name() string {
	if o := r.Origin.String(); o != "" {
		return o + ": " + r.String()
	}
	return r.String()
}

// everything reports whether the rule matches every call of its kind.
func (r Rule) everything() bool { return r.Pattern == "*" || (r.Pattern == "" && r.Kind != KindTool) }

// compiled is a rule with its pattern parsed.
type compiled struct {
	Rule
	shell *shellPattern
	path  *pathPattern
	host  netproxy.Entry
}

// Set is a checked list of rules, ready to match requests. It implements
// permission.Rules and is safe for concurrent use; it does not change
// after New.
type Set struct {
	rules []compiled
}

var _ permission.Rules = (*Set)(nil)

// New checks rules and returns them as a Set, in their order. The first
// rule that cannot be used is an error matching permission.ErrConfig,
// one line naming the rule's origin, the problem and the fix.
func New(rules []Rule) (*Set, error) {
	s := &Set{rules: make([]compiled, 0, len(rules))}
	for _, r := range rules {
		c, err := compile(r)
		if err != nil {
			where := r.Origin.String()
			if where == "" {
				where = fmt.Sprintf("rule %q", r.String())
			}
			return nil, fmt.Errorf("%w: %s: %v", permission.ErrConfig, where, err)
		}
		s.rules = append(s.rules, c)
	}
	return s, nil
}

// Rules returns a copy of the set's rules, in order.
func (s *Set) Rules() []Rule {
	out := make([]Rule, len(s.rules))
	for i, c := range s.rules {
		out[i] = c.Rule
	}
	return out
}

// compile checks r and parses its pattern.
func compile(r Rule) (compiled, error) {
	c := compiled{Rule: r}
	if !slices.Contains(Decisions, r.Decision) {
		return c, fmt.Errorf("unknown decision %q: write allow, ask or deny", r.Decision)
	}
	if r.Kind == "edit" {
		c.Kind = KindWrite
	}
	if !slices.Contains(Kinds, c.Kind) {
		return c, fmt.Errorf("unknown kind %q: write shell, read, write (or edit), fetch, search or tool", r.Kind)
	}
	if strings.ContainsAny(r.Pattern, "\x00\n\r") || strings.ContainsAny(r.Reason, "\x00\n\r") {
		return c, fmt.Errorf("the pattern and the reason are one line each, without NUL bytes")
	}
	if c.Pattern != strings.TrimSpace(c.Pattern) {
		return c, fmt.Errorf("pattern %q has space around it: remove it", c.Pattern)
	}
	if c.everything() {
		return c, nil
	}
	var err error
	switch c.Kind {
	case KindShell:
		c.shell, err = parseShellPattern(c.Decision, c.Pattern)
	case KindRead, KindWrite:
		c.path, err = parsePathPattern(c.Pattern)
	case KindFetch:
		c.host, err = netproxy.ParseEntry(c.Pattern)
		if err != nil {
			err = fmt.Errorf("fetch %v", err)
		}
	case KindSearch:
		err = fmt.Errorf("search rules match every web_search call: write %q, without a pattern", c.Decision+" search")
	case KindTool:
		if c.Pattern == "" || strings.ContainsAny(c.Pattern, " \t*") {
			err = fmt.Errorf("a tool rule names one tool, as in %q", string(c.Decision)+" tool web_search")
		}
	}
	return c, err
}

// Covers reports whether some allow or ask rule may match a request of
// capability c (a tool rule may match any), so that the tools needing c
// are offered even where the mode never allows c.
func (s *Set) Covers(c permission.Capability) bool {
	for _, r := range s.rules {
		if r.Decision == Deny {
			continue
		}
		if r.Kind == KindTool || slices.Contains(r.Kind.capabilities(), c) {
			return true
		}
	}
	return false
}

// capabilities are the gate's capabilities a kind of rule applies to.
func (k Kind) capabilities() []permission.Capability {
	switch k {
	case KindShell:
		return []permission.Capability{permission.Shell}
	case KindRead:
		return []permission.Capability{permission.Read, permission.Glob}
	case KindWrite:
		return []permission.Capability{permission.Write}
	case KindFetch:
		return []permission.Capability{permission.Fetch}
	case KindSearch:
		return []permission.Capability{permission.Search}
	}
	return nil
}

// strength orders decisions: deny over ask over allow; 0 is no match.
func strength(d Decision) int { return slices.Index(Decisions, d) + 1 }

// verdict is the strictest rule matching one part of a request (a
// command, a path), or none.
type verdict struct {
	rule *compiled
}

func (v verdict) strength() int {
	if v.rule == nil {
		return 0
	}
	return strength(v.rule.Decision)
}

// stricter keeps the stricter of v and w; on a tie, v (the earlier rule).
func stricter(v, w verdict) verdict {
	if w.strength() > v.strength() {
		return w
	}
	return v
}

// Match returns the strictest rule matching req (deny over ask over
// allow; among equals, the first written). A request with several parts
// (the commands of a command line, the paths of a move or a patch) is
// denied if any part is, asked about if any part is, and allowed only if
// every part is allowed; a part the matcher cannot understand (see
// docs/permissions.md) is allowed by no rule but a "*" one. ok is false
// when no rule decides.
func (s *Set) Match(req permission.Request) (permission.RuleMatch, bool) {
	var whole verdict
	var kinds []Kind
	for i := range s.rules {
		r := &s.rules[i]
		switch {
		case r.Kind == KindTool:
			if r.Pattern == req.Tool {
				whole = stricter(whole, verdict{r})
			}
		case r.Kind == KindRead && r.Decision != Allow && !r.everything() && len(readParts(req)) > 0:
			// A write that reads or moves a file: read deny and ask
			// rules apply to it too.
			if !slices.Contains(kinds, KindWrite) {
				kinds = append(kinds, KindWrite)
			}
		case !slices.Contains(r.Kind.capabilities(), req.Capability):
		case r.everything():
			whole = stricter(whole, verdict{r})
		default:
			if !slices.Contains(kinds, r.Kind) {
				kinds = append(kinds, r.Kind)
			}
		}
	}
	v := whole
	if len(kinds) > 0 {
		v = stricter(v, s.matchParts(req))
	}
	if v.rule == nil {
		return permission.RuleMatch{}, false
	}
	return permission.RuleMatch{Verdict: permission.Verdict(v.rule.Decision), Rule: v.rule.name(), Reason: v.rule.Reason}, true
}

// matchParts matches the parts of req against the rules with patterns.
func (s *Set) matchParts(req permission.Request) verdict {
	switch req.Capability {
	case permission.Shell:
		return s.combine(shellParts(req), KindShell)
	case permission.Read, permission.Glob:
		return s.combine(pathParts(req), KindRead)
	case permission.Write:
		v := s.combine(pathParts(req), KindWrite)
		if rp := readParts(req); len(rp) > 0 {
			if r := s.combine(rp, KindRead); r.rule != nil && r.rule.Decision != Allow {
				v = stricter(v, r)
			}
		}
		return v
	case permission.Fetch:
		return s.combine(hostParts(req), KindFetch)
	}
	return verdict{}
}

// part is one thing a request does that rules of one kind match.
type part interface {
	// matches reports whether r (of the part's kind, with a pattern)
	// matches the part; for an allow rule, only when the part is
	// understood well enough to be granted.
	matches(r *compiled) bool
}

// combine is the verdict on a request made of parts: deny or ask if any
// part is, allow only if every part is (and there is one at least).
func (s *Set) combine(parts []part, kind Kind) verdict {
	var worst verdict
	allowed := len(parts) > 0
	var firstAllow verdict
	for _, p := range parts {
		var v verdict
		for i := range s.rules {
			r := &s.rules[i]
			if r.Kind != kind || r.everything() || strength(r.Decision) <= v.strength() {
				continue
			}
			if p.matches(r) {
				v = verdict{r}
			}
		}
		switch {
		case v.rule == nil:
			allowed = false
		case v.rule.Decision == Allow:
			if firstAllow.rule == nil {
				firstAllow = v
			}
		default:
			worst = stricter(worst, v)
		}
	}
	if worst.rule != nil {
		return worst
	}
	if allowed {
		return firstAllow
	}
	return verdict{}
}

// ErrRefused matches the errors CheckCommand returns.
var ErrRefused = errors.New("refused by a permission rule")

// CheckCommand decides a command line that runs where nobody can be
// asked (hutch run): nil when an allow rule matches or none does (the
// caller's own policy then decides), else an error matching ErrRefused
// naming the rule — a deny rule, or an ask rule, since nobody can answer.
func (s *Set) CheckCommand(line string) error {
	m, ok := s.Match(permission.Request{Capability: permission.Shell, Tool: "run", Detail: line, Command: line})
	switch {
	case !ok || m.Verdict == permission.VerdictAllow:
		return nil
	case m.Verdict == permission.VerdictAsk:
		return fmt.Errorf("%w: rule %s asks a person before this command runs, and nobody can be asked here: run it through hutch mcp --mode ask, or change the rule", ErrRefused, m.Rule)
	}
	return fmt.Errorf("%w: the command is denied by rule %s%s", ErrRefused, m.Rule, reasonTail(m.Reason))
}

func reasonTail(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

// TestRequest is the request a call of kind makes with arg, for trying
// rules out (hutch rules test): a command line for shell, a path for read
// and write, a URL or host[:port] for fetch, a tool's name for tool, the
// query for search.
func TestRequest(kind Kind, arg string) (permission.Request, error) {
	r := permission.Request{Tool: "test", Detail: arg}
	switch kind {
	case KindShell:
		r.Capability, r.Command = permission.Shell, arg
	case KindRead:
		r.Capability, r.Paths = permission.Read, []string{arg}
	case KindWrite, "edit":
		r.Capability, r.Paths = permission.Write, []string{arg}
	case KindFetch:
		r.Capability = permission.Fetch
		if !strings.Contains(arg, "://") {
			arg = "https://" + arg
		}
		u, err := url.Parse(arg)
		if err != nil || u.Hostname() == "" {
			return r, fmt.Errorf("%q is not a URL or host: write https://example.com/x or example.com:443", r.Detail)
		}
		h, port := hostOf(u)
		r.Host = net.JoinHostPort(h, strconv.Itoa(port))
	case KindSearch:
		r.Capability, r.Tool = permission.Search, "web_search"
	case KindTool:
		r.Tool = arg
	default:
		return r, fmt.Errorf("unknown kind %q: write shell, read, write, fetch, search or tool", kind)
	}
	return r, nil
}
