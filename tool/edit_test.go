package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// editTiers are the tiers edit_file is tested on: the host under a root,
// and memory.
func editTiers(t *testing.T) map[string]sandbox.Sandbox {
	sb, _ := localSB(t)
	return map[string]sandbox.Sandbox{"local": sb, "virtual": virtual.New(virtual.Options{})}
}

// seed writes a file through the sandbox and reads it through the tools,
// so the session may edit it.
func seed(t *testing.T, ts *tool.Toolset, sb sandbox.Sandbox, path, text string) {
	t.Helper()
	if err := sb.Write(bg, path, []byte(text)); err != nil {
		t.Fatal(err)
	}
	wantOK(t, call(t, ts, "read_file", map[string]any{"path": path}))
}

func fileText(t *testing.T, sb sandbox.Sandbox, path string) string {
	t.Helper()
	b, err := sb.Read(bg, path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func editResult(t *testing.T, out tool.Output) tool.EditResult {
	t.Helper()
	return structuredResult[tool.EditResult](t, "edit_file", out)
}

// Edits apply in order, each to the text the ones before it left, and the
// answer is the diff of the whole change.
func TestEditsApplyInOrderAndAnswerWithADiff(t *testing.T) {
	for name, sb := range editTiers(t) {
		t.Run(name, func(t *testing.T) {
			ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
			seed(t, ts, sb, "f.go", "package f\n\nfunc a() {}\nfunc b() {}\n// a b a\n")
			r := editResult(t, call(t, ts, "edit_file", map[string]any{"path": "f.go", "edits": []map[string]any{
				{"old_string": "func a()", "new_string": "func alpha()"},
				{"old_string": "alpha() {}\nfunc b", "new_string": "alpha() {}\nfunc beta"}, // sees edit 1
				{"old_string": "a", "new_string": "A", "replace_all": true},
			}}))
			want := "pAckAge f\n\nfunc AlphA() {}\nfunc betA() {}\n// A b A\n"
			if got := fileText(t, sb, "f.go"); got != want {
				t.Fatalf("after the edits: %q, want %q", got, want)
			}
			wantDiff := "--- a/f.go\n+++ b/f.go\n@@ -1,5 +1,5 @@\n" +
				"-package f\n+pAckAge f\n \n" +
				"-func a() {}\n-func b() {}\n-// a b a\n" +
				"+func AlphA() {}\n+func betA() {}\n+// A b A\n"
			if r.Diff != wantDiff || r.LinesAdded != 4 || r.LinesDeleted != 4 || r.DiffCut || r.DryRun {
				t.Fatalf("result %+v\ndiff:\n%s\nwant:\n%s", r, r.Diff, wantDiff)
			}
			if r.Replacements != 1+1+7 {
				t.Fatalf("replacements %d, want 9", r.Replacements)
			}
			// The session knows the file it wrote: a second edit needs
			// no new read.
			editResult(t, call(t, ts, "edit_file", map[string]any{"path": "f.go", "old_string": "betA", "new_string": "b"}))
		})
	}
}

// If any edit cannot apply, none is: the file is left as it was and the
// answer names the edit that failed, counting from 1.
func TestEditsAreAllOrNothing(t *testing.T) {
	many := make([]map[string]any, tool.MaxEdits+1)
	for i := range many {
		many[i] = map[string]any{"old_string": "x", "new_string": "y"}
	}
	for _, c := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"the third is not found after the first two", map[string]any{"edits": []map[string]any{
			{"old_string": "one", "new_string": "1"}, {"old_string": "two", "new_string": "2"}, {"old_string": "one", "new_string": "I"},
		}}, "edit 3: old_string not found in f.txt (after the edits before it)"},
		{"the second is ambiguous", map[string]any{"edits": []map[string]any{
			{"old_string": "one", "new_string": "1"}, {"old_string": "two", "new_string": "2 2"}, {"old_string": "2", "new_string": "3"},
		}}, "edit 3: old_string appears 2 times"},
		{"the first is the same text", map[string]any{"edits": []map[string]any{{"old_string": "one", "new_string": "one"}}}, "edit 1: old_string and new_string are the same"},
		{"the second lacks new_string", map[string]any{"edits": []map[string]any{{"old_string": "one", "new_string": "1"}, {"old_string": "two"}}}, "edit 2: needs old_string and new_string"},
		{"an empty old_string", map[string]any{"edits": []map[string]any{{"old_string": "", "new_string": "1"}}}, "edit 1: old_string is empty"},
		{"edits that undo each other", map[string]any{"edits": []map[string]any{{"old_string": "one", "new_string": "1"}, {"old_string": "1", "new_string": "one"}}}, "leave f.txt as it was"},
		{"both forms", map[string]any{"old_string": "one", "new_string": "1", "edits": []map[string]any{{"old_string": "two", "new_string": "2"}}}, "not both"},
		{"replace_all beside edits", map[string]any{"replace_all": true, "edits": []map[string]any{{"old_string": "two", "new_string": "2"}}}, "not both"},
		{"no edit at all", map[string]any{}, "edit_file needs path and old_string and new_string, or path and edits"},
		{"an empty edits", map[string]any{"edits": []map[string]any{}}, "edits is empty"},
		{"too many edits", map[string]any{"edits": many}, fmt.Sprintf("over the limit of %d", tool.MaxEdits)},
		{"the result would be over the size limit", map[string]any{"edits": []map[string]any{
			{"old_string": "one", "new_string": strings.Repeat("o", 1<<20)},
			{"old_string": "o", "new_string": strings.Repeat("z", 300), "replace_all": true}, // ~300 MiB, refused before it is built
		}}, fmt.Sprintf("edit 2: the edited f.txt would be %d bytes, over the %d byte limit", (1<<20+1)*299+1<<20+5, sandbox.MaxFileSize)},
		{"an unknown field in an edit", map[string]any{"edits": []map[string]any{{"old_string": "one", "new_string": "1", "old": "x"}}}, "unknown field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for name, sb := range editTiers(t) {
				ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
				seed(t, ts, sb, "f.txt", "one two\n")
				c.args["path"] = "f.txt"
				wantErrText(t, call(t, ts, "edit_file", c.args), c.want)
				if got := fileText(t, sb, "f.txt"); got != "one two\n" {
					t.Fatalf("%s: a refused edit changed the file to %q", name, got)
				}
			}
		})
	}
}

// A dry run answers with the diff and writes nothing; it is a read, so it
// needs no read-before-write, no person and no approval, and is audited.
func TestEditDryRunWritesNothingAndAsksNobody(t *testing.T) {
	store, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	for _, cfg := range []permission.Config{
		{Mode: permission.Approve, Store: store},
		{Mode: permission.Ask, Asker: func(context.Context, permission.Request) (bool, error) { asked++; return false, nil }},
	} {
		for name, sb := range editTiers(t) {
			t.Run(string(cfg.Mode)+"/"+name, func(t *testing.T) {
				if err := sb.Write(bg, "f.txt", []byte("one two\n")); err != nil {
					t.Fatal(err)
				}
				ts := toolset(t, sb, cfg) // f.txt never read in this session
				r := editResult(t, call(t, ts, "edit_file", map[string]any{"path": "f.txt", "old_string": "two", "new_string": "2", "dry_run": true}))
				want := "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-one two\n+one 2\n"
				if !r.DryRun || r.Diff != want || r.Replacements != 1 {
					t.Fatalf("dry run %+v, want the diff %q", r, want)
				}
				if got := fileText(t, sb, "f.txt"); got != "one two\n" {
					t.Fatalf("a dry run wrote %q", got)
				}
				// A dry run of edits that cannot apply fails as the edit would.
				wantErrText(t, call(t, ts, "edit_file", map[string]any{"path": "f.txt", "old_string": "three", "new_string": "3", "dry_run": true}), "old_string not found")
			})
		}
	}
	if open, err := store.List(bg); err != nil || len(open) != 0 || asked != 0 {
		t.Fatalf("dry runs made %d approval requests (%v) and asked %d times", len(open), err, asked)
	}
}

// The diff an edit answers with is bounded; the counts still cover the
// whole change.
func TestEditDiffIsCut(t *testing.T) {
	sb := virtual.New(virtual.Options{})
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	seed(t, ts, sb, "big.txt", strings.Repeat("line\n", 50_000))
	r := editResult(t, call(t, ts, "edit_file", map[string]any{"path": "big.txt", "old_string": "line", "new_string": "LINE", "replace_all": true}))
	if !r.DiffCut || len(r.Diff) > tool.MaxDiffBytes || !strings.Contains(r.Diff, "diff cut at") {
		t.Fatalf("a diff of %d bytes, cut %v; want one cut at %d", len(r.Diff), r.DiffCut, tool.MaxDiffBytes)
	}
	if r.LinesAdded != 50_000 || r.LinesDeleted != 50_000 || r.Replacements != 50_000 {
		t.Fatalf("counts %+v; want all 50000 lines", r)
	}
}

// The question for several edits shows every one of them, each preview
// shorter when there are many, none left out unsaid.
func TestEditQuestionShowsEveryEdit(t *testing.T) {
	edits := make([]map[string]any, 20)
	for i := range edits {
		edits[i] = map[string]any{"old_string": fmt.Sprintf("old%02d", i), "new_string": fmt.Sprintf("new%02d%s", i, strings.Repeat("z", 100))}
	}
	raw, err := json.Marshal(map[string]any{"path": "f.txt", "edits": edits})
	if err != nil {
		t.Fatal(err)
	}
	q := tool.Question(permission.Request{Capability: permission.Write, Tool: "edit_file", Detail: "f.txt", Args: raw})
	for i := range edits {
		if want := fmt.Sprintf("edit %d: replaces \"old%02d\" with \"new%02d", i+1, i, i); !strings.Contains(q, want) {
			t.Fatalf("question lacks %q:\n%s", want, q)
		}
	}
	if !strings.Contains(q, "more bytes)") || len(q) > 4000 {
		t.Fatalf("a question of %d bytes that does not say what it cut:\n%s", len(q), q)
	}
}

// An edit that cannot apply (old_string missing, or ambiguous) fails
// before the gate: it asks nobody and uses up no approval. One that can
// apply then asks as before.
func TestEditThatCannotApplyAsksNobody(t *testing.T) {
	store, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	sb, dir := localSB(t)
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("one two two"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := tool.New(tool.Options{Sandbox: sb, Gate: newGate(t, permission.Config{Mode: permission.Approve, Store: store})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Call(bg, "read_file", json.RawMessage(`{"path":"f.txt"}`)); err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{
		`{"path":"f.txt","old_string":"three","new_string":"3"}`,
		`{"path":"f.txt","old_string":"two","new_string":"2"}`,
	} {
		out, err := ts.Call(bg, "edit_file", json.RawMessage(args))
		if err != nil || !out.IsError {
			t.Errorf("%s: %+v %v; want a failed edit", args, out, err)
		}
	}
	if open, err := store.List(bg); err != nil || len(open) != 0 {
		t.Fatalf("edits that cannot apply made %d approval requests (%v)", len(open), err)
	}
	_, err = ts.Call(bg, "edit_file", json.RawMessage(`{"path":"f.txt","old_string":"one","new_string":"1"}`))
	if !errors.Is(err, permission.ErrApprovalRequired) {
		t.Fatalf("an edit that applies: %v; want approval required", err)
	}
}

// Where a person decides, the file is read again after the decision: a
// change made meanwhile is kept, not overwritten with the text read before.
func TestEditRereadsAfterThePersonDecides(t *testing.T) {
	sb, dir := localSB(t)
	f := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(f, []byte("one two"), 0o644); err != nil {
		t.Fatal(err)
	}
	asker := func(context.Context, permission.Request) (bool, error) {
		return true, os.WriteFile(f, []byte("one three"), 0o644) // changed while asking
	}
	ts, err := tool.New(tool.Options{Sandbox: sb, Gate: newGate(t, permission.Config{Mode: permission.Ask, Asker: asker})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Call(bg, "read_file", json.RawMessage(`{"path":"f.txt"}`)); err != nil {
		t.Fatal(err)
	}
	out, err := ts.Call(bg, "edit_file", json.RawMessage(`{"path":"f.txt","old_string":"one","new_string":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(f); string(got) != "1 three" {
		t.Fatalf("after the edit: %q (%+v); want the change made while asking kept", got, out)
	}
}

// BenchmarkEditFile measures one edit in the middle of a 1 MiB file, the
// diff of the answer included, on the host and in memory.
func BenchmarkEditFile(b *testing.B) {
	text := strings.Repeat("the quick brown fox jumps over the lazy dog\n", 1<<20/44)
	mid := len(text) / 2
	mid += strings.IndexByte(text[mid:], '\n') + 1
	text = text[:mid] + "MARK\n" + text[mid:]
	dir := b.TempDir()
	lsb, err := local.New(bg, local.Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer lsb.Close()
	for name, sb := range map[string]sandbox.Sandbox{"local": lsb, "virtual": virtual.New(virtual.Options{})} {
		b.Run(name, func(b *testing.B) {
			g, err := permission.New(permission.Config{Mode: permission.Auto})
			if err != nil {
				b.Fatal(err)
			}
			ts, err := tool.New(tool.Options{Sandbox: sb, Gate: g})
			if err != nil {
				b.Fatal(err)
			}
			if err := sb.Write(bg, "big.txt", []byte(text)); err != nil {
				b.Fatal(err)
			}
			if _, err := ts.Call(bg, "read_file", json.RawMessage(`{"path":"big.txt","limit":1}`)); err != nil {
				b.Fatal(err)
			}
			args := [2]json.RawMessage{
				json.RawMessage(`{"path":"big.txt","old_string":"MARK\n","new_string":"mark\n"}`),
				json.RawMessage(`{"path":"big.txt","old_string":"mark\n","new_string":"MARK\n"}`),
			}
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			for i := range b.N {
				out, err := ts.Call(bg, "edit_file", args[i%2])
				if err != nil || out.IsError {
					b.Fatalf("%+v %v", out, err)
				}
			}
		})
	}
}
