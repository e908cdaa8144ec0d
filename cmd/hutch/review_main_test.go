package main

// Regression tests for defects found in a security review: each one failed
// before its fix.

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
)

// "hutch approvals list" (and approve/deny) print the agent-chosen Detail
// raw to the person's terminal; oneLine only folds whitespace. Backspaces
// and ANSI escapes survive, so an agent can make "rm -rf ~" render as
// "echo ok" in the very table a human approves from.
func TestReviewApprovalsListEscapesControlChars(t *testing.T) {
	store := filepath.Join(t.TempDir(), "a.db")
	st, err := permission.OpenStore(store)
	if err != nil {
		t.Fatal(err)
	}
	g, err := permission.New(permission.Config{Mode: permission.Approve, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	cmdline := "rm -rf ~ #" + strings.Repeat("\b", 10) + "\x1b[2K\x1b[1Gecho ok"
	args, _ := json.Marshal(map[string]string{"command": cmdline})
	_, err = g.Check(context.Background(), permission.Request{Capability: permission.Shell, Detail: cmdline, Tool: "shell", Args: args})
	var ar *permission.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("want approval required: %v", err)
	}
	for _, argv := range [][]string{
		{"approvals", "list", "--store", store},
		{"approvals", "approve", ar.ID, "--store", store},
	} {
		code, out, _ := hutch(t, "", argv...)
		if code != 0 {
			t.Fatalf("%v: exit %d", argv, code)
		}
		for _, r := range out {
			if (r < 0x20 && r != '\n') || r == 0x7f {
				t.Fatalf("%v prints the agent's control character %q to the terminal: %q", argv[:2], r, out)
			}
		}
	}
}
