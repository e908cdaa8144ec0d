package mcpserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/mcpserver"
)

// BenchmarkReadFile is one read_file round trip through the SDK's client
// and the in-memory transport: the server's own cost, without stdio or a
// Node client (bench/mcp-read.sh measures that, against the reference).
func BenchmarkReadFile(b *testing.B) {
	st, ct := mcp.NewInMemoryTransports()
	benchReadFile(b, st, ct)
}

// BenchmarkReadFileLineTransport is the same round trip over hutch's
// LineTransport on both ends, through OS pipes as stdio would be.
func BenchmarkReadFileLineTransport(b *testing.B) {
	c2sR, c2sW, _ := os.Pipe()
	s2cR, s2cW, _ := os.Pipe()
	benchReadFile(b, &mcpserver.LineTransport{In: c2sR, Out: s2cW}, &mcpserver.LineTransport{In: s2cR, Out: c2sW})
}

// benchReadFile serves a 4 KiB file on the server transport and times
// read_file calls from a client on the other.
func benchReadFile(b *testing.B, server, client mcp.Transport) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "file.txt"), []byte(strings.Repeat("x", 4096)), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg := mcpserver.OpenForTest(b, config.Settings{Tier: "local", Root: dir})
	srv, err := mcpserver.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ss, err := srv.Connect(bg, server, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(bg, client, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "file.txt"}}
	for b.Loop() {
		res, err := cs.CallTool(bg, params)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}
