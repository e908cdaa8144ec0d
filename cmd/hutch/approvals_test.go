package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
)

// approveModeStore makes an approval store in dir and returns its path,
// the store, and ask, which has an approve-mode gate on it file a pending
// shell request and returns its id.
func approveModeStore(t *testing.T, dir string) (string, *permission.Store, func(detail string) string) {
	t.Helper()
	store := filepath.Join(dir, "a.db")
	st, err := permission.OpenStore(store)
	if err != nil {
		t.Fatal(err)
	}
	g, err := permission.New(permission.Config{Mode: permission.Approve, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return store, st, func(detail string) string {
		_, err := g.Check(context.Background(), permission.Request{Capability: permission.Shell, Detail: detail, Tool: "shell", Args: json.RawMessage(`{"command":"` + detail + `"}`)})
		var ar *permission.ApprovalRequiredError
		if !errors.As(err, &ar) {
			t.Fatalf("want approval required: %v", err)
		}
		return ar.ID
	}
}

func TestApprovalsCLI(t *testing.T) {
	store, _, ask := approveModeStore(t, t.TempDir())
	id1, id2 := ask("make deploy"), ask("rm -rf build")

	code, out, _ := hutch(t, "", "approvals", "list", "--store", store, "--json")
	var items []map[string]any
	if err := json.Unmarshal([]byte(out), &items); err != nil || code != 0 || len(items) != 2 {
		t.Fatalf("list --json: %d %q %v", code, out, err)
	}
	for _, k := range []string{"id", "capability", "detail", "tool", "arguments", "created_at"} {
		if _, ok := items[0][k]; !ok {
			t.Errorf("list --json lacks %q: %v", k, items[0])
		}
	}
	if items[0]["id"] != id1 || items[0]["detail"] != "make deploy" || items[0]["arguments"].(map[string]any)["command"] != "make deploy" {
		t.Errorf("first item %v", items[0])
	}

	code, out, _ = hutch(t, "", "approvals", "approve", id1, "--store", store)
	if code != 0 || !strings.Contains(out, "approved "+id1) {
		t.Errorf("approve: %d %q", code, out)
	}
	code, out, _ = hutch(t, "", "approvals", "deny", id2, "--store", store)
	if code != 0 || !strings.Contains(out, "denied "+id2) {
		t.Errorf("deny: %d %q", code, out)
	}
	code, out, _ = hutch(t, "", "approvals", "list", "--store", store)
	if code != 0 || !strings.Contains(out, "no pending requests") {
		t.Errorf("list after deciding: %d %q", code, out)
	}
	code, out, _ = hutch(t, "", "approvals", "list", "--store", store, "--all")
	if code != 0 || !strings.Contains(out, id1) || !strings.Contains(out, "approved") || !strings.Contains(out, "denied") {
		t.Errorf("list --all: %q", out)
	}
	code, _, errOut := hutch(t, "", "approvals", "approve", id1, "--store", store)
	if code != 125 || !strings.Contains(errOut, "already decided") {
		t.Errorf("approving twice: %d %q", code, errOut)
	}
	code, _, errOut = hutch(t, "", "approvals", "approve", "nope", "--store", store)
	if code != 125 || !strings.Contains(errOut, "no such approval request") {
		t.Errorf("unknown id: %d %q", code, errOut)
	}
	code, _, errOut = hutch(t, "", "approvals", "list")
	if code != 125 || !strings.Contains(errOut, "store") {
		t.Errorf("missing --store: %d %q", code, errOut)
	}
	missing := filepath.Join(t.TempDir(), "typo.db")
	code, _, errOut = hutch(t, "", "approvals", "list", "--store", missing)
	if _, err := os.Stat(missing); code != 125 || !strings.Contains(errOut, "typo.db") || err == nil {
		t.Errorf("a mistyped store must be an error and not be created: %d %q %v", code, errOut, err)
	}
}

// approve and deny with --audit write the person's decision to the log;
// a log that cannot be used stops the decision before it is made.
func TestApprovalsAudit(t *testing.T) {
	dir := t.TempDir()
	store, st, ask := approveModeStore(t, dir)
	id1, id2, id3 := ask("make deploy"), ask("rm -rf build"), ask("curl x")

	shared := filepath.Join(dir, "shared.jsonl")
	if err := os.WriteFile(shared, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := hutch(t, "", "approvals", "approve", id3, "--store", store, "--audit", shared)
	if a, err := st.Get(context.Background(), id3); code != 125 || !strings.Contains(errOut, "chmod 600") || err != nil || a.Status != permission.StatusPending {
		t.Errorf("approving with a shared audit log: exit %d, %q; request %+v %v (want 125, the fix named, still pending)", code, errOut, a, err)
	}

	audit := filepath.Join(dir, "audit.jsonl")
	if code, out, errOut := hutch(t, "", "approvals", "approve", id1, "--store", store, "--audit", audit); code != 0 || !strings.Contains(out, "approved "+id1) {
		t.Fatalf("approve: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := hutch(t, "", "approvals", "deny", id2, "--store", store, "--audit", audit); code != 0 || !strings.Contains(out, "denied "+id2) {
		t.Fatalf("deny: %d %q %q", code, out, errOut)
	}
	data, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	want := []struct{ id, outcome, detail string }{{id1, "approved", "make deploy"}, {id2, "denied", "rm -rf build"}}
	if len(lines) != len(want) {
		t.Fatalf("audit log has %d lines, want %d: %q", len(lines), len(want), data)
	}
	for i, w := range want {
		var e permission.AuditEntry
		if err := json.Unmarshal([]byte(lines[i]), &e); err != nil {
			t.Fatal(err)
		}
		if e.ApprovalID != w.id || e.Outcome != w.outcome || e.By != "person" || e.Detail != w.detail ||
			e.DecidedBy != permission.CurrentUser() || e.Mode != permission.Approve {
			t.Errorf("entry %d = %+v, want %s %s by %s", i, e, w.id, w.outcome, permission.CurrentUser())
		}
	}
}

func TestMCPBadSettings(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hutch.yaml")
	if err := os.WriteFile(cfg, []byte("tier: local\nmodee: auto\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "--mode", "yolo"}, "unknown permission mode"},
		{[]string{"mcp", "--mode", "approve"}, "--store"},
		{[]string{"mcp", "--decision-ttl", "1h"}, "applies to an approval store"},
		{[]string{"mcp", "--mode", "approve", "--store", filepath.Join(dir, "a.db"), "--decision-ttl", "soon"}, "not a duration"},
		{[]string{"mcp", "--mode", "approve", "--store", filepath.Join(dir, "a.db"), "--decision-ttl", "-1h"}, "is negative"},
		{[]string{"mcp", "--allow", "teleport"}, "unknown capability"},
		{[]string{"mcp", "--config", cfg}, "modee"},
		{[]string{"mcp", "--config", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"mcp", "--tier", "local", "--root", dir, "--memory", "1G"}, "apply to --tier isolated"},
		{[]string{"mcp", "--tier", "isolated", "--memory", "lots"}, "--memory"},
		{[]string{"mcp", "--tier", "container"}, "needs an image"},
		{[]string{"mcp", "--tier", "remote"}, "not built yet"},
		{[]string{"mcp", "--tier", "local", "--root", dir, "--image", "x"}, "apply to --tier container"},
	} {
		code, _, errOut := hutch(t, "", c.args...)
		if code != 125 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q (want 125 and %q on one line)", c.args, code, errOut, c.want)
		}
	}
}
