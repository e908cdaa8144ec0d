package permission_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
)

// fakeRules says verdict of every request whose Detail is detail.
type fakeRules map[string]permission.Verdict

func (f fakeRules) Match(r permission.Request) (permission.RuleMatch, bool) {
	v, ok := f[r.Detail]
	if !ok {
		return permission.RuleMatch{}, false
	}
	return permission.RuleMatch{Verdict: v, Rule: "r.yaml:1: " + string(v) + " " + r.Detail, Reason: "because"}, true
}

func (f fakeRules) Covers(permission.Capability) bool { return len(f) > 0 }

func TestRulesDecideBeforeTheModeInEveryMode(t *testing.T) {
	rules := fakeRules{"a": permission.VerdictAllow, "k": permission.VerdictAsk, "d": permission.VerdictDeny}
	yes := func(context.Context, permission.Request) (bool, error) { return true, nil }
	type want struct {
		allowed bool
		by      string
	}
	tests := []struct {
		mode  permission.Mode
		asker bool
		cases map[string]want // detail -> decision on a shell call
	}{
		{permission.ReadOnly, false, map[string]want{"a": {true, "rule"}, "k": {false, "rule"}, "d": {false, "rule"}, "none": {false, "mode"}}},
		{permission.ReadOnly, true, map[string]want{"a": {true, "rule"}, "k": {true, "asker"}, "d": {false, "rule"}, "none": {false, "mode"}}},
		{permission.Auto, false, map[string]want{"a": {true, "rule"}, "k": {false, "rule"}, "d": {false, "rule"}, "none": {true, "mode"}}},
		{permission.Auto, true, map[string]want{"a": {true, "rule"}, "k": {true, "asker"}, "d": {false, "rule"}, "none": {true, "mode"}}},
		{permission.Ask, true, map[string]want{"a": {true, "rule"}, "k": {true, "asker"}, "d": {false, "rule"}, "none": {true, "asker"}}},
		{permission.Ask, false, map[string]want{"a": {true, "rule"}, "k": {false, "rule"}, "d": {false, "rule"}, "none": {false, "asker"}}},
	}
	for _, tt := range tests {
		cfg := permission.Config{Mode: tt.mode, Rules: rules}
		if tt.asker {
			cfg.Asker = yes
		}
		g := gate(t, cfg)
		for detail, w := range tt.cases {
			d, err := g.Check(bg, req(permission.Shell, detail))
			if err != nil || d.Allowed != w.allowed || d.By != w.by {
				t.Errorf("%s (asker %v) %s: %+v %v, want allowed %v by %s", tt.mode, tt.asker, detail, d, err, w.allowed, w.by)
			}
			if detail != "none" && !strings.Contains(d.Rule, "r.yaml:1: ") {
				t.Errorf("%s %s: Decision.Rule %q does not name the rule", tt.mode, detail, d.Rule)
			}
		}
	}
}

func TestAnAskRuleInApproveModeWaitsForTheStore(t *testing.T) {
	g := gate(t, permission.Config{Mode: permission.Approve, Store: newStore(t), Rules: fakeRules{"k": permission.VerdictAsk, "a": permission.VerdictAllow}})
	if _, err := g.Check(bg, req(permission.Write, "k")); !errors.Is(err, permission.ErrApprovalRequired) {
		t.Errorf("ask rule in approve mode: %v, want approval required", err)
	}
	if d, err := g.Check(bg, req(permission.Write, "a")); err != nil || !d.Allowed || d.By != "rule" {
		t.Errorf("allow rule in approve mode: %+v %v", d, err)
	}
}

func TestADenyRuleNamesTheRuleAndItsReason(t *testing.T) {
	g := gate(t, permission.Config{Mode: permission.Auto, Rules: fakeRules{"d": permission.VerdictDeny}})
	d, _ := g.Check(bg, req(permission.Write, "d"))
	if d.Allowed || !strings.Contains(d.Reason, "denied by rule r.yaml:1: deny d (because)") {
		t.Errorf("deny: %+v", d)
	}
}

func TestNoRuleAllowsAnEscalation(t *testing.T) {
	yes := func(context.Context, permission.Request) (bool, error) { return true, nil }
	esc := func(detail string) permission.Request {
		r := req(permission.Code, detail)
		r.Escalation = "online"
		return r
	}
	for _, mode := range []permission.Mode{permission.ReadOnly, permission.Auto} {
		g := gate(t, permission.Config{Mode: mode, Rules: fakeRules{"a": permission.VerdictAllow, "k": permission.VerdictAsk}, Asker: yes})
		for _, detail := range []string{"a", "k"} {
			if d, err := g.Check(bg, esc(detail)); err != nil || d.Allowed {
				t.Errorf("%s: escalation with an %s rule: %+v %v, want denied", mode, detail, d, err)
			}
		}
	}
	g := gate(t, permission.Config{Mode: permission.Ask, Asker: yes, Rules: fakeRules{"a": permission.VerdictAllow, "d": permission.VerdictDeny}})
	if d, _ := g.Check(bg, esc("a")); !d.Allowed || d.By != "asker" {
		t.Errorf("ask mode, allow rule: the person decides, got %+v", d)
	}
	if d, _ := g.Check(bg, esc("d")); d.Allowed || d.By != "rule" {
		t.Errorf("ask mode, deny rule: %+v, want denied by the rule", d)
	}
}

func TestRulesMakeAToolOfferedInReadOnly(t *testing.T) {
	if !gate(t, permission.Config{}).NeverAllows(permission.Shell) {
		t.Fatal("read_only without rules allows shell")
	}
	if gate(t, permission.Config{Rules: fakeRules{"a": permission.VerdictAllow}}).NeverAllows(permission.Shell) {
		t.Error("read_only with an allow rule never allows shell")
	}
}

func TestTheAuditLineNamesTheRule(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := permission.OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	g := gate(t, permission.Config{Mode: permission.Auto, Audit: audit, Rules: fakeRules{"d": permission.VerdictDeny, "a": permission.VerdictAllow}})
	g.Check(bg, req(permission.Shell, "d"))
	g.Check(bg, req(permission.Shell, "a"))
	g.Check(bg, req(permission.Shell, "none"))
	got := readAudit(t, path)
	want := []struct{ outcome, by, rule string }{{"denied", "rule", "r.yaml:1: deny d"}, {"allowed", "rule", "r.yaml:1: allow a"}, {"allowed", "mode", ""}}
	if len(got) != len(want) {
		t.Fatalf("%d lines", len(got))
	}
	for i, w := range want {
		if got[i].Outcome != w.outcome || got[i].By != w.by || got[i].Rule != w.rule {
			t.Errorf("line %d: %+v, want %+v", i, got[i], w)
		}
	}
}
