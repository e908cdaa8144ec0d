package mcpserver_test

// Regression tests for defects found in a security review: each one failed
// before its fix.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/mcpserver"
)

const reviewChildEnv = "HUTCH_REVIEW_MCP_ROOT"

// TestReviewMCPChild is not a test: it is the server process that
// TestReviewReadFileCrashesServer starts (the test binary re-executed).
func TestReviewMCPChild(t *testing.T) {
	root := os.Getenv(reviewChildEnv)
	if root == "" {
		t.Skip("helper process only")
	}
	cfg, closeAll, err := mcpserver.Open(context.Background(), mcpserver.Settings{Tier: "local", Root: root})
	if err != nil {
		os.Exit(3)
	}
	defer closeAll()
	srv, err := mcpserver.New(cfg)
	if err != nil {
		os.Exit(3)
	}
	_ = srv.Run(context.Background(), &mcpserver.LineTransport{In: os.Stdin, Out: os.Stdout})
	os.Exit(0)
}

// One read_file call in the default read_only mode, with an offset and a
// huge limit, panics in tool.window (start+limit overflows) and the SDK
// does not recover handler panics: the whole "hutch mcp" process dies.
func TestReviewReadFileCrashesServer(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("1\n2\n3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestReviewMCPChild$")
	cmd.Env = append(os.Environ(), reviewChildEnv+"="+root)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(outPipe)
	send := func(s string) { _, _ = io.WriteString(in, s+"\n") }

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if _, err := out.ReadBytes('\n'); err != nil {
		t.Fatalf("initialize: %v (stderr %s)", err, stderr.String())
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a.txt","offset":2,"limit":9223372036854775807}}}`)
	line, err := out.ReadBytes('\n')
	in.Close()
	_ = cmd.Wait()
	if err != nil {
		msg := stderr.String()
		if i := strings.Index(msg, "panic:"); i >= 0 {
			msg = msg[i:min(len(msg), i+300)]
		}
		t.Fatalf("the server died on one read_file call: %v\n%s", err, msg)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil || m["id"] != float64(2) {
		t.Fatalf("unexpected answer %s", line)
	}
}

// "hutch mcp --tier local" without --root silently roots the sandbox at the
// process's working directory, which MCP clients choose (Claude Desktop
// starts servers in "/"). The file tools are then "guarded" to the whole
// filesystem. The local tier should need an explicit root (or at least
// refuse "/").
func TestReviewLocalTierDefaultRootIsCwd(t *testing.T) {
	t.Chdir("/")
	cfg, closeAll, err := mcpserver.Open(context.Background(), mcpserver.Settings{Tier: "local", Mode: "read_only"})
	if err == nil {
		defer closeAll()
		t.Fatalf("local tier opened without --root; its root is %q", cfg.Tools.Sandbox.Root())
	}
}
