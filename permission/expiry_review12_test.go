package permission

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// An expired decision leaves exactly one open key (the new request's); the
// new request carries the call's scope and arguments; and a decision made
// after the request waited longer than the TTL is not expired at once.
func TestReview12ExpiryBookkeeping(t *testing.T) {
	ctx := context.Background()
	s, err := OpenStore(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetDecisionTTL(150 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	req := Request{Capability: Shell, Detail: "make deploy", Tool: "shell", Args: json.RawMessage(`{"b":1, "a":2}`), Scope: "local:/w"}
	st, id, err := s.Claim(ctx, req)
	if err != nil || st != StatusPending {
		t.Fatal(st, err)
	}
	time.Sleep(300 * time.Millisecond) // pending longer than the TTL
	if _, err := s.Decide(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if st, got, err := s.Claim(ctx, req); err != nil || st != StatusApproved || got != id {
		t.Fatalf("a fresh decision on an old request: %s %s %v; want approved %s", st, got, err, id)
	}
	// Again, now letting the decision expire.
	_, id2, _ := s.Claim(ctx, req)
	if _, err := s.Decide(ctx, id2, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	st, id3, err := s.Claim(ctx, req)
	if err != nil || st != StatusPending || id3 == id2 {
		t.Fatalf("past the TTL: %s %s %v", st, id3, err)
	}
	old, _ := s.Get(ctx, id2)
	nw, _ := s.Get(ctx, id3)
	if old.Status != StatusExpired || old.ClaimedAt != nil {
		t.Errorf("old: %+v", old)
	}
	if nw.Scope != req.Scope || string(nw.Arguments) != `{"a":2,"b":1}` || nw.Tool != "shell" || nw.Detail != req.Detail {
		t.Errorf("new request: %+v", nw)
	}
	key, _ := RequestKey(req)
	_ = s.view(ctx, func(tx *sql.Tx) error {
		rows, err := tx.Query(`SELECT key, id FROM open_keys`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var k, v string
			_ = rows.Scan(&k, &v)
			n++
			if k != key || v != id3 {
				t.Errorf("open %s -> %s", k, v)
			}
		}
		if n != 1 {
			t.Errorf("%d open keys, want 1", n)
		}
		return nil
	})
}
