package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// "policy:" in an mcp --config file is refused on the local tier, as the
// --policy flag is: the server does not start with an unconfined shell
// while the file names a policy.
// Origin: review 5.
func TestMCPConfigPolicyRefusedOnLocalTier(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "strict.yaml"), "read: ["+dir+"]\ndeny: ["+dir+"/secret]\n")
	cfg := writeFile(t, filepath.Join(dir, "c.yaml"), "tier: local\nroot: "+dir+"\nmode: auto\npolicy: "+dir+"/strict.yaml\n")
	code, out := hutchChild(t, dir, "mcp", "--config", cfg)
	if code == 0 {
		t.Errorf("hutch mcp served the local tier and ignored the config's policy file (exit 0, %q); the flag form is refused", out)
	}
}

// "runtime:" in an mcp --config file holds when other container flags
// are given (here --cpus): only a --runtime flag that is given replaces
// it, never the flag's default (docker).
// Origin: review 5.
func TestMCPConfigRuntimeHoldsUnlessFlagGiven(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(dir, "c.yaml"), "tier: container\nimage: hutch-test-busybox\nruntime: apple\nroot: "+dir+"\n")
	code, out := hutchChild(t, dir, "mcp", "--config", cfg) // control: apple is used
	if code != 125 || !strings.Contains(out, "apple") {
		t.Fatalf("control: the config's apple runtime was not used: exit %d %q", code, out)
	}
	code, out = hutchChild(t, dir, "mcp", "--config", cfg, "--cpus", "1")
	if code != 125 || !strings.Contains(out, "apple") {
		t.Errorf("with --cpus 1 the config's runtime apple was replaced by the --runtime default: exit %d %q", code, out)
	}
}

// "hutch mcp --tier isolated --root DIR/missing" exits 125 with an error
// that may name the missing root, never a directory that exists (as a
// check inside the sandbox, where the private /tmp hides DIR, would).
// Origin: review 9.
func TestMCPMissingRootNamesRightPath(t *testing.T) {
	dir := t.TempDir()
	code, out := hutchChild(t, dir, "mcp", "--tier", "isolated", "--root", filepath.Join(dir, "missing"))
	if code != 125 {
		t.Fatalf("exit %d, %q; want 125", code, out)
	}
	// The error may name the missing root, never a directory that exists.
	if _, rest, ok := strings.Cut(out, "lstat "); ok {
		named, _, _ := strings.Cut(rest, ":")
		if _, err := os.Stat(named); err == nil {
			t.Errorf("the error says %s does not exist, which it does: %q", named, strings.TrimSpace(out))
		}
	}
}

// --allow and --mode: unknown names are refused on one line; spelling
// leniency (case, spaces, an empty entry) is accepted and never names more
// than was written. Each accepted case is paired with --mode approve and no
// --store so the command stops at that (later) check instead of serving.
// Origin: review 7.
func TestMCPAllowAndModeFlags(t *testing.T) {
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

// hutch mcp serves the streams it is given: run in process with streams
// of its own (as the tests run it) it answers on them, and leaves the
// process's standard output as it was. Made non-blocking under the test
// binary, a pipe to go test lost the test's own output once full.
func TestMCPServesTheStreamsItIsGiven(t *testing.T) {
	before, err := unix.FcntlInt(1, unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"
	in, send := io.Pipe()
	out := &lockedBuffer{}
	done := make(chan int)
	go func() { done <- execute([]string{"mcp", "--tier", "virtual"}, in, out, io.Discard) }()
	if _, err := send.Write([]byte(init)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), `"id":1`) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	send.Close()
	if code := <-done; code != 0 || !strings.Contains(out.String(), `"serverInfo"`) {
		t.Errorf("hutch mcp on a test's streams: exit %d, stdout %q", code, out.String())
	}
	after, err := unix.FcntlInt(1, unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if before&unix.O_NONBLOCK != after&unix.O_NONBLOCK {
		t.Errorf("standard output's flags went from %#x to %#x", before, after)
	}
}
