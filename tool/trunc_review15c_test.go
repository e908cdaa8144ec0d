package tool_test

import (
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/tool"
)

// Review 15c (fixed): the shell tool keeps at most 1 MiB per stream (sandbox.DefaultMaxOutput)
// but Truncate, to keep the last 200 lines and 16000 characters, splits the
// whole stream into a []string (16 bytes per line) and converts it to a
// []rune: 1 MiB of newlines allocates about 18 MiB, per stream, per call.
// With MCP calls running concurrently without bound this is what a flood
// costs the server: 100 concurrent "yes & yes >&2" shell calls took "hutch
// mcp --tier local" to 2.5 GB peak RSS (50 on the isolated tier: 1.05 GB;
// one call: about 20 MB over idle).
func TestReview15cTruncateAllocatesPerLine(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("\n", sandbox.DefaultMaxOutput),
		strings.Repeat("y\n", sandbox.DefaultMaxOutput/2),
		strings.Repeat("é", sandbox.DefaultMaxOutput/2),
	} {
		n := allocDuring(func() { _ = tool.Truncate(in, tool.MaxShellLines, tool.MaxShellChars) })
		if n > 4<<20 {
			t.Errorf("Truncate of %d bytes (%q...) allocated %.1f MiB to return at most %d characters",
				len(in), in[:4], float64(n)/(1<<20), tool.MaxShellChars)
		}
	}
}
