package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/tool"
)

// An edit that cannot apply (old_string missing, or ambiguous) fails
// before the gate: it asks nobody and uses up no approval. One that can
// apply then asks as before.
func TestEditThatCannotApplyAsksNobody(t *testing.T) {
	store, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	sb, dir := localSB(t)
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("one two two"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := tool.New(tool.Options{Sandbox: sb, Gate: newGate(t, permission.Config{Mode: permission.Approve, Store: store})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Call(bg, "read_file", json.RawMessage(`{"path":"f.txt"}`)); err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{
		`{"path":"f.txt","old_string":"three","new_string":"3"}`,
		`{"path":"f.txt","old_string":"two","new_string":"2"}`,
	} {
		out, err := ts.Call(bg, "edit_file", json.RawMessage(args))
		if err != nil || !out.IsError {
			t.Errorf("%s: %+v %v; want a failed edit", args, out, err)
		}
	}
	if open, err := store.List(bg); err != nil || len(open) != 0 {
		t.Fatalf("edits that cannot apply made %d approval requests (%v)", len(open), err)
	}
	_, err = ts.Call(bg, "edit_file", json.RawMessage(`{"path":"f.txt","old_string":"one","new_string":"1"}`))
	if !errors.Is(err, permission.ErrApprovalRequired) {
		t.Fatalf("an edit that applies: %v; want approval required", err)
	}
}

// Where a person decides, the file is read again after the decision: a
// change made meanwhile is kept, not overwritten with the text read before.
func TestEditRereadsAfterThePersonDecides(t *testing.T) {
	sb, dir := localSB(t)
	f := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(f, []byte("one two"), 0o644); err != nil {
		t.Fatal(err)
	}
	asker := func(context.Context, permission.Request) (bool, error) {
		return true, os.WriteFile(f, []byte("one three"), 0o644) // changed while asking
	}
	ts, err := tool.New(tool.Options{Sandbox: sb, Gate: newGate(t, permission.Config{Mode: permission.Ask, Asker: asker})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Call(bg, "read_file", json.RawMessage(`{"path":"f.txt"}`)); err != nil {
		t.Fatal(err)
	}
	out, err := ts.Call(bg, "edit_file", json.RawMessage(`{"path":"f.txt","old_string":"one","new_string":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(f); string(got) != "1 three" {
		t.Fatalf("after the edit: %q (%+v); want the change made while asking kept", got, out)
	}
}
