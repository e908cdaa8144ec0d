package tool_test

import (
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
)

// Review 16: commit 94c0150 refuses a path longer than any sandbox takes
// "before the gate, without echoing it", in Toolset.gate. But write_file
// runs checkOverwrite, and edit_file a Stat, before the gate: the
// sandbox's error for the over-long path (local tier: "write <path>: ..."
// and "edit <path>: ...") comes back to the model with the whole path in it, so
// one write_file or edit_file with a 15 MiB path still gets an answer of
// 15 MiB, in every mode that offers them.
func TestReview16LongPathEchoedByWriteTools(t *testing.T) {
	sb, _ := localSB(t)
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	long := strings.Repeat("p", 1<<20)
	for name, args := range map[string]map[string]any{
		"write_file": {"path": long, "content": "x"},
		"edit_file":  {"path": long, "old_string": "a", "new_string": "b"},
	} {
		out := call(t, ts, name, args)
		if !out.IsError || len(out.Text) > 64<<10 {
			t.Errorf("%s with a %d byte path: error %v, answer of %d bytes (%.120q...)", name, len(long), out.IsError, len(out.Text), out.Text)
		}
	}
}
