package permission

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotApproved matches every refusal of Gate.Confirm: the escalated run
// it was asked about must not start.
var ErrNotApproved = errors.New("escalation not approved")

// errAllowCode refuses code in an allow list: the default sandbox needs no
// allowing, and an escalation is never allowed in advance.
var errAllowCode = fmt.Errorf("%w: code cannot be allowed in advance: run_code's default sandbox runs without it, and a call asking for a wider sandbox always waits for a person", ErrConfig)

// decideCode decides a run_code call. The default sandbox (no Escalation)
// is allowed in every mode: declaring it is what allows it. An escalation
// goes to a person in every mode — the Asker in ask mode, the approval
// store in approve mode, ignoring AskWhen and the allow list — and is
// refused where nobody can decide (auto, read_only). An allowed escalation
// carries the grant Confirm checks.
func (g *Gate) decideCode(ctx context.Context, req Request) (Decision, error) {
	if req.Escalation == "" {
		return Decision{Allowed: true, By: "sandbox"}, nil
	}
	var d Decision
	var err error
	switch g.cfg.Mode {
	case Ask:
		if g.cfg.Asker == nil {
			return deny("asker", "%s denied: nobody can be asked to approve it", req.describeEscalation()), nil
		}
		if d, err = g.ask(ctx, req, req.describeEscalation()); err != nil || !d.Allowed {
			return d, err
		}
	case Approve:
		if d, err = g.approve(ctx, req); err != nil || !d.Allowed {
			return d, err
		}
	default:
		return deny("mode", "%s denied: in %s mode nobody decides escalations; run hutch with --mode ask (an MCP client that can ask the user) or --mode approve (a person approves with hutch approvals), or call run_code without a sandbox",
			req.describeEscalation(), g.cfg.Mode), nil
	}
	key, err := RequestKey(req)
	if err != nil {
		return deny("mode", "%s denied: %v", req.describeEscalation(), err), nil
	}
	d.grant = &grant{gate: g, key: key}
	return d, nil
}

func (r Request) describeEscalation() string {
	return fmt.Sprintf("running code in sandbox %q", r.Escalation)
}

// Confirm is the last check before an escalated run starts, and the only
// way to one: it returns nil only when d is this gate's allowing decision
// on exactly req (same capability, tool, scope, arguments and sandbox),
// d was not confirmed before, and — for a decision from the approval
// store — the stored record still says that request was approved and
// claimed by this call. Anything else matches ErrNotApproved, and the run
// must not start: a Decision not made by this gate (a direct library
// call), a second use, a record changed after the decision, a store that
// cannot be read. Each confirmation and refusal is written to the audit
// log ("run" or "refused"); an escalation that cannot be recorded does not
// run.
func (g *Gate) Confirm(ctx context.Context, req Request, d Decision) error {
	err := g.confirm(ctx, req, d)
	e := g.entry(req, d, "run")
	e.Sandbox = req.Escalation
	if err != nil {
		e.Outcome, e.Reason = "refused", err.Error()
	}
	if g.cfg.Audit != nil {
		if aerr := g.cfg.Audit.Record(e); aerr != nil && err == nil {
			err = fmt.Errorf("%w: audit log failed: %v", ErrNotApproved, aerr)
		}
	}
	return err
}

func (g *Gate) confirm(ctx context.Context, req Request, d Decision) error {
	refuse := func(why string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrNotApproved, fmt.Sprintf(why, args...))
	}
	if req.Capability != Code || req.Escalation == "" {
		return refuse("not an escalation")
	}
	if !d.Allowed || d.grant == nil || d.grant.gate != g {
		return refuse("no decision of this gate allowed it")
	}
	key, err := RequestKey(req)
	if err != nil || key != d.grant.key {
		return refuse("the call is not the one that was approved")
	}
	switch d.By {
	case "asker":
	case "approval":
		if g.cfg.Store == nil {
			return refuse("no approval store")
		}
		a, err := g.cfg.Store.Get(ctx, d.ApprovalID)
		if err != nil {
			return refuse("approval store: %v", err)
		}
		if a.Key != key || a.Status != StatusUsed || a.ClaimedAt == nil || time.Since(*a.ClaimedAt) > confirmWithin {
			return refuse("approval %s no longer matches this call (status %s)", a.ID, a.Status)
		}
	default:
		return refuse("decided by %s, not by a person", d.By)
	}
	if !d.grant.used.CompareAndSwap(false, true) {
		return refuse("this approval was already used")
	}
	return nil
}

// confirmWithin bounds the time between an approval's claim and its run:
// the claim and Confirm are one tool call apart, so a claim older than this
// was not made for the call confirming it.
const confirmWithin = 5 * time.Minute
