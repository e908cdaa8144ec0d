package tool_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
	"github.com/hutchsandbox/hutch/tool"
)

// read_file with a line window (offset > 1 or a limit) reads the whole
// file into memory, up to sandbox.MaxFileSize (256 MiB), to answer with at
// most MaxReadBytes. read_file needs only the read capability (the default
// read_only mode) and MCP calls run concurrently without bound, so every
// concurrent call costs the file's size: through "hutch mcp" a 100 MB file
// read with {"limit":1} took the server to 113 MB, 410 MB and 807 MB peak
// RSS at 1, 4 and 8 concurrent calls. On the virtual tier this also breaks
// its promise that "an agent cannot run hutch out of memory": the files
// stay under 512 MiB, each read of them does not.
func TestReview15cReadFileWindowReadsWholeFile(t *testing.T) {
	const size = 64 << 20
	line := strings.Repeat("a", 1023) + "\n"
	content := []byte(strings.Repeat(line, size/len(line)))

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	lsb, err := local.New(dir, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lsb.Close() })
	vsb := virtual.New()
	t.Cleanup(func() { _ = vsb.Close() })
	if err := vsb.Write(bg, "big.txt", content); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sb   sandbox.Sandbox
	}{{"local", lsb}, {"virtual", vsb}} {
		ts := toolset(t, tc.sb, permission.Config{Mode: permission.ReadOnly})
		for _, args := range []map[string]any{{"path": "big.txt", "limit": 1}, {"path": "big.txt", "offset": 2, "limit": 1}} {
			var out tool.Output
			n := allocDuring(func() { out = call(t, ts, "read_file", args) })
			if len(out.Text) > tool.MaxReadBytes+200 {
				t.Fatalf("answer of %d bytes", len(out.Text))
			}
			if n > 8<<20 {
				t.Errorf("%s: read_file %v of a %d MiB file allocated %d MiB for a %d byte answer",
					tc.name, args, size>>20, n>>20, len(out.Text))
			}
		}
	}
}
