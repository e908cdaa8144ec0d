package mcpserver_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/mcpserver"
)

// Review 16: commit 94c0150 ("no call writes an audit line or an answer
// of megabytes") cuts the gate's reasons (describe) and audit lines, but
// the approve-mode answer (approvalText) still quotes the request's
// Detail whole: a shell call with a 2 MiB command gets a 2 MiB answer
// back, and a 15 MiB one (under the stdio message limit) a 15 MiB one.
// The pending request itself keeps only 4096 bytes of that detail.
func TestReview16ApprovalAnswerEchoesWholeCommand(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(t.TempDir(), "approvals.db")
	cs := connect(t, mcpserver.Settings{Tier: "local", Root: dir, Mode: "approve", Store: store}, nil)
	cmd := "true " + strings.Repeat("x", 2<<20)
	res, text := callTool(t, cs, "shell", map[string]any{"command": cmd})
	if !res.IsError || !strings.Contains(text, "approval required") {
		t.Fatalf("want an approval-required result, got %v %.300q", res.IsError, text)
	}
	if len(text) > 64<<10 {
		t.Errorf("approval-required answer for a %d byte command is %d bytes (it quotes the whole command)", len(cmd), len(text))
	}
}
