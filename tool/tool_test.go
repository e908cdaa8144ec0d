package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/permission/rules"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
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
	sb, err := local.New(context.Background(), local.Options{Dir: dir})
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

// structuredResult is a successful call's structured result, checked to
// be a T whose JSON the text content is.
func structuredResult[T any](t *testing.T, name string, out tool.Output) T {
	t.Helper()
	wantOK(t, out)
	r, ok := out.Data.(T)
	if !ok {
		var want T
		t.Fatalf("%s data is %T, want %T", name, out.Data, want)
	}
	var fromText T
	if err := json.Unmarshal([]byte(out.Text), &fromText); err != nil || !reflect.DeepEqual(fromText, r) {
		t.Fatalf("the text %q is not the JSON of the result %+v (%v)", out.Text, r, err)
	}
	return r
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
	vsb := virtual.New(virtual.Options{})
	yes := func(context.Context, permission.Request) (bool, error) { return true, nil }
	fetcher, err := tool.NewFetcher(tool.FetchPolicy{Allow: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	reads := []string{"read_file", "glob", "grep", "list"}
	writes := []string{"write_file", "edit_file", "apply_patch", "move", "delete", "mkdir"}
	join := func(parts ...[]string) []string { return slices.Concat(parts...) }
	shell := []string{"shell", "process_output", "process_input", "process_kill", "process_list"}
	all := join(reads, writes, shell, []string{"fetch", "web_search"})
	cases := []struct {
		name    string
		sb      sandbox.Sandbox
		cfg     permission.Config
		fetch   bool
		search  bool
		offered []string
	}{
		{"virtual read_only", vsb, permission.Config{}, false, false, reads},
		{"virtual auto: no shell on purpose", vsb, permission.Config{Mode: permission.Auto}, true, true, join(reads, writes, []string{"fetch", "web_search"})},
		{"local read_only", lsb, permission.Config{}, true, true, reads},
		{"local read_only + write", lsb, permission.Config{Allow: []permission.Capability{permission.Write}}, true, true, join(reads, writes)},
		{"local auto", lsb, permission.Config{Mode: permission.Auto}, true, true, all},
		{"local auto without fetcher or backend", lsb, permission.Config{Mode: permission.Auto}, false, false, join(reads, writes, shell)},
		{"local ask without asker", lsb, permission.Config{Mode: permission.Ask}, true, true, reads},
		{"local ask with asker", lsb, permission.Config{Mode: permission.Ask, Asker: yes}, true, true, all},
		{"local read_only + fetch", lsb, permission.Config{Allow: []permission.Capability{permission.Fetch}}, true, false, join(reads, []string{"fetch"})},
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
	if _, err := tool.New(tool.Options{Sandbox: lsb}); !errors.Is(err, tool.ErrConfig) {
		t.Errorf("toolset without gate: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
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

// toolsetWith is a Toolset of opts whose gate is made of cfg.
func toolsetWith(t *testing.T, opts tool.Options, cfg permission.Config) *tool.Toolset {
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

// callRaw calls a tool with raw JSON arguments and turns a panic into a
// test failure (the MCP SDK does not recover handler panics: a panic
// there ends the whole server process).
func callRaw(t *testing.T, ts *tool.Toolset, name, raw string) (out tool.Output, err error) {
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

// A path longer than any sandbox takes is refused before the gate
// without being echoed, by write_file and edit_file too (whose
// checkOverwrite and Stat run before the gate): one call with a 1 MiB
// path gets a short error, not an answer holding the path, in every mode
// that offers them.
// Origin: review 16.
func TestWriteToolsDoNotEchoLongPath(t *testing.T) {
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

// A read_file call in the default read_only mode with a path of any
// length (over sandbox.MaxPathLen) is refused before the gate, so neither
// the audit log nor the answer holds the path: a client cannot fill the
// disk through "hutch mcp --audit" with 15 MiB paths, nor get them back.
// Origin: review 15c.
func TestLongPathReachesNeitherAuditNorAnswer(t *testing.T) {
	sb, _ := localSB(t)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := permission.OpenAudit(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = audit.Close() })
	ts := toolset(t, sb, permission.Config{Mode: permission.ReadOnly, Audit: audit})
	long := strings.Repeat("p", 1<<20)
	out := call(t, ts, "read_file", map[string]any{"path": long})
	fi, err := os.Stat(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 64<<10 || len(out.Text) > 64<<10 {
		t.Errorf("one read_file with a %d byte path (over the %d byte limit): audit line of %d bytes, answer of %d bytes",
			len(long), sandbox.MaxPathLen, fi.Size(), len(out.Text))
	}
}

// A container sandbox's approval scope names what its calls reach (a
// digest of the engine and the normalized options: image, binds' host
// sources), not only its working directory inside the container
// ("/workspace" by default): two container servers sharing one approval
// store, binding different host directories, images or engines, have
// different scopes, so an approval a person gave for "rm -rf ." in one is
// not claimed in the other (permission's promise: "one given for one
// workspace never covers a call in another that shares the store").
// Origin: review 7.
func TestContainerScopeNamesTheWorkspace(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	mk := func(o container.Options) string {
		o.Program, o.NoHelper = "/bin/true", true // New starts nothing
		sb, err := container.New(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		return tool.Scope(sb)
	}
	base := container.Options{Image: "debian:stable-slim", Binds: []container.Bind{{Source: a, Target: "/workspace", Writable: true}}}
	s0 := mk(base)
	for name, o := range map[string]container.Options{
		"other host directory": {Image: base.Image, Binds: []container.Bind{{Source: b, Target: "/workspace", Writable: true}}},
		"other image":          {Image: "alpine:3", Binds: base.Binds},
		"other engine":         {Image: base.Image, Binds: base.Binds, Engine: container.Engine{Host: "ssh://me@build"}},
	} {
		if s := mk(o); s == s0 {
			t.Errorf("%s: same approval scope %q", name, s)
		}
	}
}

// Local sandboxes: an approval given for one root never lets the same call
// through in another root sharing the store, and the arguments approved are
// the decoded ones (differently cased or duplicated keys cannot show the
// approver one path and write another).
// Origin: review 7.
func TestApprovalBoundToRootAndDecodedArgs(t *testing.T) {
	store, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(t, permission.Config{Mode: permission.Approve, Store: store})
	ts := func(dir string) *tool.Toolset {
		sb, err := local.New(context.Background(), local.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sb.Close() })
		s, err := tool.New(tool.Options{Sandbox: sb, Gate: g})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	tsA, tsB := ts(dirA), ts(dirB)
	raw := json.RawMessage(`{"path":"decoy.txt","PATH":"x.txt","content":"v"}`)
	_, err = tsA.Call(bg, "write_file", raw)
	var ar *permission.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("want approval required, got %v", err)
	}
	a, err := store.Get(bg, ar.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Detail != "x.txt" || string(a.Arguments) != `{"content":"v","path":"x.txt"}` {
		t.Fatalf("the person is shown %q %s; want what the tool will do", a.Detail, a.Arguments)
	}
	if _, err := store.Decide(bg, ar.ID, true); err != nil {
		t.Fatal(err)
	}
	// Root B: not covered.
	if _, err := tsB.Call(bg, "write_file", json.RawMessage(`{"path":"x.txt","content":"v"}`)); !errors.Is(err, permission.ErrApprovalRequired) {
		t.Fatalf("another root: %v; want approval required", err)
	}
	if _, err := os.Stat(filepath.Join(dirB, "x.txt")); err == nil {
		t.Fatal("the approval for root A wrote in root B")
	}
	// Root A, plainly spelled: covered, once.
	out, err := tsA.Call(bg, "write_file", json.RawMessage(`{"content":"v","path":"x.txt"}`))
	if err != nil || out.IsError {
		t.Fatalf("approved call: %+v %v", out, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dirA, "x.txt")); string(b) != "v" {
		t.Fatalf("file holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(dirA, "decoy.txt")); err == nil {
		t.Fatal("the decoy path was written")
	}
}

// The tools decode arguments with encoding/json, which matches keys
// case-insensitively and lets the last duplicate win; approvals (and
// ask-mode answers) are bound to the arguments as decoded. Two argument
// objects with the same keys in a different order, which decode to
// different calls, cannot share an approval: the person approves
// "write (notes.txt)" and the agent cannot write secret.txt with it.
// Origin: security review.
func TestApprovalNotForgedByKeyOrder(t *testing.T) {
	store, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	sb := virtual.New(virtual.Options{})
	ts := toolsetWith(t, tool.Options{Sandbox: sb}, permission.Config{Mode: permission.Approve, Store: store})

	shown := `{"Path":"secret.txt","path":"notes.txt","content":"pwned"}`
	_, err = callRaw(t, ts, "write_file", shown)
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
	out, err := callRaw(t, ts, "write_file", swapped)
	if _, serr := sb.Stat(context.Background(), "secret.txt"); serr == nil {
		t.Fatalf("an approval shown as write (notes.txt) let the agent write secret.txt: %+v %v", out, err)
	}
}

// The approval key covers the sandbox (Scope) as well as capability,
// tool and arguments: two servers sharing one store (the README's
// configuration uses ~/.hutch/approvals.db) do not share approvals, and a
// request a person approved for one sandbox is not consumed by an
// identical call in another.
// Origin: security review.
func TestApprovalBoundToSandbox(t *testing.T) {
	store, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := permission.Config{Mode: permission.Approve, Store: store}
	sbA, sbB := virtual.New(virtual.Options{}), virtual.New(virtual.Options{})
	tsA := toolsetWith(t, tool.Options{Sandbox: sbA}, cfg)
	tsB := toolsetWith(t, tool.Options{Sandbox: sbB}, cfg)
	args := `{"path":"deploy.txt","content":"x"}`

	_, err = callRaw(t, tsA, "write_file", args)
	var ar *permission.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("want approval required, got %v", err)
	}
	if _, err := store.Decide(context.Background(), ar.ID, true); err != nil {
		t.Fatal(err)
	}
	// Sandbox B never asked; its identical call must not use A's approval.
	out, err := callRaw(t, tsB, "write_file", args)
	if err == nil && !out.IsError {
		t.Fatalf("sandbox B used the approval granted for sandbox A's request %s", ar.ID)
	}
}

// TestRulesFileDecidesTheRealTools runs the real tools over the local
// tier with a rules file in read_only mode: an allowed command runs, a
// denied path stops the file tools, and the audit log names the rule.
func TestRulesFileDecidesTheRealTools(t *testing.T) {
	sb, dir := localSB(t)
	must(t, os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET=1\n"), 0o600))
	must(t, os.Mkdir(filepath.Join(dir, "notes"), 0o755))
	rulesPath := filepath.Join(t.TempDir(), "rules.yaml")
	must(t, os.WriteFile(rulesPath, []byte(`rules:
  - allow: shell echo ok *
  - deny: read .env
    reason: secrets
  - deny: write *.env
  - allow: write notes/**
`), 0o600))
	set, err := rules.Load(rulesPath)
	must(t, err)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := permission.OpenAudit(auditPath)
	must(t, err)
	defer audit.Close()
	ts := toolset(t, sb, permission.Config{Mode: permission.ReadOnly, Rules: set, Audit: audit})
	if got := names(ts); !slices.Contains(got, "shell") || !slices.Contains(got, "write_file") {
		t.Fatalf("read_only with allow rules offers %v, want shell and write_file among them", got)
	}

	out := call(t, ts, "shell", map[string]any{"command": "echo ok from rules"})
	if out.IsError || !strings.Contains(out.Text, "ok from rules") {
		t.Errorf("allowed command: %+v", out)
	}
	wantErrText(t, call(t, ts, "shell", map[string]any{"command": "echo ok; touch x"}), "shell denied in read_only mode")
	wantErrText(t, call(t, ts, "read_file", map[string]any{"path": ".env"}), "denied by rule "+rulesPath+":3: deny read .env (secrets)")
	wantErrText(t, call(t, ts, "read_file", map[string]any{"paths": []string{"notes/../.env"}}), "deny read .env")
	wantErrText(t, call(t, ts, "write_file", map[string]any{"path": "x.env", "content": "x"}), "deny write *.env")
	wantErrText(t, call(t, ts, "write_file", map[string]any{"path": "notes/.env", "content": "x"}), "deny write *.env")
	wantErrText(t, call(t, ts, "write_file", map[string]any{"path": "other.txt", "content": "x"}), "write denied in read_only mode")
	wantErrText(t, call(t, ts, "grep", map[string]any{"pattern": "SECRET"}), "deny read .env")
	wantOK(t, call(t, ts, "write_file", map[string]any{"path": "notes/a.txt", "content": "x"}))
	wantErrText(t, call(t, ts, "move", map[string]any{"from": "notes/a.txt", "to": "notes/a.env"}), "deny write *.env")
	wantErrText(t, call(t, ts, "apply_patch", map[string]any{"patch": "--- /dev/null\n+++ b/notes/b.env\n@@ -0,0 +1 @@\n+x\n"}), "deny write *.env")
	if data, err := os.ReadFile(filepath.Join(dir, ".env")); err != nil || string(data) != "SECRET=1\n" {
		t.Errorf(".env changed: %q %v", data, err)
	}

	f, err := os.ReadFile(auditPath)
	must(t, err)
	var lines []permission.AuditEntry
	for l := range strings.Lines(string(f)) {
		var e permission.AuditEntry
		must(t, json.Unmarshal([]byte(l), &e))
		lines = append(lines, e)
	}
	if len(lines) < 3 || lines[0].Rule != rulesPath+":2: allow shell echo ok *" || lines[0].By != "rule" || lines[0].Outcome != "allowed" {
		t.Fatalf("first audit line %+v, want the allow rule", lines)
	}
	if lines[1].Rule != "" || lines[2].Rule != rulesPath+":3: deny read .env" || lines[2].Outcome != "denied" {
		t.Errorf("audit lines 2 and 3: %+v %+v", lines[1], lines[2])
	}
}
