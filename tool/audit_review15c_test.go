package tool_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

// The gate runs, and audits, before the path is checked: a read_file call
// in the default read_only mode with a path of any length (refused after,
// as longer than sandbox.MaxPathLen) writes the whole path into the audit
// log, and the answer echoes it back. Through "hutch mcp --audit", five
// read_file calls with a 15 MiB path (the stdio message limit is 16 MiB)
// appended 78.6 MB to the audit log in 7 s and sent 15.7 MB back each;
// nothing bounds the log, so a client fills the disk at that rate.
func TestReview15cAuditLineHoldsWholePath(t *testing.T) {
	sb, _ := localSB(t)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := permission.OpenAudit(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = audit.Close() })
	ts := toolset(t, sb, permission.Config{Mode: permission.ReadOnly, Audit: audit})
	long := strings.Repeat("p", 1<<20)
	out := call(t, ts, "read_file", map[string]any{"path": long})
	fi, err := os.Stat(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 64<<10 || len(out.Text) > 64<<10 {
		t.Errorf("one read_file with a %d byte path (over the %d byte limit): audit line of %d bytes, answer of %d bytes",
			len(long), sandbox.MaxPathLen, fi.Size(), len(out.Text))
	}
}
