package permission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
)

// escalation is a run_code call asking for the sandbox named name.
func escalation(name, code string) permission.Request {
	args, _ := json.Marshal(map[string]string{"language": "python", "code": code, "sandbox": name, "reason": "edit the project"})
	return permission.Request{Capability: permission.Code, Tool: "run_code", Detail: code, Args: args, Scope: "s", Escalation: name}
}

func yes(context.Context, permission.Request) (bool, error) { return true, nil }

// The default sandbox runs in every mode without anybody asked: declaring
// it is what allows it.
func TestCodeDefaultSandboxRunsInEveryMode(t *testing.T) {
	for _, m := range permission.Modes {
		cfg := permission.Config{Mode: m}
		if m == permission.Approve {
			cfg.Store = newStore(t)
		}
		asked := false
		cfg.Asker = func(context.Context, permission.Request) (bool, error) { asked = true; return false, nil }
		g := gate(t, cfg)
		d, err := g.Check(bg, escalation("", "print(1)"))
		if err != nil || !d.Allowed || asked || d.By != "sandbox" {
			t.Errorf("%s: default sandbox: %+v %v (asked %v)", m, d, err, asked)
		}
		if g.NeverAllows(permission.Code) {
			t.Errorf("%s: NeverAllows(code): run_code would not be offered", m)
		}
	}
}

// Where nobody can decide (auto, read_only, ask without an asker), an
// escalation is refused with the way to allow escalations.
func TestEscalationNeedsSomebodyToDecide(t *testing.T) {
	for _, cfg := range []permission.Config{{Mode: permission.Auto}, {Mode: permission.ReadOnly}, {Mode: permission.Ask}} {
		g := gate(t, cfg)
		d, err := g.Check(bg, escalation("workspace", "print(1)"))
		if err != nil || d.Allowed {
			t.Fatalf("%s: escalation allowed: %+v %v", cfg.Mode, d, err)
		}
		if cfg.Mode != permission.Ask && !strings.Contains(d.Reason, "--mode ask") {
			t.Errorf("%s: the refusal does not say how to allow escalations: %q", cfg.Mode, d.Reason)
		}
		if err := g.Confirm(bg, escalation("workspace", "print(1)"), d); !errors.Is(err, permission.ErrNotApproved) {
			t.Errorf("%s: Confirm of a denial: %v", cfg.Mode, err)
		}
	}
}

// Neither an allow list nor AskWhen lets an escalation through unasked.
func TestEscalationIsNeverAllowedInAdvance(t *testing.T) {
	if _, err := permission.ParseCapabilities("shell,code"); !errors.Is(err, permission.ErrConfig) {
		t.Errorf("ParseCapabilities(code): %v, want ErrConfig", err)
	}
	if _, err := permission.New(permission.Config{Mode: permission.Auto, Allow: []permission.Capability{permission.Code}}); !errors.Is(err, permission.ErrConfig) {
		t.Errorf("New with code allowed: %v, want ErrConfig", err)
	}
	asked := 0
	g := gate(t, permission.Config{Mode: permission.Ask, Allow: []permission.Capability{permission.Shell},
		AskWhen: func(permission.Request) bool { return false },
		Asker:   func(context.Context, permission.Request) (bool, error) { asked++; return false, nil }})
	if d, err := g.Check(bg, escalation("workspace", "x")); err != nil || d.Allowed || asked != 1 {
		t.Errorf("AskWhen false: %+v %v, asked %d times (want a denial after asking once)", d, err, asked)
	}
}

// A person's yes is confirmed once, for exactly the call it was given
// for, by the gate that gave it; a Decision made anywhere else, or for
// another call, or used a second time, runs nothing.
func TestConfirmBindsOneDecisionToOneCall(t *testing.T) {
	g := gate(t, permission.Config{Mode: permission.Ask, Asker: yes})
	other := gate(t, permission.Config{Mode: permission.Ask, Asker: yes})
	call := escalation("workspace", "open('x','w')")
	changed := map[string]permission.Request{
		"code":    escalation("workspace", "open('y','w')"),
		"sandbox": escalation("online", "open('x','w')"),
		"scope": func() permission.Request {
			r := call
			r.Scope = "elsewhere"
			return r
		}(),
		"escalation field": func() permission.Request {
			r := call
			r.Escalation = "online"
			return r
		}(),
		"default": escalation("", "open('x','w')"),
	}
	for name, c := range changed {
		d, err := g.Check(bg, call)
		if err != nil || !d.Allowed {
			t.Fatalf("asker said yes: %+v %v", d, err)
		}
		if err := g.Confirm(bg, c, d); !errors.Is(err, permission.ErrNotApproved) {
			t.Errorf("changed %s after the decision: Confirm %v, want ErrNotApproved", name, err)
		}
	}
	d, _ := g.Check(bg, call)
	if err := other.Confirm(bg, call, d); !errors.Is(err, permission.ErrNotApproved) {
		t.Errorf("another gate confirmed this gate's decision: %v", err)
	}
	forged := permission.Decision{Allowed: true, By: "asker"}
	if err := g.Confirm(bg, call, forged); !errors.Is(err, permission.ErrNotApproved) {
		t.Errorf("a Decision the gate did not make was confirmed: %v", err)
	}
	if err := g.Confirm(bg, call, d); err != nil {
		t.Fatalf("the decision's own call: %v", err)
	}
	if err := g.Confirm(bg, call, d); !errors.Is(err, permission.ErrNotApproved) {
		t.Errorf("one decision confirmed twice: %v", err)
	}
}

// In approve mode an escalation is a pending request a person decides;
// the approval runs its call once, is checked again in the store right
// before the run, and fails closed when the record changed or the store
// cannot be read.
func TestEscalationApprovalIsUsedOnceAndRechecked(t *testing.T) {
	approved := func(t *testing.T) (*permission.Gate, string, permission.Decision, permission.Request) {
		path := filepath.Join(t.TempDir(), "a.db")
		store, err := permission.OpenStore(path)
		if err != nil {
			t.Fatal(err)
		}
		g := gate(t, permission.Config{Mode: permission.Approve, Store: store})
		call := escalation("workspace", "print(2)")
		d, err := g.Check(bg, call)
		id := pendingID(t, d, err)
		if _, err := store.Decide(bg, id, true); err != nil {
			t.Fatal(err)
		}
		d, err = g.Check(bg, call)
		if err != nil || !d.Allowed || d.ApprovalID != id {
			t.Fatalf("approved escalation: %+v %v", d, err)
		}
		return g, path, d, call
	}
	t.Run("used once", func(t *testing.T) {
		g, _, d, call := approved(t)
		if err := g.Confirm(bg, call, d); err != nil {
			t.Fatal(err)
		}
		// The same call again waits for a new decision.
		d2, err := g.Check(bg, call)
		if again := pendingID(t, d2, err); again == d.ApprovalID {
			t.Errorf("the used approval %s covered a second call", again)
		}
	})
	t.Run("record changed after the decision", func(t *testing.T) {
		g, path, d, call := approved(t)
		// The record now covers another call: its key changed in place
		// (same length, so the file stays a whole store).
		key, _ := permission.RequestKey(call)
		other := "0" + key[1:]
		if key[0] == '0' {
			other = "1" + key[1:]
		}
		b, _ := os.ReadFile(path)
		rec := []byte(`"key":"` + key + `"`)
		if !bytes.Contains(b, rec) {
			t.Fatal("the claimed record is not in the file as expected")
		}
		os.WriteFile(path, bytes.ReplaceAll(b, rec, []byte(`"key":"`+other+`"`)), 0o600)
		err := g.Confirm(bg, call, d)
		if !errors.Is(err, permission.ErrNotApproved) || !strings.Contains(err.Error(), "no longer matches") {
			t.Errorf("a record changed after the decision: Confirm %v, want ErrNotApproved naming the mismatch", err)
		}
	})
	t.Run("store unreadable", func(t *testing.T) {
		g, path, d, call := approved(t)
		os.WriteFile(path, bytes.Repeat([]byte("garbage "), 1000), 0o600)
		if err := g.Confirm(bg, call, d); !errors.Is(err, permission.ErrNotApproved) {
			t.Errorf("confirmed through a broken store: %v", err)
		}
	})
}

// Every escalation is audited when asked, decided and run, naming the
// sandbox and the decider.
func TestEscalationIsAudited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := permission.OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	store := newStore(t)
	g := gate(t, permission.Config{Mode: permission.Approve, Store: store, Audit: audit})
	call := escalation("workspace", "print(3)")
	d, err := g.Check(bg, call)
	id := pendingID(t, d, err)
	if _, err := store.DecideAs(bg, id, true, "alice"); err != nil {
		t.Fatal(err)
	}
	if d, err = g.Check(bg, call); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if err := g.Confirm(bg, call, d); err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, e := range readAudit(t, path) {
		if e.Sandbox != "workspace" {
			t.Errorf("audit line without the sandbox: %+v", e)
		}
		outcomes = append(outcomes, e.Outcome)
		if e.Outcome == "run" && (e.DecidedBy != "alice" || e.ApprovalID != id) {
			t.Errorf("run line does not name the decider: %+v", e)
		}
	}
	if got := strings.Join(outcomes, ","); got != "approval_required,allowed,run" {
		t.Errorf("audit outcomes %s, want approval_required,allowed,run", got)
	}
}
