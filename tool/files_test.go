package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
	"github.com/hutchsandbox/hutch/tool"
)

func TestReadFile(t *testing.T) {
	sb, dir := localSB(t)
	ts := toolset(t, sb, permission.Config{})
	must(t, os.WriteFile(filepath.Join(dir, "lines.txt"), []byte("one\ntwo\nthree\nfour\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "bin.dat"), []byte("\x00\x01\x02 binary"), 0o644))
	must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	// 3-byte characters so that the 200000-byte cap falls inside one.
	big := strings.Repeat("€", 70_000) // 210000 bytes
	must(t, os.WriteFile(filepath.Join(dir, "big.txt"), []byte(big), 0o644))

	if out := call(t, ts, "read_file", map[string]any{"path": "lines.txt"}); out.IsError || out.Text != "one\ntwo\nthree\nfour\n" {
		t.Errorf("whole file: %+v", out)
	}
	out := call(t, ts, "read_file", map[string]any{"path": "lines.txt", "offset": 2, "limit": 2})
	if !strings.HasPrefix(out.Text, "two\nthree\n") || !strings.Contains(out.Text, "lines 2-3 of 4") {
		t.Errorf("window: %q", out.Text)
	}
	if out := call(t, ts, "read_file", map[string]any{"path": "lines.txt", "offset": 4}); out.Text != "four\n" {
		t.Errorf("last line: %q", out.Text)
	}
	if out := call(t, ts, "read_file", map[string]any{"path": "lines.txt", "offset": 9}); !strings.Contains(out.Text, "past the end") {
		t.Errorf("offset past the end: %q", out.Text)
	}
	out = call(t, ts, "read_file", map[string]any{"path": "big.txt"})
	text, marker, _ := strings.Cut(out.Text, "\n[truncated")
	if len(text) > tool.MaxReadBytes || len(text) < tool.MaxReadBytes-3 || !strings.Contains(marker, "of 210000 bytes") {
		t.Errorf("cap: kept %d bytes, marker %q", len(text), marker)
	}
	if !utf8Valid(text) {
		t.Error("the cap cut a character")
	}
	out = call(t, ts, "read_file", map[string]any{"path": "bin.dat"})
	if out.IsError || !strings.Contains(out.Text, "binary file") || strings.Contains(out.Text, "\x01") {
		t.Errorf("binary: %+v", out)
	}
	wantErrText(t, call(t, ts, "read_file", map[string]any{"path": "missing.txt"}), "no such file")
	wantErrText(t, call(t, ts, "read_file", map[string]any{"path": "../etc/passwd"}), "escapes the sandbox root")
	wantErrText(t, call(t, ts, "read_file", map[string]any{"path": "sub"}), "is a directory")
	wantErrText(t, call(t, ts, "read_file", map[string]any{"path": "lines.txt", "bogus": 1}), "unknown field")
	wantErrText(t, call(t, ts, "read_file", map[string]any{}), "needs a path")
	wantErrText(t, call(t, ts, "read_file", map[string]any{"path": "lines.txt", "limit": -1}), "negative")
	if out, err := ts.Call(bg, "read_file", json.RawMessage(`{"path": "lines.txt"} {}`)); err != nil || !out.IsError {
		t.Errorf("trailing JSON: %+v %v", out, err)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// read_file's line window cannot overflow: a huge limit answers with
// the lines there are, never a panic (read_file is allowed in every mode,
// read_only included, and the SDK does not recover panics, so one call
// from any MCP client would end "hutch mcp").
// Origin: security review.
func TestReadFileHugeLimitDoesNotPanic(t *testing.T) {
	sb := virtual.New(virtual.Options{})
	if err := sb.Write(context.Background(), "a.txt", []byte("1\n2\n3\n")); err != nil {
		t.Fatal(err)
	}
	ts := toolsetWith(t, tool.Options{Sandbox: sb}, permission.Config{Mode: permission.ReadOnly})
	out, err := callRaw(t, ts, "read_file", `{"path":"a.txt","offset":2,"limit":9223372036854775807}`)
	if err != nil || out.IsError || out.Text != "2\n3\n" {
		t.Fatalf("read_file with a huge limit: %+v %v (want lines 2-3)", out, err)
	}
}

// read_file returns at most MaxReadBytes, and reads little more than it
// returns: showing 200 kB of a 32 MiB text file allocates a few MiB, not
// the whole file (twice), so concurrent calls on a large log or data file
// in the workspace, in read_only mode, cannot exhaust memory.
// Origin: security review.
func TestReadFileOfBigFileAllocatesLittle(t *testing.T) {
	dir := t.TempDir()
	lsb, err := local.New(context.Background(), local.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer lsb.Close()
	line := strings.Repeat("x", 99) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "big.log"), []byte(strings.Repeat(line, 32<<20/len(line))), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := toolsetWith(t, tool.Options{Sandbox: lsb}, permission.Config{Mode: permission.ReadOnly})
	var out tool.Output
	alloc := allocDuring(func() { out, _ = callRaw(t, ts, "read_file", `{"path":"big.log"}`) })
	if out.IsError || len(out.Text) > tool.MaxReadBytes+200 {
		t.Fatalf("read_file: error=%v len=%d", out.IsError, len(out.Text))
	}
	if alloc > 8<<20 {
		t.Fatalf("read_file allocated %d MiB to return %d bytes", alloc>>20, len(out.Text))
	}
}

// read_file with a line window does not split the whole file into a
// []string (16 bytes of slice header per line): one line of an 8 MiB file
// of newlines costs a few MiB, not ~150 MiB. read_file is allowed in
// every mode.
// Origin: security review.
func TestReadFileWindowOfManyLinesAllocatesLittle(t *testing.T) {
	sb := virtual.New(virtual.Options{})
	if err := sb.Write(context.Background(), "lines.txt", []byte(strings.Repeat("\n", 8<<20))); err != nil {
		t.Fatal(err)
	}
	ts := toolsetWith(t, tool.Options{Sandbox: sb}, permission.Config{Mode: permission.ReadOnly})
	var out tool.Output
	alloc := allocDuring(func() { out, _ = callRaw(t, ts, "read_file", `{"path":"lines.txt","limit":1}`) })
	if out.IsError {
		t.Fatalf("read_file: %s", out.Text)
	}
	if alloc > 48<<20 {
		t.Fatalf("read_file of one line of an 8 MiB file allocated %d MiB", alloc>>20)
	}
}

// read_file with a line window (offset > 1 or a limit) streams the file
// instead of reading it whole into memory (up to sandbox.MaxFileSize,
// 256 MiB) to answer with at most MaxReadBytes, on the local and the
// virtual tier: read_file needs only the read capability (the default
// read_only mode) and MCP calls run concurrently without bound, so a
// whole-file read per call would let a client run hutch out of memory
// (through "hutch mcp", 8 concurrent {"limit":1} reads of a 100 MB file
// once took 807 MB), and on the virtual tier break its promise that "an
// agent cannot run hutch out of memory".
// Origin: review 15c.
func TestReadFileWindowOfBigFileAllocatesLittle(t *testing.T) {
	const size = 64 << 20
	line := strings.Repeat("a", 1023) + "\n"
	content := []byte(strings.Repeat(line, size/len(line)))

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	lsb, err := local.New(context.Background(), local.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lsb.Close() })
	vsb := virtual.New(virtual.Options{})
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

func TestWriteGuard(t *testing.T) {
	sb, dir := localSB(t)
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	host := func(p string) string { return filepath.Join(dir, p) }
	must(t, os.WriteFile(host("a.txt"), []byte("original"), 0o644))

	// New files write freely.
	out := call(t, ts, "write_file", map[string]any{"path": "new/b.txt", "content": "fresh"})
	wantOK(t, out)
	if b, _ := os.ReadFile(host("new/b.txt")); string(b) != "fresh" {
		t.Fatalf("new file holds %q", b)
	}
	// ...and the session may rewrite what it wrote itself.
	wantOK(t, call(t, ts, "write_file", map[string]any{"path": "new/b.txt", "content": "again"}))

	// An existing file never read is refused.
	wantErrText(t, call(t, ts, "write_file", map[string]any{"path": "a.txt", "content": "clobber"}), "read a.txt before overwriting it")
	// Reading it as ./a.txt covers a.txt (Nexo keyed on the raw string).
	wantOK(t, call(t, ts, "read_file", map[string]any{"path": "./a.txt"}))
	wantOK(t, call(t, ts, "write_file", map[string]any{"path": "a.txt", "content": "mine"}))
	if b, _ := os.ReadFile(host("a.txt")); string(b) != "mine" {
		t.Fatalf("a.txt holds %q", b)
	}

	// Changed underneath since the read: refused as stale, by size...
	wantOK(t, call(t, ts, "read_file", map[string]any{"path": "a.txt"}))
	must(t, os.WriteFile(host("a.txt"), []byte("someone else"), 0o644))
	wantErrText(t, call(t, ts, "write_file", map[string]any{"path": "a.txt", "content": "x"}), "stale: a.txt changed since you read it")
	// ...and by mtime alone (same size).
	wantOK(t, call(t, ts, "read_file", map[string]any{"path": "a.txt"}))
	must(t, os.WriteFile(host("a.txt"), []byte("SOMEONE ELSE"), 0o644))
	must(t, os.Chtimes(host("a.txt"), time.Now(), time.Now().Add(time.Hour)))
	wantErrText(t, call(t, ts, "write_file", map[string]any{"path": "a.txt", "content": "x"}), "stale")
	if b, _ := os.ReadFile(host("a.txt")); string(b) != "SOMEONE ELSE" {
		t.Fatalf("refused write changed the file: %q", b)
	}
	// The guard applies to edit_file too.
	must(t, os.WriteFile(host("c.txt"), []byte("x"), 0o644))
	wantErrText(t, call(t, ts, "edit_file", map[string]any{"path": "c.txt", "old_string": "x", "new_string": "y"}), "read c.txt before overwriting it")

	wantErrText(t, call(t, ts, "write_file", map[string]any{"path": "../out.txt", "content": "x"}), "escapes")
	wantErrText(t, call(t, ts, "write_file", map[string]any{"path": "new", "content": "x"}), "is a directory")
	wantErrText(t, call(t, ts, "write_file", map[string]any{"path": "d.txt"}), "needs a path and content")
	// Empty content is content.
	wantOK(t, call(t, ts, "write_file", map[string]any{"path": "empty.txt", "content": ""}))

	// The virtual tier has no guard: nothing else can change its files.
	vts := toolset(t, virtual.New(virtual.Options{}), permission.Config{Mode: permission.Auto})
	wantOK(t, call(t, vts, "write_file", map[string]any{"path": "v.txt", "content": "1"}))
	other := toolset(t, vts.Sandbox(), permission.Config{Mode: permission.Auto}) // another session, same sandbox
	wantOK(t, call(t, other, "write_file", map[string]any{"path": "v.txt", "content": "2"}))
}

// noShell is a local sandbox on a host without unprivileged user
// namespaces: Supports(shell) is false (local.Check fails), but the files
// are on the real host, where editors, builds and other agents change them.
type noShell struct{ *local.Sandbox }

func (n noShell) Supports(c sandbox.Feature) bool {
	return c != sandbox.FeatureShell && n.Sandbox.Supports(c)
}

// The read-before-write guard is on for every real filesystem (GuardAuto),
// not only for sandboxes with a shell: a local tier on a host where the
// PID-namespace check fails has no shell, and an agent still cannot
// clobber a host file it never read (issue 3: "on real filesystems").
// Origin: security review.
func TestWriteGuardOnLocalWithoutShell(t *testing.T) {
	dir := t.TempDir()
	lsb, err := local.New(context.Background(), local.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer lsb.Close()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := toolsetWith(t, tool.Options{Sandbox: noShell{lsb}}, permission.Config{Mode: permission.Auto})
	out, _ := callRaw(t, ts, "write_file", `{"path":"a.txt","content":"clobbered"}`)
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "precious" {
		t.Fatalf("an unread host file was overwritten (guard off on a real filesystem): %+v", out)
	}
}

func TestEditFile(t *testing.T) {
	sb, dir := localSB(t)
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	must(t, os.WriteFile(filepath.Join(dir, "e.go"), []byte("a := 1\nb := 1\nc := 2\n"), 0o644))
	read := func() { wantOK(t, call(t, ts, "read_file", map[string]any{"path": "e.go"})) }
	read()
	wantErrText(t, call(t, ts, "edit_file", map[string]any{"path": "e.go", "old_string": "d := 3", "new_string": "x"}), "old_string not found in e.go")
	wantErrText(t, call(t, ts, "edit_file", map[string]any{"path": "e.go", "old_string": ":= 1", "new_string": ":= 9"}), "appears 2 times")
	wantErrText(t, call(t, ts, "edit_file", map[string]any{"path": "e.go", "old_string": "", "new_string": "x"}), "old_string is empty")
	wantErrText(t, call(t, ts, "edit_file", map[string]any{"path": "e.go", "old_string": "c", "new_string": "c"}), "the same")
	wantErrText(t, call(t, ts, "edit_file", map[string]any{"path": "nope.go", "old_string": "a", "new_string": "b"}), "no such file")

	out := call(t, ts, "edit_file", map[string]any{"path": "e.go", "old_string": "c := 2", "new_string": "c := 3"})
	wantOK(t, out)
	if d, _ := out.Data.(tool.EditResult); d.Replacements != 1 {
		t.Errorf("data %+v", out.Data)
	}
	// Its own edit does not make the file stale for the next edit.
	out = call(t, ts, "edit_file", map[string]any{"path": "e.go", "old_string": ":= 1", "new_string": ":= 7", "replace_all": true})
	wantOK(t, out)
	if b, _ := os.ReadFile(filepath.Join(dir, "e.go")); string(b) != "a := 7\nb := 7\nc := 3\n" {
		t.Errorf("after edits: %q", b)
	}
}

// edit_file checks the size of the replaced text before building it
// (strings.Replace would allocate len(file)+n*(len(new)-len(old)) at
// once, and a 16 MiB MCP message can describe a multi-terabyte result):
// a 140 kB file and a 2 kB new_string, replaced everywhere, are refused
// as too large without allocating the 280 MB result.
// Origin: security review.
func TestEditFileChecksSizeBeforeBuilding(t *testing.T) {
	sb := virtual.New(virtual.Options{})
	if err := sb.Write(context.Background(), "f.txt", []byte(strings.Repeat("a", 140_000))); err != nil {
		t.Fatal(err)
	}
	ts := toolsetWith(t, tool.Options{Sandbox: sb}, permission.Config{Mode: permission.Auto})
	args, _ := json.Marshal(map[string]any{"path": "f.txt", "old_string": "a", "new_string": strings.Repeat("b", 2000), "replace_all": true})
	var out tool.Output
	alloc := allocDuring(func() { out, _ = callRaw(t, ts, "edit_file", string(args)) })
	if !out.IsError {
		t.Fatalf("a 280 MB result was written: %+v", out.Text)
	}
	if alloc > 64<<20 {
		t.Fatalf("edit_file allocated %d MiB to build a result it then refused (%s); check the size before building it", alloc>>20, out.Text)
	}
}

func TestGlobTool(t *testing.T) {
	sb, dir := localSB(t)
	ts := toolset(t, sb, permission.Config{})
	must(t, os.MkdirAll(filepath.Join(dir, "src/x"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "src/x/a.go"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "b.go"), nil, 0o644))
	out := call(t, ts, "glob", map[string]any{"pattern": "**/*.go"})
	var got struct{ Files []string }
	must(t, json.Unmarshal([]byte(out.Text), &got))
	if !slices.Equal(got.Files, []string{"b.go", "src/x/a.go"}) {
		t.Errorf("glob: %s", out.Text)
	}
	out = call(t, ts, "glob", map[string]any{"pattern": "*.none"})
	if out.IsError || out.Text != `{"files":[]}` {
		t.Errorf("no match must be an empty list: %s", out.Text)
	}
	wantErrText(t, call(t, ts, "glob", map[string]any{"pattern": "../*"}), "escapes")
	wantErrText(t, call(t, ts, "glob", map[string]any{"pattern": "["}), "invalid")
}

// A glob answer lists at most MaxGlobBytes of names, then says how many
// more matched, so one answer stays within an MCP client's line limit
// (90000 names in one message ended the session).
// Origin: review 15c.
func TestGlobAnswerIsBounded(t *testing.T) {
	sb := virtual.New(virtual.Options{})
	const n = 3000
	name := strings.Repeat("x", 60)
	for i := range n {
		if err := sb.Write(bg, fmt.Sprintf("d/%s%04d", name, i), nil); err != nil {
			t.Fatal(err)
		}
	}
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	out := call(t, ts, "glob", map[string]any{"pattern": "d/*"})
	var got struct {
		Files []string `json:"files"`
		More  int      `json:"more"`
		Note  string   `json:"note"`
	}
	if err := json.Unmarshal([]byte(out.Text), &got); err != nil {
		t.Fatalf("%v: %.200s", err, out.Text)
	}
	if len(out.Text) > tool.MaxGlobBytes+1000 || len(got.Files)+got.More != n || got.More == 0 || !strings.Contains(got.Note, "narrow the pattern") {
		t.Errorf("answer of %d bytes: %d files, %d more, note %q; want at most about %d bytes, %d in all", len(out.Text), len(got.Files), got.More, got.Note, tool.MaxGlobBytes, n)
	}
	if out := call(t, ts, "glob", map[string]any{"pattern": "d/*0001"}); !strings.Contains(out.Text, "0001") || strings.Contains(out.Text, "more") {
		t.Errorf("a small answer: %s", out.Text)
	}
}
