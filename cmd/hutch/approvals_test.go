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

func TestApprovalsCLI(t *testing.T) {
	store := filepath.Join(t.TempDir(), "a.db")
	st, err := permission.OpenStore(store)
	if err != nil {
		t.Fatal(err)
	}
	g, err := permission.New(permission.Config{Mode: permission.Approve, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(detail string) string {
		_, err := g.Check(context.Background(), permission.Request{Capability: permission.Shell, Detail: detail, Tool: "shell", Args: json.RawMessage(`{"command":"` + detail + `"}`)})
		var ar *permission.ApprovalRequiredError
		if !errors.As(err, &ar) {
			t.Fatalf("want approval required: %v", err)
		}
		return ar.ID
	}
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
