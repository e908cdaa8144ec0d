package tool_test

import (
	"context"
	"encoding/json"
	"errors"
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

var bg = context.Background()

func newGate(t *testing.T, cfg permission.Config) *permission.Gate {
	t.Helper()
	g, err := permission.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func localSB(t *testing.T) (*local.Sandbox, string) {
	t.Helper()
	dir := t.TempDir()
	sb, err := local.New(dir, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb, dir
}

func toolset(t *testing.T, sb sandbox.Sandbox, cfg permission.Config) *tool.Toolset {
	t.Helper()
	ts, err := tool.New(tool.Options{Sandbox: sb, Gate: newGate(t, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func call(t *testing.T, ts *tool.Toolset, name string, args any) tool.Output {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ts.Call(bg, name, raw)
	if err != nil {
		t.Fatalf("%s(%s): %v", name, raw, err)
	}
	return out
}

func wantOK(t *testing.T, out tool.Output) {
	t.Helper()
	if out.IsError {
		t.Fatalf("unexpected error result: %s", out.Text)
	}
}

func wantErrText(t *testing.T, out tool.Output, sub string) {
	t.Helper()
	if !out.IsError || !strings.Contains(out.Text, sub) {
		t.Fatalf("want an error result containing %q, got %+v", sub, out)
	}
}

func names(ts *tool.Toolset) []string {
	var n []string
	for _, t := range ts.Tools() {
		n = append(n, t.Name)
	}
	return n
}

func TestOffering(t *testing.T) {
	lsb, _ := localSB(t)
	vsb := virtual.New()
	yes := func(context.Context, permission.Request) (bool, error) { return true, nil }
	fetcher, err := tool.NewFetcher(tool.FetchPolicy{Allow: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"read_file", "glob", "write_file", "edit_file", "shell", "fetch", "web_search"}
	cases := []struct {
		name    string
		sb      sandbox.Sandbox
		cfg     permission.Config
		fetch   bool
		search  bool
		offered []string
	}{
		{"virtual read_only", vsb, permission.Config{}, false, false, []string{"read_file", "glob"}},
		{"virtual auto: no shell on purpose", vsb, permission.Config{Mode: permission.Auto}, true, true, []string{"read_file", "glob", "write_file", "edit_file", "fetch", "web_search"}},
		{"local read_only", lsb, permission.Config{}, true, true, []string{"read_file", "glob"}},
		{"local read_only + write", lsb, permission.Config{Allow: []permission.Capability{permission.Write}}, true, true, []string{"read_file", "glob", "write_file", "edit_file"}},
		{"local auto", lsb, permission.Config{Mode: permission.Auto}, true, true, all},
		{"local auto without fetcher or backend", lsb, permission.Config{Mode: permission.Auto}, false, false, all[:5]},
		{"local ask without asker", lsb, permission.Config{Mode: permission.Ask}, true, true, []string{"read_file", "glob"}},
		{"local ask with asker", lsb, permission.Config{Mode: permission.Ask, Asker: yes}, true, true, all},
		{"local read_only + fetch", lsb, permission.Config{Allow: []permission.Capability{permission.Fetch}}, true, false, []string{"read_file", "glob", "fetch"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := tool.Options{Sandbox: c.sb, Gate: newGate(t, c.cfg)}
			if c.fetch {
				opts.Fetcher = fetcher
			}
			if c.search {
				opts.Search = tool.SearXNG{BaseURL: "http://127.0.0.1:1"}
			}
			ts, err := tool.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(ts); !slices.Equal(got, c.offered) {
				t.Errorf("offered %v, want %v", got, c.offered)
			}
			for _, tl := range ts.Tools() {
				var s map[string]any
				if err := json.Unmarshal(tl.InputSchema, &s); err != nil || s["type"] != "object" || tl.Description == "" {
					t.Errorf("%s: bad schema or description: %s %v", tl.Name, tl.InputSchema, err)
				}
			}
		})
	}
	// A tool that is not offered cannot be called.
	ts := toolset(t, lsb, permission.Config{})
	wantErrText(t, call(t, ts, "shell", map[string]any{"command": "id"}), `unknown tool "shell"`)
	if _, err := tool.New(tool.Options{Sandbox: lsb}); !errors.Is(err, sandbox.ErrConfig) {
		t.Errorf("toolset without gate: %v", err)
	}
}

func TestReadFile(t *testing.T) {
	sb, dir := localSB(t)
	ts := toolset(t, sb, permission.Config{})
	must(t, os.WriteFile(filepath.Join(dir, "lines.txt"), []byte("one\ntwo\nthree\nfour\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "bin.dat"), []byte("GIF89a\x00\x01\x02"), 0o644))
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
	if out.IsError || !strings.Contains(out.Text, "binary file") || strings.Contains(out.Text, "GIF") {
		t.Errorf("binary: %+v", out)
	}
	wantErrText(t, call(t, ts, "read_file", map[string]any{"path": "missing.txt"}), "no such file")
	wantErrText(t, call(t, ts, "read_file", map[string]any{"path": "../etc/passwd"}), "escapes the sandbox root")
	wantErrText(t, call(t, ts, "read_file", map[string]any{"path": "sub"}), "is a directory")
	wantErrText(t, call(t, ts, "read_file", map[string]any{"path": "lines.txt", "bogus": 1}), "unknown field")
	wantErrText(t, call(t, ts, "read_file", map[string]any{}), "needs a path")
	wantErrText(t, call(t, ts, "read_file", map[string]any{"path": "lines.txt", "offset": -1}), "negative")
	if out, err := ts.Call(bg, "read_file", json.RawMessage(`{"path": "lines.txt"} {}`)); err != nil || !out.IsError {
		t.Errorf("trailing JSON: %+v %v", out, err)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
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
	vts := toolset(t, virtual.New(), permission.Config{Mode: permission.Auto})
	wantOK(t, call(t, vts, "write_file", map[string]any{"path": "v.txt", "content": "1"}))
	other := toolset(t, vts.Sandbox(), permission.Config{Mode: permission.Auto}) // another session, same sandbox
	wantOK(t, call(t, other, "write_file", map[string]any{"path": "v.txt", "content": "2"}))
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
	if d, _ := out.Data.(map[string]any); d["replacements"] != 1 {
		t.Errorf("data %+v", out.Data)
	}
	// Its own edit does not make the file stale for the next edit.
	out = call(t, ts, "edit_file", map[string]any{"path": "e.go", "old_string": ":= 1", "new_string": ":= 7", "replace_all": true})
	wantOK(t, out)
	if b, _ := os.ReadFile(filepath.Join(dir, "e.go")); string(b) != "a := 7\nb := 7\nc := 3\n" {
		t.Errorf("after edits: %q", b)
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

func TestShellTool(t *testing.T) {
	sb, _ := localSB(t)
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	var r tool.ShellResult
	out := call(t, ts, "shell", map[string]any{"command": `printf '\033[1;31mred\033[0m\n'; seq 1 300 >&2; exit 3`})
	must(t, json.Unmarshal([]byte(out.Text), &r))
	if out.IsError || r.ExitCode != 3 || r.Stdout != "red\n" || r.TimedOut {
		t.Errorf("shell: %+v", out)
	}
	if !strings.HasPrefix(r.Stderr, "[truncated 100 lines]\n101\n") || !strings.HasSuffix(r.Stderr, "\n300\n") {
		t.Errorf("stderr not truncated to the last 200 lines: %.60q...", r.Stderr)
	}
	out = call(t, ts, "shell", map[string]any{"command": "sleep 10", "timeout": 0.3})
	must(t, json.Unmarshal([]byte(out.Text), &r))
	if !r.TimedOut || !strings.Contains(r.Stderr, "timed out") {
		t.Errorf("timeout: %+v", out)
	}
	wantErrText(t, call(t, ts, "shell", map[string]any{"command": "true", "timeout": -1}), "timeout must be")
	wantErrText(t, call(t, ts, "shell", map[string]any{"command": " "}), "needs a command")
}

func TestTruncate(t *testing.T) {
	lines := func(n int) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "%d\n", i)
		}
		return b.String()
	}
	cases := []struct {
		name, in, want string
		maxLines, max  int
	}{
		{"short", "a\nb\n", "a\nb\n", 200, 100},
		{"ansi", "\x1b[1;31mred\x1b[0m \x1b]0;title\x07x\x1b[2K", "red x", 200, 100},
		{"lines", lines(5), "[truncated 2 lines]\n3\n4\n5\n", 3, 100},
		{"no trailing newline", "1\n2\n3", "[truncated 1 lines]\n2\n3", 2, 100},
		{"chars keep the end", "abcdef", "def", 10, 3},
		{"chars never cut a rune", "ééééé", "ééé", 10, 3},
		{"exactly max lines", lines(3), lines(3), 3, 100},
		{"empty", "", "", 3, 100},
		{"one newline", "\n", "\n", 3, 100},
		{"empty lines", "\n\n\n\n", "[truncated 2 lines]\n\n\n", 2, 100},
		{"no lines kept", lines(2), "[truncated 2 lines]\n", 0, 100},
		{"no lines kept, no trailing newline", "1\n2", "[truncated 2 lines]", 0, 100},
		{"negative lines", "ab\n", "[truncated 1 lines]\n", -1, 100},
		{"no chars", "ab\n", "", 10, 0},
		{"bad UTF-8 counts as one", "ab\xff\xfecd", "\ufffd\ufffdcd", 10, 4},
		{"bad UTF-8 kept when nothing is cut", "a\xff", "a\xff", 10, 4},
		{"lines, then chars", lines(5), "4\n5\n", 2, 4},
	}
	for _, c := range cases {
		if got := tool.Truncate(c.in, c.maxLines, c.max); got != c.want {
			t.Errorf("%s: Truncate = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestDenialsAreResults(t *testing.T) {
	sb, dir := localSB(t)
	no := func(context.Context, permission.Request) (bool, error) { return false, nil }
	ts := toolset(t, sb, permission.Config{Mode: permission.Ask, Asker: no})
	wantErrText(t, call(t, ts, "write_file", map[string]any{"path": "a.txt", "content": "x"}), "write (a.txt) denied by user")
	wantErrText(t, call(t, ts, "shell", map[string]any{"command": "touch pwned"}), "shell (touch pwned) denied by user")
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatal("a denied shell command ran")
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); err == nil {
		t.Fatal("a denied write happened")
	}
}

func TestApprovalRequired(t *testing.T) {
	sb, dir := localSB(t)
	store, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	must(t, err)
	ts := toolset(t, sb, permission.Config{Mode: permission.Approve, Store: store})
	args := json.RawMessage(`{"command": "echo hi > approved.txt"}`)
	_, err = ts.Call(bg, "shell", args)
	var ar *permission.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("want approval required, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "approved.txt")); err == nil {
		t.Fatal("ran before approval")
	}
	_, err = store.Decide(bg, ar.ID, true)
	must(t, err)
	out, err := ts.Call(bg, "shell", args)
	if err != nil || out.IsError {
		t.Fatalf("approved call: %+v %v", out, err)
	}
	if _, err := ts.Call(bg, "shell", args); !errors.Is(err, permission.ErrApprovalRequired) {
		t.Fatalf("the approval was used twice: %v", err)
	}
}

// The write guard runs before the gate: a call it refuses creates no
// pending request and uses up no approval.
func TestGuardBeforeGate(t *testing.T) {
	sb, dir := localSB(t)
	must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("x"), 0o644))
	store, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	must(t, err)
	ts := toolset(t, sb, permission.Config{Mode: permission.Approve, Store: store})
	out, err := ts.Call(bg, "write_file", json.RawMessage(`{"path":"a.txt","content":"y"}`))
	if err != nil || !strings.Contains(out.Text, "read a.txt before overwriting it") {
		t.Fatalf("unread file in approve mode: %+v %v", out, err)
	}
	if list, _ := store.List(bg); len(list) != 0 {
		t.Errorf("a call the guard refused created %d approval requests", len(list))
	}
}

// A glob answer lists at most MaxGlobBytes of names, then says how many
// more matched (review 15c: 90000 names made one MCP message over the
// client's line limit, which ended the session).
func TestGlobAnswerIsBounded(t *testing.T) {
	sb := virtual.New()
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

// Every file tool refuses a path no sandbox takes (over MaxPathLen bytes,
// or holding a NUL) before anything else, in one short line that does
// not echo it, and the audit log never sees it.
func TestBadPathsRefusedFirst(t *testing.T) {
	sb, _ := localSB(t)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := permission.OpenAudit(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto, Audit: audit})
	long := strings.Repeat("p", sandbox.MaxPathLen+1)
	for _, bad := range []struct{ path, want string }{{long, "longer than"}, {"a\x00b", "NUL byte"}} {
		for tool, args := range map[string]map[string]any{
			"read_file":  {"path": bad.path},
			"write_file": {"path": bad.path, "content": "x"},
			"edit_file":  {"path": bad.path, "old_string": "a", "new_string": "b"},
			"glob":       {"pattern": bad.path},
		} {
			out := call(t, ts, tool, args)
			if !out.IsError || !strings.Contains(out.Text, bad.want) || strings.Contains(out.Text, bad.path) || len(out.Text) > 200 {
				t.Errorf("%s with a bad path (%s): %.300q", tool, bad.want, out.Text)
			}
		}
	}
	if b, _ := os.ReadFile(auditPath); len(b) != 0 {
		t.Errorf("the audit log holds %d bytes for calls refused before the gate: %.200s", len(b), b)
	}
}
