package mcpserver_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Review 15c (fixed: the glob tool lists at most tool.MaxGlobBytes of
// names): a glob answer was bounded by a count (sandbox.MaxGlobResults, 100000
// matches of up to 4096 bytes each), not by bytes, and the MCP result
// carries it twice (text and structuredContent). 90000 files of ~100
// byte names (a node_modules-sized tree, under the count) make one answer
// line over 16 MiB: the SDK's stdio client (mcp.DefaultMaxLineLength, the
// same bound hutch's LineTransport sets on what it reads) drops the frame
// and closes the session, so every later call fails too. With paths
// near 4096 bytes, 10000 matches took "hutch mcp" to 882 MB peak RSS for
// one call (10 times that is allowed).
func TestReview15cBigGlobAnswerKillsSession(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "n")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("y", 80)
	for i := range 90000 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("file_%06d_%s.js", i, pad)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in, out, _ := serveLines(t, root)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(bg, &mcp.IOTransport{Reader: io.NopCloser(out), Writer: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	_, gerr := cs.CallTool(bg, &mcp.CallToolParams{Name: "glob", Arguments: map[string]any{"pattern": "**/*.js"}})
	_, rerr := cs.CallTool(bg, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a.txt"}})
	if gerr != nil || rerr != nil {
		t.Errorf("a glob of 90000 short paths (under MaxGlobResults) broke the session:\nglob: %v\nnext read_file: %v", gerr, rerr)
	}
}
