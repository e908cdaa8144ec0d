package permission

import (
	"context"
	"fmt"
)

// matchRule asks the gate's rules about req.
func (g *Gate) matchRule(req Request) (RuleMatch, bool) {
	if g.cfg.Rules == nil {
		return RuleMatch{}, false
	}
	return g.cfg.Rules.Match(req)
}

// decideRule decides req as the rule m says (see Check). A run_code
// escalation is never allowed by a rule: an allow or ask leaves it to
// decideCode, which puts it to a person; a deny denies it.
func (g *Gate) decideRule(ctx context.Context, req Request, m RuleMatch) (Decision, error) {
	escalation := req.Capability == Code && req.Escalation != ""
	var d Decision
	var err error
	switch {
	case m.Verdict == VerdictDeny:
		d = deny("rule", "%s denied by rule %s%s", req.describe(), m.Rule, because(m.Reason))
	case escalation:
		d, err = g.decideCode(ctx, req)
	case m.Verdict == VerdictAllow:
		d = Decision{Allowed: true, By: "rule"}
	case m.Verdict == VerdictAsk:
		d, err = g.askPerson(ctx, req, m)
	default:
		d = deny("rule", "%s denied: rule %s has the unknown verdict %q", req.describe(), m.Rule, m.Verdict)
	}
	d.Rule = m.Rule
	return d, err
}

// askPerson puts req, which the ask rule m matched, to a person: the
// approval store in approve mode, else the Asker, else the approval
// store; with neither it is denied.
func (g *Gate) askPerson(ctx context.Context, req Request, m RuleMatch) (Decision, error) {
	switch {
	case g.cfg.Store != nil && (g.cfg.Mode == Approve || g.cfg.Asker == nil):
		return g.approve(ctx, req)
	case g.cfg.Asker != nil:
		return g.ask(ctx, req, req.describe())
	}
	return deny("rule", "%s denied: rule %s asks a person%s, and nobody can be asked in %s mode: run with --mode ask (a client that can ask) or --mode approve --store FILE",
		req.describe(), m.Rule, because(m.Reason), g.cfg.Mode), nil
}

// because is a rule's reason as a denial's tail: " (reason)".
func because(reason string) string {
	if reason == "" {
		return ""
	}
	return fmt.Sprintf(" (%s)", reason)
}

// PersonMayDecide reports whether a call may be put to a person or the
// approval store — in ask or approve mode, or with Rules (an ask rule
// asks in every mode) — so a caller must give Request.Args, to which the
// person's answer and an approval bind.
func (g *Gate) PersonMayDecide() bool {
	return g.cfg.Mode == Ask || g.cfg.Mode == Approve || g.cfg.Rules != nil
}
