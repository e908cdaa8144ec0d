package main

// Review 7: the permission flags and the approvals commands. A test that
// fails on the current code demonstrates a defect and says what the right
// behaviour is; a passing one pins a behaviour checked and found correct.

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

// --allow and --mode: unknown names are refused on one line; spelling
// leniency (case, spaces, an empty entry) is accepted and never names more
// than was written. Each accepted case is paired with --mode approve and no
// --store so the command stops at that (later) check instead of serving.
func TestReview7AllowAndModeFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "--allow", "write,,teleport"}, `unknown capability "teleport"`},
		{[]string{"mcp", "--allow", "write;shell"}, "unknown capability"},
		{[]string{"mcp", "--allow", "*"}, "unknown capability"},
		{[]string{"mcp", "--allow", "write", "--allow", "all"}, `unknown capability "all"`},
		{[]string{"mcp", "--mode", "readonly"}, "unknown permission mode"},
		// Accepted spellings: the command gets as far as the store check.
		{[]string{"mcp", "--allow", "WRITE, shell", "--mode", "approve"}, "--store"},
		{[]string{"mcp", "--allow", "write,,shell", "--mode", "approve"}, "--store"},
		{[]string{"mcp", "--mode", " Approve "}, "--store"},
	} {
		code, _, errOut := hutch(t, "", c.args...)
		if code != 125 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%q: exit %d, stderr %q (want 125 and %q on one line)", c.args, code, errOut, c.want)
		}
	}
}

// The approvals commands on a broken or wrong store: a one-line error
// naming the file, never a new empty store and never a panic; text the
// agent chose is escaped in the listing.
func TestReview7ApprovalsCommandsOnBadStores(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte(strings.Repeat("not bolt ", 2000)), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"approvals", "list", "--store", garbage}, "garbage.db"},
		{[]string{"approvals", "approve", "abc", "--store", garbage}, "garbage.db"},
		{[]string{"approvals", "deny", "abc", "--store", dir}, dir},
		{[]string{"approvals", "approve", "--store", garbage}, "accepts 1 arg"},
	} {
		code, _, errOut := hutch(t, "", c.args...)
		if code != 125 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%q: exit %d, stderr %q (want 125 and %q on one line)", c.args, code, errOut, c.want)
		}
	}

	store := filepath.Join(dir, "a.db")
	st, err := permission.OpenStore(store)
	if err != nil {
		t.Fatal(err)
	}
	g, err := permission.New(permission.Config{Mode: permission.Approve, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	evil := "ls\r\x1b[2Kecho harmless\n"
	_, err = g.Check(context.Background(), permission.Request{Capability: permission.Shell, Tool: "shell\x1b[8m", Detail: evil, Args: json.RawMessage(`{}`)})
	var ar *permission.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatal(err)
	}
	code, out, _ := hutch(t, "", "approvals", "list", "--store", store)
	if code != 0 || strings.ContainsAny(out, "\r\x1b") || !strings.Contains(out, ar.ID) {
		t.Errorf("list shows raw control characters: %q", out)
	}
	code, out, _ = hutch(t, "", "approvals", "approve", ar.ID, "--store", store)
	if code != 0 || strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("approve shows raw control characters: %q", out)
	}
}
