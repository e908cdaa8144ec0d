package permission_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/permission"
)

func readAudit(t *testing.T, path string) []permission.AuditEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var entries []permission.AuditEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e permission.AuditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		entries = append(entries, e)
	}
	return entries
}

// A person's decision is recorded with who made it: in the store, in the
// audit entry of the call it covers, and (RecordDecided) as an entry of
// its own.
func TestDecisionsNameThePerson(t *testing.T) {
	me := permission.CurrentUser()
	if !strings.Contains(me, "uid ") {
		t.Fatalf("CurrentUser() = %q, want it to carry the uid", me)
	}
	cases := []struct {
		name    string
		approve bool
		by      string // given to DecideAs; "" uses Decide
		want    string
		outcome string // of the call's own entry
	}{
		{"approve as this user", true, "", me, "allowed"},
		{"deny as this user", false, "", me, "denied"},
		{"approve as a named person", true, "ana@example.com (web)", "ana@example.com (web)", "allowed"},
		{"blank name is this user", true, "  ", me, "allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			audit, err := permission.OpenAudit(path)
			if err != nil {
				t.Fatal(err)
			}
			defer audit.Close()
			store := newStore(t)
			g := gate(t, permission.Config{Mode: permission.Approve, Store: store, Audit: audit})
			r := req(permission.Shell, "make deploy")
			_, err = g.Check(bg, r)
			id := pendingID(t, permission.Decision{}, err)

			var a permission.Approval
			if c.by == "" {
				a, err = store.Decide(bg, id, c.approve)
			} else {
				a, err = store.DecideAs(bg, id, c.approve, c.by)
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.DecidedBy != c.want || a.DecidedAt == nil {
				t.Errorf("decision = %+v, want decided by %q", a, c.want)
			}
			if got, err := store.Get(bg, id); err != nil || got.DecidedBy != c.want {
				t.Errorf("stored decision = %+v, %v; want decided by %q", got, err, c.want)
			}
			if err := audit.RecordDecided(a); err != nil {
				t.Fatal(err)
			}
			d, err := g.Check(bg, r)
			if err != nil || d.Allowed != c.approve || d.ApprovalID != id || d.DecidedBy != c.want {
				t.Errorf("claiming the decision = %+v, %v", d, err)
			}

			entries := readAudit(t, path)
			if len(entries) != 3 {
				t.Fatalf("%d audit entries, want 3: %+v", len(entries), entries)
			}
			person, call := entries[1], entries[2]
			if person.Outcome != string(a.Status) || person.By != "person" || person.DecidedBy != c.want ||
				person.ApprovalID != id || person.Detail != "make deploy" || !person.Time.Equal(*a.DecidedAt) {
				t.Errorf("the person's entry = %+v", person)
			}
			if call.Outcome != c.outcome || call.By != "approval" || call.DecidedBy != c.want || call.ApprovalID != id {
				t.Errorf("the call's entry = %+v", call)
			}
		})
	}
}

func TestRecordDecidedRefusesAnUndecidedRequest(t *testing.T) {
	audit, err := permission.OpenAudit(filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	for _, st := range []permission.Status{permission.StatusPending, permission.StatusUsed, permission.StatusClosed, ""} {
		if err := audit.RecordDecided(permission.Approval{ID: "abc", Status: st}); err == nil || !strings.Contains(err.Error(), "not a decision") {
			t.Errorf("status %q: %v, want an error", st, err)
		}
	}
}

// A decision covers its call for the store's decision TTL: after that the
// identical call is a new pending request, and the old one reads expired.
// 0 turns expiry off; a negative TTL is a configuration error.
func TestDecisionsExpire(t *testing.T) {
	cases := []struct {
		name    string
		ttl     time.Duration
		approve bool
		expires bool
	}{
		{"approval within its TTL", time.Hour, true, false},
		{"approval past its TTL", 50 * time.Millisecond, true, true},
		{"denial past its TTL", 50 * time.Millisecond, false, true},
		{"no expiry", 0, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := newStore(t)
			if err := store.SetDecisionTTL(c.ttl); err != nil {
				t.Fatal(err)
			}
			g := gate(t, permission.Config{Mode: permission.Approve, Store: store})
			r := req(permission.Shell, "make deploy")
			_, err := g.Check(bg, r)
			id := pendingID(t, permission.Decision{}, err)
			if _, err := store.Decide(bg, id, c.approve); err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			d, err := g.Check(bg, r)
			old, gerr := store.Get(bg, id)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if !c.expires {
				if err != nil || d.Allowed != c.approve || d.ApprovalID != id {
					t.Errorf("within its TTL: %+v %v", d, err)
				}
				return
			}
			if next := pendingID(t, d, err); next == id || old.Status != permission.StatusExpired {
				t.Errorf("past its TTL: new request %s (old %s), old status %s; want a new request and expired", next, id, old.Status)
			}
		})
	}
	if err := newStore(t).SetDecisionTTL(-time.Second); !errors.Is(err, permission.ErrConfig) {
		t.Errorf("a negative TTL: %v, want permission.ErrConfig", err)
	}
}

// A decision that expires unused is an audit line of its own: "expired",
// naming the decision (approved or denied: the person's own line exists
// only with approvals --audit) and who made it, before the call's new
// request.
func TestExpiryIsAudited(t *testing.T) {
	for _, approve := range []bool{true, false} {
		store := newStore(t)
		if err := store.SetDecisionTTL(50 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		audit, err := permission.OpenAudit(path)
		if err != nil {
			t.Fatal(err)
		}
		defer audit.Close()
		g := gate(t, permission.Config{Mode: permission.Approve, Store: store, Audit: audit})
		r := req(permission.Shell, "make deploy")
		_, err = g.Check(bg, r)
		id := pendingID(t, permission.Decision{}, err)
		if _, err := store.DecideAs(bg, id, approve, "alice"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		d, err := g.Check(bg, r)
		next := pendingID(t, d, err)
		decided := map[bool]string{true: "approved", false: "denied"}[approve]
		var got []string
		for _, e := range readAudit(t, path) {
			got = append(got, e.Outcome+" "+e.ApprovalID+" "+e.DecidedBy)
			if e.Outcome == "expired" && (e.Detail != "make deploy" || !strings.HasPrefix(e.Reason, decided+" ") || !strings.Contains(e.Reason, "not used within 50ms")) {
				t.Errorf("the expiry line of a decision %s: %+v", decided, e)
			}
		}
		want := []string{"approval_required " + id + " ", "expired " + id + " alice", "approval_required " + next + " "}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s, audit lines:\n%s\nwant:\n%s", decided, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
