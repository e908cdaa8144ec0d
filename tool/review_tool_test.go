package tool_test

// Regression tests for defects found in a security review: each one failed
// before its fix.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
	"github.com/hutchsandbox/hutch/tool"
)

func rvToolset(t *testing.T, opts tool.Options, cfg permission.Config) *tool.Toolset {
	t.Helper()
	g, err := permission.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Gate = g
	ts, err := tool.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// rvCall calls a tool with raw JSON arguments and turns a panic into a test
// failure (the MCP SDK does not recover handler panics: a panic there ends
// the whole server process).
func rvCall(t *testing.T, ts *tool.Toolset, name, raw string) (out tool.Output, err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%s(%s) panicked: %v", name, raw, p)
		}
	}()
	return ts.Call(context.Background(), name, json.RawMessage(raw))
}

// allocDuring reports how many bytes fn allocated.
func allocDuring(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// window() computes start+limit without overflow protection: a huge limit
// wraps to a negative end and lines[start:end] panics. read_file is always
// allowed (read_only mode included), and the SDK does not recover panics,
// so one call from any MCP client kills "hutch mcp".
func TestReviewReadFileHugeLimitPanics(t *testing.T) {
	sb := virtual.New()
	if err := sb.Write(context.Background(), "a.txt", []byte("1\n2\n3\n")); err != nil {
		t.Fatal(err)
	}
	ts := rvToolset(t, tool.Options{Sandbox: sb}, permission.Config{Mode: permission.ReadOnly})
	out, err := rvCall(t, ts, "read_file", `{"path":"a.txt","offset":2,"limit":9223372036854775807}`)
	if err != nil || out.IsError || out.Text != "2\n3\n" {
		t.Fatalf("read_file with a huge limit: %+v %v (want lines 2-3)", out, err)
	}
}

// Approvals (and ask-mode answers) are bound to the canonical JSON of the
// arguments, but the tools decode arguments with encoding/json, which
// matches keys case-insensitively and lets the LAST duplicate win. Two
// argument objects with the same keys in a different order canonicalize to
// the same key yet decode to different calls: the human approves
// "write (notes.txt)" and the agent then writes secret.txt with it.
func TestReviewApprovalForgedByKeyOrder(t *testing.T) {
	store, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	sb := virtual.New()
	ts := rvToolset(t, tool.Options{Sandbox: sb}, permission.Config{Mode: permission.Approve, Store: store})

	shown := `{"Path":"secret.txt","path":"notes.txt","content":"pwned"}`
	_, err = rvCall(t, ts, "write_file", shown)
	var ar *permission.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("want approval required, got %v", err)
	}
	if ar.Request.Detail != "notes.txt" {
		t.Fatalf("the human is shown %q", ar.Request.Detail)
	}
	if _, err := store.Decide(context.Background(), ar.ID, true); err != nil {
		t.Fatal(err)
	}

	swapped := `{"path":"notes.txt","Path":"secret.txt","content":"pwned"}`
	out, err := rvCall(t, ts, "write_file", swapped)
	if _, serr := sb.Stat(context.Background(), "secret.txt"); serr == nil {
		t.Fatalf("an approval shown as write (notes.txt) let the agent write secret.txt: %+v %v", out, err)
	}
}

// The approval key covers capability, tool and arguments, but not the
// sandbox. Two servers sharing one store (the README's configuration uses
// ~/.hutch/approvals.db) share approvals: a request a person approved for
// one root is consumed by an identical call in another root.
func TestReviewApprovalNotBoundToSandbox(t *testing.T) {
	store, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := permission.Config{Mode: permission.Approve, Store: store}
	sbA, sbB := virtual.New(), virtual.New()
	tsA := rvToolset(t, tool.Options{Sandbox: sbA}, cfg)
	tsB := rvToolset(t, tool.Options{Sandbox: sbB}, cfg)
	args := `{"path":"deploy.txt","content":"x"}`

	_, err = rvCall(t, tsA, "write_file", args)
	var ar *permission.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("want approval required, got %v", err)
	}
	if _, err := store.Decide(context.Background(), ar.ID, true); err != nil {
		t.Fatal(err)
	}
	// Sandbox B never asked; its identical call must not use A's approval.
	out, err := rvCall(t, tsB, "write_file", args)
	if err == nil && !out.IsError {
		t.Fatalf("sandbox B used the approval granted for sandbox A's request %s", ar.ID)
	}
}

// edit_file builds the whole replaced text before anything checks its
// size: strings.Replace allocates len(file)+n*(len(new)-len(old)) at once.
// A 16 MiB MCP message can describe a multi-terabyte result, which ends
// the process with a fatal (unrecoverable) out-of-memory error. Here a
// 140 kB file and a 2 kB new_string make hutch allocate ~560 MB only to
// refuse the write as too large.
func TestReviewEditFileUnboundedAllocation(t *testing.T) {
	sb := virtual.New()
	if err := sb.Write(context.Background(), "f.txt", []byte(strings.Repeat("a", 140_000))); err != nil {
		t.Fatal(err)
	}
	ts := rvToolset(t, tool.Options{Sandbox: sb}, permission.Config{Mode: permission.Auto})
	args, _ := json.Marshal(map[string]any{"path": "f.txt", "old_string": "a", "new_string": strings.Repeat("b", 2000), "replace_all": true})
	var out tool.Output
	alloc := allocDuring(func() { out, _ = rvCall(t, ts, "edit_file", string(args)) })
	if !out.IsError {
		t.Fatalf("a 280 MB result was written: %+v", out.Text)
	}
	if alloc > 64<<20 {
		t.Fatalf("edit_file allocated %d MiB to build a result it then refused (%s); check the size before building it", alloc>>20, out.Text)
	}
}

// read_file with a line window splits the WHOLE file into a []string: 16
// bytes of slice header per line. An 8 MiB file of newlines costs ~150 MiB
// to return one line; a 256 MiB one (the Read limit) ~4.5 GiB. read_file is
// allowed in every mode.
func TestReviewReadFileWindowMemory(t *testing.T) {
	sb := virtual.New()
	if err := sb.Write(context.Background(), "lines.txt", []byte(strings.Repeat("\n", 8<<20))); err != nil {
		t.Fatal(err)
	}
	ts := rvToolset(t, tool.Options{Sandbox: sb}, permission.Config{Mode: permission.ReadOnly})
	var out tool.Output
	alloc := allocDuring(func() { out, _ = rvCall(t, ts, "read_file", `{"path":"lines.txt","limit":1}`) })
	if out.IsError {
		t.Fatalf("read_file: %s", out.Text)
	}
	if alloc > 48<<20 {
		t.Fatalf("read_file of one line of an 8 MiB file allocated %d MiB", alloc>>20)
	}
}

// The fetch tool cuts the body at MaxBody BYTES and then calls any body
// that is not valid UTF-8 binary. A text page longer than 200000 bytes
// whose cut falls inside a multi-byte character (any non-ASCII page, most
// of the time) is reported as "[binary content, not shown]".
func TestReviewFetchTruncatedUTF8IsNotBinary(t *testing.T) {
	page := "a" + strings.Repeat("é", 150_000) // the 200000-byte cut splits an é
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(page))
	}))
	defer srv.Close()
	f, err := tool.NewFetcher(tool.FetchPolicy{Allow: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := rvToolset(t, tool.Options{Sandbox: virtual.New(), Fetcher: f}, permission.Config{Mode: permission.Auto})
	raw, _ := json.Marshal(map[string]string{"url": srv.URL + "/"})
	out, err := rvCall(t, ts, "fetch", string(raw))
	if err != nil || out.IsError {
		t.Fatalf("fetch: %+v %v", out, err)
	}
	var res tool.FetchOutput
	if err := json.Unmarshal([]byte(out.Text), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || !strings.HasPrefix(res.Body, "aéé") {
		t.Fatalf("a truncated UTF-8 text page was not shown: truncated=%v body=%.60q", res.Truncated, res.Body)
	}
}

// noShell is a local sandbox on a host without unprivileged user
// namespaces: Supports(shell) is false (local.Check fails), but the files
// are on the real host, where editors, builds and other agents change them.
type noShell struct{ *local.Sandbox }

func (n noShell) Supports(c sandbox.Capability) bool {
	return c != sandbox.CapShell && n.Sandbox.Supports(c)
}

// The read-before-write guard is on only for sandboxes with a shell
// (GuardAuto). Issue 3 asks for it "on real filesystems" (Nexo: skipped on
// virtual only). A local tier on a host where the PID-namespace check
// fails has no shell, so the guard silently turns off and an agent can
// clobber host files it never read.
func TestReviewWriteGuardOffOnLocalWithoutShell(t *testing.T) {
	dir := t.TempDir()
	lsb, err := local.New(dir, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lsb.Close()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := rvToolset(t, tool.Options{Sandbox: noShell{lsb}}, permission.Config{Mode: permission.Auto})
	out, _ := rvCall(t, ts, "write_file", `{"path":"a.txt","content":"clobbered"}`)
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "precious" {
		t.Fatalf("an unread host file was overwritten (guard off on a real filesystem): %+v", out)
	}
}

// read_file returns at most MaxReadBytes (200000) but reads the whole file
// into memory first (up to sandbox.MaxFileSize, 256 MiB), then copies it
// again into a string. Reading a 32 MiB text file to show 200 kB costs
// ~64 MiB; a handful of concurrent calls on a large log or data file in
// the workspace exhaust memory, in read_only mode.
func TestReviewReadFileReadsWholeFile(t *testing.T) {
	dir := t.TempDir()
	lsb, err := local.New(dir, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lsb.Close()
	line := strings.Repeat("x", 99) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "big.log"), []byte(strings.Repeat(line, 32<<20/len(line))), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := rvToolset(t, tool.Options{Sandbox: lsb}, permission.Config{Mode: permission.ReadOnly})
	var out tool.Output
	alloc := allocDuring(func() { out, _ = rvCall(t, ts, "read_file", `{"path":"big.log"}`) })
	if out.IsError || len(out.Text) > tool.MaxReadBytes+200 {
		t.Fatalf("read_file: error=%v len=%d", out.IsError, len(out.Text))
	}
	if alloc > 8<<20 {
		t.Fatalf("read_file allocated %d MiB to return %d bytes", alloc>>20, len(out.Text))
	}
}
