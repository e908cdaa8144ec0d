package permission

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/internal/cfgerr"
)

// Capability is something a tool does.
type Capability string

// The capabilities hutch's tools use.
const (
	Read   Capability = "read"
	Glob   Capability = "glob"
	Write  Capability = "write"
	Shell  Capability = "shell"
	Fetch  Capability = "fetch"
	Search Capability = "search"
	// Code is running code a model wrote in a declared sandbox
	// (run_code). Its default sandbox runs in every mode without asking:
	// declaring it is what allows it. A call naming a wider sandbox (an
	// escalation, Request.Escalation) waits for a person in every mode;
	// see Gate.Check and Gate.Confirm.
	Code Capability = "code"
)

// Capabilities lists every known capability.
var Capabilities = []Capability{Read, Glob, Write, Shell, Fetch, Search, Code}

// Known reports whether c is a known capability.
func (c Capability) Known() bool { return slices.Contains(Capabilities, c) }

// Privileged reports whether c needs more than the read_only mode grants.
// Unknown capabilities are privileged.
func (c Capability) Privileged() bool { return c != Read && c != Glob }

// ParseCapabilities reads a comma-separated list ("write,shell"). Unknown
// names are an error matching ErrConfig.
func ParseCapabilities(s string) ([]Capability, error) {
	var out []Capability
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(strings.ToLower(f))
		if f == "" {
			continue
		}
		c := Capability(f)
		if !c.Known() {
			return nil, fmt.Errorf("%w: unknown capability %q: choose from %s", ErrConfig, f, joinCaps(Capabilities[:len(Capabilities)-1]))
		}
		if c == Code {
			return nil, errAllowCode
		}
		out = append(out, c)
	}
	return out, nil
}

func joinCaps(cs []Capability) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}

// Mode is how a Gate decides privileged actions.
type Mode string

// The modes.
const (
	ReadOnly Mode = "read_only"
	Auto     Mode = "auto"
	Ask      Mode = "ask"
	Approve  Mode = "approve"
)

// Modes lists every mode.
var Modes = []Mode{ReadOnly, Auto, Ask, Approve}

// ParseMode reads a mode name; "" is ReadOnly. Unknown names are an error
// matching ErrConfig.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return ReadOnly, nil
	}
	m := Mode(strings.ToLower(strings.TrimSpace(s)))
	if !slices.Contains(Modes, m) {
		return "", fmt.Errorf("%w: unknown permission mode %q: choose read_only, auto, ask or approve", ErrConfig, s)
	}
	return m, nil
}

// Request is one action a tool wants to take.
type Request struct {
	Capability Capability
	// Detail is what a person needs to judge the action: a path, a
	// command line, a URL.
	Detail string
	// Tool is the tool's name ("write_file").
	Tool string
	// Args are the call's arguments as JSON. Approvals bind to them: an
	// approval covers only a call with identical arguments (compared after
	// canonicalizing the JSON).
	Args json.RawMessage
	// Scope names where the call acts (the sandbox's tier and root).
	// Approvals bind to it too: one given for one workspace never covers
	// a call in another that shares the store.
	Scope string
	// Escalation, for Code, names the wider sandbox the call asks to run
	// in; "" runs in the default sandbox. An escalation is decided by a
	// person for this one call, in every mode, and the decision must be
	// confirmed (Gate.Confirm) right before the run.
	Escalation string
	// EscalationPolicy, with Escalation, is what that sandbox is: a
	// canonical form of its policy (run_code passes its normalized
	// policy's JSON). An approval binds to it as to the name, so a
	// sandbox whose definition changed after a person approved a call
	// (its settings edited, the server restarted) runs nothing on that
	// approval: the call waits for a person again.
	EscalationPolicy string

	// The fields below are what Rules match; they carry no weight in
	// the mode's decision or in an approval's binding.

	// Paths, for a file tool (capabilities Read, Glob, Write), are the
	// root-relative, cleaned paths the call reads or changes (sandbox.Clean;
	// a path that cannot be cleaned is passed as given, and no rule allows
	// it). For glob it is the pattern's directory part.
	Paths []string
	// Recursive says the call reads or changes everything below Paths
	// (grep over a directory, a recursive delete, a directory moved), so a
	// deny or ask rule on any path that may lie below one of them applies.
	Recursive bool
	// Command, for Shell, is the command line the call runs ("" means
	// Detail is); for process_input it is the text sent to the process.
	Command string
	// Host, for Fetch, is the URL's host and port ("example.com:443").
	Host string
}

// Printable is s as it can be shown to a person making a decision: s
// itself when every character is printable, else s quoted with Go's
// escapes. A carriage return, a terminal escape, a line flood or a
// right-to-left override in an agent's text then cannot hide part of it.
func Printable(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) < 0 {
		return s
	}
	return strconv.Quote(s) // a byte that is no UTF-8 too (0x9b: a terminal's CSI)
}

// describe names the request in a reason the agent reads, its detail cut
// to maxDescribed bytes: a 16 MiB command is not echoed back whole.
func (r Request) describe() string {
	if r.Detail == "" {
		return string(r.Capability)
	}
	return fmt.Sprintf("%s (%s)", r.Capability, Shorten(r.Detail, maxDescribed))
}

const maxDescribed = 1000

// Shorten is s when it has at most n bytes, else its first n bytes (never
// cutting a character), how long s is, and a digest of it so that two long
// texts with one beginning are told apart.
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	sum := sha256.Sum256([]byte(s))
	return fmt.Sprintf("%s... [%d bytes in all, sha256 %x]", s[:cut], len(s), sum[:8])
}

// Decision is the gate's answer.
type Decision struct {
	Allowed bool
	// Reason explains a denial in words the agent sees ("write denied in
	// read_only mode").
	Reason string
	// By says who decided: "mode", "allow", "rule", "asker", "ask_when"
	// or "approval".
	By string
	// Rule names the rule (Rules) that decided, or that sent the call to
	// a person: where it is written and its text
	// ("rules.yaml:4: deny shell rm -rf *"); "" when no rule matched.
	Rule string
	// ApprovalID is the approval that allowed or denied the call, if any.
	ApprovalID string
	// DecidedBy, with ApprovalID, names the person who approved or denied
	// that request.
	DecidedBy string

	// grant is set by the gate on an allowed escalation, and only there:
	// Confirm runs nothing without it, so a Decision made anywhere else
	// allows no escalated run.
	grant *grant
}

// grant is what an allowed escalation carries to Confirm: the gate that
// allowed it, the request it covers, and whether it was used.
type grant struct {
	gate *Gate
	key  string
	used atomic.Bool
}

// ErrConfig matches every error about a wrong permission setting: an
// unknown mode or capability, a bad rule, an approval store or audit log
// that cannot be used as it is. The message names the setting and the fix.
var ErrConfig = cfgerr.New("invalid permission configuration")

// ErrApprovalRequired matches every *ApprovalRequiredError.
var ErrApprovalRequired = errors.New("approval required")

// ApprovalRequiredError stops a call in Approve mode until a human decides
// the pending request ID.
type ApprovalRequiredError struct {
	ID      string
	Request Request
}

func (e *ApprovalRequiredError) Error() string {
	return fmt.Sprintf("approval required for %s: pending request %s", e.Request.describe(), e.ID)
}

// Is makes errors.Is(err, ErrApprovalRequired) hold.
func (e *ApprovalRequiredError) Is(target error) bool { return target == ErrApprovalRequired }

// Asker asks a human whether req may proceed. An error counts as a denial,
// except one matching ErrAskDeferred.
type Asker func(ctx context.Context, req Request) (bool, error)

// ErrAskDeferred lets an Asker suspend a call instead of answering now: the
// gate returns the Asker's error from Check (not a denial), so a front end
// that must ask out of band (MCP's multi-round-trip requests) can collect
// the answer and call again.
var ErrAskDeferred = errors.New("ask deferred")

// Config builds a Gate.
type Config struct {
	Mode Mode
	// Allow adds capabilities in every mode.
	Allow []Capability
	// Asker decides privileged actions in Ask mode; nil denies them.
	Asker Asker
	// AskWhen, in Ask mode, says which actions go to the Asker; the others
	// are allowed without asking. nil asks for every privileged action.
	AskWhen func(Request) bool
	// Store holds pending requests and decisions; required in Approve mode.
	Store *Store
	// Audit, when set, receives one entry per decision.
	Audit *AuditLog
	// Rules, when set, decide a request before the mode does: a deny
	// holds in every mode, an allow grants in every mode (never an
	// escalation), an ask puts the call to a person; a request no rule
	// matches is decided by the mode. See Gate.Check.
	Rules Rules
}

// Verdict is what a rule says of a request it matches.
type Verdict string

// The verdicts, from the weakest to the strictest.
const (
	VerdictAllow Verdict = "allow"
	VerdictAsk   Verdict = "ask"
	VerdictDeny  Verdict = "deny"
)

// RuleMatch is the strictest rule matching a request.
type RuleMatch struct {
	Verdict Verdict
	// Rule names the rule: where it is written and its text
	// ("rules.yaml:4: deny shell rm -rf *").
	Rule string
	// Reason is the rule's own reason ("" when it gives none).
	Reason string
}

// Rules decide requests before the mode does (package permission/rules
// implements them). Match returns the strictest matching rule (deny over
// ask over allow); ok false leaves the request to the mode. Covers
// reports whether some allow or ask rule may match a request of c, so
// that a tool needing c is offered even where the mode never allows c.
// Implementations must be safe for concurrent use.
type Rules interface {
	Match(req Request) (m RuleMatch, ok bool)
	Covers(c Capability) bool
}

// Gate decides requests. It is safe for concurrent use.
type Gate struct {
	cfg   Config
	allow map[Capability]bool
}

// New checks cfg and returns a gate. Errors match ErrConfig.
func New(cfg Config) (*Gate, error) {
	mode, err := ParseMode(string(cfg.Mode))
	if err != nil {
		return nil, err
	}
	cfg.Mode = mode
	if cfg.Mode == Approve && cfg.Store == nil {
		return nil, fmt.Errorf("%w: approve mode needs an approval store (--store FILE)", ErrConfig)
	}
	g := &Gate{cfg: cfg, allow: map[Capability]bool{}}
	for _, c := range cfg.Allow {
		if !c.Known() {
			return nil, fmt.Errorf("%w: unknown capability %q in the allow list", ErrConfig, c)
		}
		if c == Code {
			return nil, errAllowCode
		}
		g.allow[c] = true
	}
	return g, nil
}

// Mode is the gate's mode.
func (g *Gate) Mode() Mode { return g.cfg.Mode }

// NeverAllows reports whether no call using c can ever pass this gate, so
// a tool needing it should not be offered at all.
func (g *Gate) NeverAllows(c Capability) bool {
	switch {
	case g.cfg.Mode == Auto, c == Code:
		return false
	case !c.Known():
		return true
	case !c.Privileged() || g.allow[c]:
		return false
	case g.cfg.Rules != nil && g.cfg.Rules.Covers(c):
		return false
	}
	switch g.cfg.Mode {
	case ReadOnly:
		return true
	case Ask:
		return g.cfg.Asker == nil && g.cfg.AskWhen == nil
	}
	return false // Approve: a human may approve
}

// Check decides req. With Rules, the strictest matching rule decides
// first: deny denies in every mode (auto too); allow allows in every mode
// (read_only too), except a run_code escalation, which only a person
// allows; ask puts the call to a person — the approval store in approve
// mode, else the Asker when there is one, else the approval store when
// there is one, else it is denied (read_only and auto have nobody to ask
// unless the front end gave an Asker or a store). A request no rule
// matches is decided by the mode. A denial is a Decision with Allowed
// false, never an error. The error is non-nil only in Approve mode while the request waits
// for a human (*ApprovalRequiredError), when the Asker deferred
// (ErrAskDeferred), or when ctx is done (also when it is done by the time
// the Asker says yes: the answer then allows nothing).
func (g *Gate) Check(ctx context.Context, req Request) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	var d Decision
	var err error
	m, ruled := g.matchRule(req)
	switch {
	case ruled:
		d, err = g.decideRule(ctx, req, m)
	case req.Capability == Code:
		d, err = g.decideCode(ctx, req)
	default:
		d, err = g.decide(ctx, req)
	}
	if aerr := g.audit(req, d, err); aerr != nil && d.Allowed {
		// An action that cannot be recorded does not happen.
		d = deny("audit", "%s denied: audit log failed: %v", req.describe(), aerr)
	}
	return d, err
}

func (g *Gate) decide(ctx context.Context, req Request) (Decision, error) {
	c := req.Capability
	switch {
	case g.cfg.Mode == Auto:
		return Decision{Allowed: true, By: "mode"}, nil
	case !c.Known():
		return deny("mode", "unknown capability %q denied in %s mode", c, g.cfg.Mode), nil
	case !c.Privileged():
		return Decision{Allowed: true, By: "mode"}, nil
	case g.allow[c]:
		return Decision{Allowed: true, By: "allow"}, nil
	}
	switch g.cfg.Mode {
	case Ask:
		if g.cfg.AskWhen != nil && !g.cfg.AskWhen(req) {
			return Decision{Allowed: true, By: "ask_when"}, nil
		}
		if g.cfg.Asker == nil {
			return deny("asker", "%s denied by user (nobody to ask)", req.describe()), nil
		}
		return g.ask(ctx, req, req.describe())
	case Approve:
		return g.approve(ctx, req)
	}
	return deny("mode", "%s denied in %s mode", c, g.cfg.Mode), nil
}

// ask puts req to the Asker (which must be set); what names the action
// in a denial.
func (g *Gate) ask(ctx context.Context, req Request, what string) (Decision, error) {
	ok, err := g.cfg.Asker(ctx, req)
	switch {
	case errors.Is(err, ErrAskDeferred):
		return Decision{By: "asker"}, err
	case err != nil:
		return deny("asker", "%s denied: could not ask: %v", what, err), nil
	case !ok:
		return deny("asker", "%s denied by user", what), nil
	case ctx.Err() != nil:
		// A yes that came after the call was given up covers nothing:
		// the call is over.
		return Decision{By: "asker"}, ctx.Err()
	}
	return Decision{Allowed: true, By: "asker"}, nil
}

func (g *Gate) approve(ctx context.Context, req Request) (Decision, error) {
	a, lapsed, err := g.cfg.Store.claim(ctx, req)
	if lapsed != nil {
		// Not a failure of this call, which is not allowed either way (it
		// waits for a new decision); Check records that line too.
		_ = g.recordExpired(req, *lapsed)
	}
	switch {
	case err != nil:
		// Fail closed, and say why.
		return deny("approval", "%s denied: approval store failed: %v", req.describe(), err), nil
	case a.Status == StatusApproved:
		return Decision{Allowed: true, By: "approval", ApprovalID: a.ID, DecidedBy: a.DecidedBy}, nil
	case a.Status == StatusDenied:
		d := deny("approval", "%s not approved", req.describe())
		d.ApprovalID, d.DecidedBy = a.ID, a.DecidedBy
		return d, nil
	}
	return Decision{By: "approval", ApprovalID: a.ID}, &ApprovalRequiredError{ID: a.ID, Request: req}
}

// recordExpired appends the audit line of a decision that expired
// before any call used it (the call that found it waits for a new one):
// a, as it was decided, names the decision ("approved ... not used
// within 24h0m0s").
func (g *Gate) recordExpired(req Request, a Approval) error {
	if g.cfg.Audit == nil {
		return nil
	}
	e := g.entry(req, Decision{By: "approval", ApprovalID: a.ID, DecidedBy: a.DecidedBy,
		Reason: fmt.Sprintf("%s %s, not used within %v", a.Status, decidedAt(a).Format(time.RFC3339), g.cfg.Store.ttl)}, "expired")
	return g.cfg.Audit.Record(e)
}

func deny(by, format string, args ...any) Decision {
	return Decision{Allowed: false, By: by, Reason: fmt.Sprintf(format, args...)}
}

func (g *Gate) audit(req Request, d Decision, err error) error {
	if g.cfg.Audit == nil {
		return nil
	}
	outcome := "denied"
	switch {
	case errors.Is(err, ErrApprovalRequired):
		outcome = "approval_required"
	case errors.Is(err, ErrAskDeferred):
		outcome = "asking"
	case err != nil:
		return nil // ctx done: nothing was decided
	case d.Allowed:
		outcome = "allowed"
	}
	return g.cfg.Audit.Record(g.entry(req, d, outcome))
}

// entry is the audit line of d, a decision on req.
func (g *Gate) entry(req Request, d Decision, outcome string) AuditEntry {
	return AuditEntry{
		Time:       time.Now().UTC(),
		Capability: req.Capability,
		Detail:     req.Detail,
		Tool:       req.Tool,
		Mode:       g.cfg.Mode,
		Outcome:    outcome,
		By:         d.By,
		ApprovalID: d.ApprovalID,
		DecidedBy:  d.DecidedBy,
		Reason:     d.Reason,
		Sandbox:    req.Escalation,
		Rule:       d.Rule,
	}
}
