package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
	"github.com/hutchsandbox/hutch/tool"
)

// patchTiers are the tiers apply_patch is tested on: the host under a
// root, and memory with the read-before-write guard on (as on a real
// filesystem), so both tiers check it.
func patchTiers(t *testing.T) map[string]*tool.Toolset {
	lsb, _ := localSB(t)
	vsb := virtual.New(virtual.Options{})
	t.Cleanup(func() { _ = vsb.Close() })
	return map[string]*tool.Toolset{
		"local":   toolset(t, lsb, permission.Config{Mode: permission.Auto}),
		"virtual": toolsetWith(t, tool.Options{Sandbox: vsb, WriteGuard: tool.GuardOn}, permission.Config{Mode: permission.Auto}),
	}
}

func patchResult(t *testing.T, out tool.Output) tool.PatchResult {
	t.Helper()
	return structuredResult[tool.PatchResult](t, "apply_patch", out)
}

// tree is every file of sb with its content, and every directory (as
// "dir/" -> ""), to compare a sandbox before and after.
func tree(t *testing.T, sb sandbox.Sandbox) map[string]string {
	t.Helper()
	files, err := sb.Glob(bg, "**")
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := sb.Glob(bg, "**/")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, f := range files {
		m[f] = fileText(t, sb, f)
	}
	for _, d := range dirs {
		m[strings.TrimSuffix(d, "/")+"/"] = ""
	}
	return m
}

// The files of the project the patches below change.
var patchSeed = map[string]string{
	"main.go":      "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n",
	"old.txt":      "gone\nsoon\n",
	"docs/r.md":    "# R\n\none\ntwo\nthree\n",
	"tail.txt":     "a\nb",
	"lib/util.go":  "package lib\n\n// Util is useful.\nfunc Util() int { return 1 }\n",
	"lib/extra.go": "package lib\n",
}

// seedPatchFiles writes patchSeed through the sandbox and reads every file
// through the tools, so the session may change them.
func seedPatchFiles(t *testing.T, ts *tool.Toolset) {
	t.Helper()
	for _, p := range slices.Sorted(mapsKeys(patchSeed)) {
		seed(t, ts, ts.Sandbox(), p, patchSeed[p])
	}
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// everyOp is a patch that modifies (with an offset: main.go has gained
// no lines, but the hunk says line 3 for line 5), adds in a missing
// directory, deletes, renames with a change into a missing directory, and
// gives a last line its line break.
const everyOp = `diff --git a/main.go b/main.go
index 1111111..2222222 100644
--- a/main.go
+++ b/main.go
@@ -3,3 +3,3 @@ import "fmt"
 func main() {
-	fmt.Println("hello")
+	fmt.Println("hello, patch")
 }
diff --git a/new/dir/n.txt b/new/dir/n.txt
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/new/dir/n.txt
@@ -0,0 +1,2 @@
+fresh
+file
diff --git a/old.txt b/old.txt
deleted file mode 100644
index 4444444..0000000
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-gone
-soon
diff --git a/docs/r.md b/moved/deeper/r.md
similarity index 80%
rename from docs/r.md
rename to moved/deeper/r.md
index 5555555..6666666 100644
--- a/docs/r.md
+++ b/moved/deeper/r.md
@@ -3,3 +3,3 @@
 one
-two
+TWO
 three
diff --git a/tail.txt b/tail.txt
--- a/tail.txt
+++ b/tail.txt
@@ -1,2 +1,2 @@
 a
-b
\ No newline at end of file
+b
`

// A patch changes every file it names, as it says: modified, added (its
// directories made), deleted, renamed with changes (into a new
// directory); the answer lists each with its lines, on every tier.
func TestApplyPatchChangesEveryFileItNames(t *testing.T) {
	for name, ts := range patchTiers(t) {
		t.Run(name, func(t *testing.T) {
			seedPatchFiles(t, ts)
			r := patchResult(t, call(t, ts, "apply_patch", map[string]any{"patch": everyOp}))
			want := []tool.PatchedFile{
				{Path: "main.go", Op: "modify", Added: 1, Removed: 1},
				{Path: "new/dir/n.txt", Op: "add", Added: 2},
				{Path: "old.txt", Op: "delete", Removed: 2},
				{Path: "moved/deeper/r.md", Op: "rename", From: "docs/r.md", Added: 1, Removed: 1},
				{Path: "tail.txt", Op: "modify", Added: 1, Removed: 1},
			}
			if !r.OK || !slices.Equal(r.Files, want) || r.Summary != "5 files (2 modified, 1 added, 1 deleted, 1 renamed), +5 -5 lines" {
				t.Fatalf("result %+v\nwant files %+v", r, want)
			}
			sb := ts.Sandbox()
			got := tree(t, sb)
			wantTree := map[string]string{
				"main.go":           strings.Replace(patchSeed["main.go"], `"hello"`, `"hello, patch"`, 1),
				"new/dir/n.txt":     "fresh\nfile\n",
				"moved/deeper/r.md": "# R\n\none\nTWO\nthree\n",
				"tail.txt":          "a\nb\n",
				"lib/util.go":       patchSeed["lib/util.go"],
				"lib/extra.go":      patchSeed["lib/extra.go"],
				"docs/":             "", "lib/": "", "new/": "", "new/dir/": "", "moved/": "", "moved/deeper/": "",
			}
			if !maps.Equal(got, wantTree) {
				t.Fatalf("after the patch:\n%v\nwant\n%v", got, wantTree)
			}
			// The session knows what it wrote: a second patch needs no
			// new read.
			patchResult(t, call(t, ts, "apply_patch", map[string]any{"patch": "--- a/main.go\n+++ b/main.go\n@@ -1 +1 @@\n-package main\n+package main // patched twice\n"}))
		})
	}
}

// Every existing file a patch modifies, deletes or renames must have been
// read in this session and be unchanged since; a file it adds must not
// exist, nor a rename's target. A refused patch changes nothing.
func TestApplyPatchNeedsEveryFileReadFirst(t *testing.T) {
	modify := "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-one\n+1\n"
	del := "--- a/f.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-one\n"
	rename := "diff --git a/f.txt b/g.txt\nrename from f.txt\nrename to g.txt\n"
	cases := []struct {
		name, patch string
		prepare     func(t *testing.T, ts *tool.Toolset) // after f.txt ("one\n") exists
		want        string
	}{
		{"modify unread", modify, nil, "read f.txt before overwriting it"},
		{"delete unread", del, nil, "read f.txt before overwriting it"},
		{"rename unread", rename, nil, "read f.txt before overwriting it"},
		{"unread beside read", "--- a/r.txt\n+++ b/r.txt\n@@ -1 +1 @@\n-r\n+R\n" + modify, func(t *testing.T, ts *tool.Toolset) {
			seed(t, ts, ts.Sandbox(), "r.txt", "r\n")
		}, "read f.txt before overwriting it"},
		{"changed since read", modify, func(t *testing.T, ts *tool.Toolset) {
			wantOK(t, call(t, ts, "read_file", map[string]any{"path": "f.txt"}))
			must(t, ts.Sandbox().Write(bg, "f.txt", []byte("one\ntwo\n")))
		}, "stale: f.txt changed since you read it"},
		{"add over an existing file", "--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1 @@\n+new\n", func(t *testing.T, ts *tool.Toolset) {
			wantOK(t, call(t, ts, "read_file", map[string]any{"path": "f.txt"}))
		}, "f.txt already exists, but the patch adds it"},
		{"rename onto an existing file", rename, func(t *testing.T, ts *tool.Toolset) {
			seed(t, ts, ts.Sandbox(), "g.txt", "g\n")
			wantOK(t, call(t, ts, "read_file", map[string]any{"path": "f.txt"}))
		}, "g.txt already exists, but the patch renames it"},
		{"modify a missing file", "--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-a\n+b\n", nil, "nope.txt does not exist"},
		{"add below a file", "--- /dev/null\n+++ b/f.txt/x\n@@ -0,0 +1 @@\n+x\n", nil, "add f.txt/x: not a directory"},
		{"add below a file the patch adds", "--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+n\n--- /dev/null\n+++ b/n/x\n@@ -0,0 +1 @@\n+x\n", nil,
			"n/x is below n, which the patch creates as a file"},
		{"too many files", manyAdds(tool.MaxPatchFiles + 1), nil, fmt.Sprintf("changes %d files, over the limit of %d", tool.MaxPatchFiles+1, tool.MaxPatchFiles)},
		{"modify a directory", "--- a/d\n+++ b/d\n@@ -1 +1 @@\n-a\n+b\n", func(t *testing.T, ts *tool.Toolset) {
			must(t, ts.Sandbox().Mkdir(bg, "d"))
		}, "d is not a file"},
	}
	for name := range patchTiers(t) {
		for _, c := range cases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				ts := patchTiers(t)[name]
				sb := ts.Sandbox()
				must(t, sb.Write(bg, "f.txt", []byte("one\n")))
				if c.prepare != nil {
					c.prepare(t, ts)
				}
				before := tree(t, sb)
				wantErrText(t, call(t, ts, "apply_patch", map[string]any{"patch": c.patch}), c.want)
				if after := tree(t, sb); !maps.Equal(before, after) {
					t.Fatalf("a refused patch changed the files:\n%v\nwas\n%v", after, before)
				}
			})
		}
	}
}

// countingAsker answers yes and records what it was asked.
type countingAsker struct {
	mu   sync.Mutex
	reqs []permission.Request
	then func() // run while "the person decides"
}

func (a *countingAsker) ask(_ context.Context, r permission.Request) (bool, error) {
	a.mu.Lock()
	a.reqs = append(a.reqs, r)
	a.mu.Unlock()
	if a.then != nil {
		a.then()
	}
	return true, nil
}

// A patch that cannot apply — it does not parse, a hunk does not match, a
// file was never read, a new file exists — fails before the gate: it asks
// nobody and makes no approval request. One that applies asks once.
func TestApplyPatchThatCannotApplyAsksNobody(t *testing.T) {
	store, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	asker := &countingAsker{}
	for _, cfg := range []permission.Config{
		{Mode: permission.Approve, Store: store},
		{Mode: permission.Ask, Asker: asker.ask},
	} {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			sb, _ := localSB(t)
			ts := toolset(t, sb, cfg)
			seed(t, ts, sb, "f.txt", "one\ntwo\n")
			must(t, sb.Write(bg, "unread.txt", []byte("u\n")))
			for _, p := range []string{
				"not a patch at all\n",
				"--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n one\n-three\n+3\n",
				"--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-one\n+1\n--- a/unread.txt\n+++ b/unread.txt\n@@ -1 +1 @@\n-u\n+U\n",
				"--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1 @@\n+x\n",
				"--- a/../f.txt\n+++ b/../f.txt\n@@ -1 +1 @@\n-one\n+1\n",
			} {
				out, err := ts.Call(bg, "apply_patch", mustJSON(t, map[string]any{"patch": p}))
				if err != nil || !out.IsError {
					t.Errorf("%q: %+v %v; want a failed patch", p, out, err)
				}
			}
			if open, err := store.List(bg); cfg.Mode == permission.Approve && (err != nil || len(open) != 0) {
				t.Fatalf("patches that cannot apply made %d approval requests (%v)", len(open), err)
			}
			if len(asker.reqs) != 0 {
				t.Fatalf("patches that cannot apply asked %d times", len(asker.reqs))
			}
			out, err := ts.Call(bg, "apply_patch", mustJSON(t, map[string]any{"patch": "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-one\n+1\n"}))
			switch cfg.Mode {
			case permission.Approve:
				if !errors.Is(err, permission.ErrApprovalRequired) {
					t.Fatalf("a patch that applies: %+v %v; want approval required", out, err)
				}
			default:
				if err != nil || out.IsError || len(asker.reqs) != 1 {
					t.Fatalf("a patch that applies: %+v %v, asked %d times; want it applied after one question", out, err, len(asker.reqs))
				}
			}
		})
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// One question covers the whole patch, and it names every path the patch
// touches and shows the patch, so a yes never covers a file nobody saw.
func TestApplyPatchAsksOnceNamingEveryPath(t *testing.T) {
	sb, _ := localSB(t)
	asker := &countingAsker{}
	ts := toolset(t, sb, permission.Config{Mode: permission.Ask, Asker: asker.ask})
	seedPatchFiles(t, ts)
	wantOK(t, call(t, ts, "apply_patch", map[string]any{"patch": everyOp}))
	if len(asker.reqs) != 1 {
		t.Fatalf("asked %d times for one patch, want once", len(asker.reqs))
	}
	req := asker.reqs[0]
	q := tool.Question(req)
	for _, p := range []string{"main.go", "new/dir/n.txt (new)", "old.txt (deleted)", "docs/r.md -> moved/deeper/r.md", "tail.txt"} {
		if !strings.Contains(req.Detail, p) || !strings.Contains(q, p) {
			t.Errorf("the request's detail %q or question %q does not name %q", req.Detail, q, p)
		}
	}
	if req.Capability != permission.Write || req.Tool != "apply_patch" || !strings.Contains(q, "applies a patch of") || !strings.Contains(q, `hello, patch`) {
		t.Errorf("request %+v, question %q", req, q)
	}
}

// Where a person decides, the files are read again after the decision: a
// change made meanwhile that the hunks do not touch is kept, and one they
// touch makes the patch fail, writing nothing.
func TestApplyPatchReplansAfterThePersonDecides(t *testing.T) {
	patch := "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
	cases := []struct {
		name, meanwhile, want, wantErr string
	}{
		{"a change the hunks do not touch is kept", "zero\none\ntwo\nthree\n", "zero\none\n2\nthree\n", ""},
		{"a change they touch fails the patch", "one\nTWO\n", "one\nTWO\n", "does not apply"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sb, dir := localSB(t)
			f := filepath.Join(dir, "f.txt")
			must(t, os.WriteFile(f, []byte("one\ntwo\n"), 0o644))
			asker := &countingAsker{then: func() { _ = os.WriteFile(f, []byte(c.meanwhile), 0o644) }}
			ts := toolset(t, sb, permission.Config{Mode: permission.Ask, Asker: asker.ask})
			wantOK(t, call(t, ts, "read_file", map[string]any{"path": "f.txt"}))
			out := call(t, ts, "apply_patch", map[string]any{"patch": patch})
			if c.wantErr != "" {
				wantErrText(t, out, c.wantErr)
			} else {
				wantOK(t, out)
			}
			if got, _ := os.ReadFile(f); string(got) != c.want {
				t.Fatalf("after the patch: %q (%s); want %q", got, out.Text, c.want)
			}
		})
	}
}

// failingSandbox fails its failAt-th change (Write, Remove, Rename or
// Mkdir, counting from 1) as a full disk would, and lets every other
// through.
type failingSandbox struct {
	sandbox.Sandbox
	mu      sync.Mutex
	changes int
	failAt  int
}

var errDiskFull = errors.New("no space left on device (test)")

func (s *failingSandbox) change() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes++
	if s.changes == s.failAt {
		return errDiskFull
	}
	return nil
}

func (s *failingSandbox) Write(ctx context.Context, p string, data []byte) error {
	if err := s.change(); err != nil {
		return err
	}
	return s.Sandbox.Write(ctx, p, data)
}

func (s *failingSandbox) Remove(ctx context.Context, p string, recursive bool) error {
	if err := s.change(); err != nil {
		return err
	}
	return s.Sandbox.Remove(ctx, p, recursive)
}

func (s *failingSandbox) Rename(ctx context.Context, from, to string) error {
	if err := s.change(); err != nil {
		return err
	}
	return s.Sandbox.Rename(ctx, from, to)
}

func (s *failingSandbox) Mkdir(ctx context.Context, p string) error {
	if err := s.change(); err != nil {
		return err
	}
	return s.Sandbox.Mkdir(ctx, p)
}

// A patch is written all or nothing: when any change fails mid-way (the
// first, the last, every one between), what was already changed is put
// back — contents written back, deleted files written again, renames
// moved back, directories it made removed — and the answer says what
// failed, on every tier.
func TestApplyPatchIsAllOrNothing(t *testing.T) {
	// Two new files in one new directory, then a change.
	twoAdds := "--- /dev/null\n+++ b/fresh/a.txt\n@@ -0,0 +1 @@\n+a\n" +
		"--- /dev/null\n+++ b/fresh/b.txt\n@@ -0,0 +1 @@\n+b\n" +
		"--- a/main.go\n+++ b/main.go\n@@ -1 +1 @@\n-package main\n+package main // b\n"
	for _, p := range []struct {
		name, patch string
		changes     int
	}{
		// everyOp makes 10 changes: 1 write, 2 mkdirs and a write, 1
		// remove, 2 mkdirs, a rename and a write, 1 write.
		{"every op", everyOp, 10},
		// twoAdds makes 4: a mkdir (once), 3 writes.
		{"two new files in a new directory", twoAdds, 4},
	} {
		for name := range patchTiers(t) {
			testAllOrNothing(t, name+"/"+p.name, name, p.patch, p.changes)
		}
	}
}

func testAllOrNothing(t *testing.T, label, tier, patch string, changes int) {
	for failAt := 1; failAt <= changes+1; failAt++ {
		t.Run(label+"/change "+string(rune('0'+failAt/10))+string(rune('0'+failAt%10)), func(t *testing.T) {
			name := tier
			inner := patchTiers(t)[name].Sandbox()
			fsb := &failingSandbox{Sandbox: inner}
			ts := toolsetWith(t, tool.Options{Sandbox: fsb, WriteGuard: tool.GuardOn}, permission.Config{Mode: permission.Auto})
			seedPatchFiles(t, ts)
			before := tree(t, inner)
			fsb.failAt, fsb.changes = failAt, 0
			out := call(t, ts, "apply_patch", map[string]any{"patch": patch})
			if failAt > changes {
				wantOK(t, out) // the count above is right: one more change fails nothing
				if fsb.changes != changes {
					t.Fatalf("the patch made %d changes, want %d", fsb.changes, changes)
				}
				return
			}
			wantErrText(t, out, "no space left on device (test)")
			wantErrText(t, out, "nothing was changed")
			if after := tree(t, inner); !maps.Equal(before, after) {
				t.Fatalf("change %d failed and the files are not as before:\n%v\nwas\n%v", failAt, after, before)
			}
		})
	}
}

// Paths that leave the root — "..", absolute, through a link that leads
// out — or hold a NUL are refused, and nothing outside the root (or
// inside) changes, on every tier.
func TestApplyPatchKeepsToTheRoot(t *testing.T) {
	mod := func(name string) string {
		return "--- a/" + name + "\n+++ b/" + name + "\n@@ -1 +1 @@\n-secret\n+PWNED\n"
	}
	add := func(name string) string { return "--- /dev/null\n+++ b/" + name + "\n@@ -0,0 +1 @@\n+PWNED\n" }
	cases := []struct {
		name, patch, want string
		localOnly         bool
	}{
		{"dot-dot", mod("../outside/secret.txt"), `".." component`, false},
		{"dot-dot inside a path", mod("in/../../outside/secret.txt"), `".." component`, false},
		{"dot-dot in a new file", add("../outside/new.txt"), `".." component`, false},
		{"dot-dot in a rename", "diff --git a/in/f.txt b/x\nrename from in/f.txt\nrename to ../outside/moved.txt\n", `".." component`, false},
		{"absolute", "--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-root\n+PWNED\n", "absolute", false},
		{"absolute new file", add("/tmp/pwned.txt")[:0] + "--- /dev/null\n+++ /tmp/hutch-pwned.txt\n@@ -0,0 +1 @@\n+PWNED\n", "absolute", false},
		{"NUL", "diff --git \"a/in/f\\000.txt\" \"b/in/f\\000.txt\"\n--- \"a/in/f\\000.txt\"\n+++ \"b/in/f\\000.txt\"\n@@ -1 +1 @@\n-secret\n+PWNED\n", "NUL", false},
		{"through a link out", mod("out/secret.txt"), "escapes", true},
		{"a new file through a link out", add("out/new.txt"), "escapes", true},
		{"a new file below a link out", add("out/deeper/new.txt"), "escapes", true},
		{"a rename through a link out", "diff --git a/in/f.txt b/out/moved.txt\nrename from in/f.txt\nrename to out/moved.txt\n", "escapes", true},
	}
	for _, c := range cases {
		for _, tier := range []string{"local", "virtual"} {
			if c.localOnly && tier == "virtual" {
				continue // the virtual tier has no links
			}
			t.Run(tier+"/"+c.name, func(t *testing.T) {
				outside := filepath.Join(t.TempDir(), "outside")
				must(t, os.Mkdir(outside, 0o755))
				must(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret\n"), 0o644))
				var ts *tool.Toolset
				if tier == "local" {
					sb, dir := localSB(t)
					must(t, os.Symlink(outside, filepath.Join(dir, "out")))
					ts = toolset(t, sb, permission.Config{Mode: permission.Auto})
				} else {
					ts = toolsetWith(t, tool.Options{Sandbox: virtual.New(virtual.Options{}), WriteGuard: tool.GuardOn}, permission.Config{Mode: permission.Auto})
				}
				seed(t, ts, ts.Sandbox(), "in/f.txt", "secret\n")
				before := tree(t, ts.Sandbox())
				out := call(t, ts, "apply_patch", map[string]any{"patch": c.patch})
				wantErrText(t, out, c.want)
				if strings.Contains(out.Text, "\n") {
					t.Errorf("error of more than one line: %q", out.Text)
				}
				if after := tree(t, ts.Sandbox()); !maps.Equal(before, after) {
					t.Errorf("a refused patch changed the root: %v, was %v", after, before)
				}
				ents, _ := os.ReadDir(outside)
				if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "secret\n" || len(ents) != 1 {
					t.Errorf("outside the root: secret.txt holds %q, %d entries", b, len(ents))
				}
				if _, err := os.Stat("/tmp/hutch-pwned.txt"); err == nil {
					t.Errorf("an absolute path was written")
				}
			})
		}
	}
}

// A patch that does not parse is refused with the patch line, in one line.
func TestApplyPatchRefusesWhatDoesNotParse(t *testing.T) {
	ts := patchTiers(t)["virtual"]
	for _, c := range []struct{ patch, want string }{
		{"", "apply_patch needs a patch"},
		{"hello\n", "no file changes found"},
		{"diff --git a/i.png b/i.png\nindex 1..2 100644\nGIT binary patch\nliteral 5\n", "patch line 3: i.png: binary patches cannot be applied"},
		{"--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n", "patch ends inside the hunk"},
		{"diff --git a/x b/y\ncopy from x\ncopy to y\n", "patch line 2: copies cannot be applied"},
		{"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "patched a second time"},
	} {
		out := call(t, ts, "apply_patch", map[string]any{"patch": c.patch})
		wantErrText(t, out, c.want)
		if strings.Contains(out.Text, "\n") {
			t.Errorf("error of more than one line: %q", out.Text)
		}
	}
	wantErrText(t, call(t, ts, "apply_patch", map[string]any{"patch": "x", "path": "y"}), "unknown field")
}

// Two names of one file (a link to it) cannot both be patched: the
// second would write over the first's change.
func TestApplyPatchRefusesOneFileByTwoNames(t *testing.T) {
	sb, dir := localSB(t)
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	seed(t, ts, sb, "f.txt", "one\n")
	must(t, os.Symlink("f.txt", filepath.Join(dir, "l.txt")))
	wantOK(t, call(t, ts, "read_file", map[string]any{"path": "l.txt"}))
	p := "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-one\n+1\n--- a/l.txt\n+++ b/l.txt\n@@ -1 +1 @@\n-one\n+I\n"
	wantErrText(t, call(t, ts, "apply_patch", map[string]any{"patch": p}), "f.txt and l.txt are the same file")
	if got := fileText(t, sb, "f.txt"); got != "one\n" {
		t.Fatalf("f.txt holds %q", got)
	}
}

// apply_patch makes the same bytes as git apply, for a modify with an
// offset, an add, a delete, a rename with changes and a last line
// without a line break.
func TestApplyPatchMatchesGitApply(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Missing(t, "git is not installed: %v", err)
	}
	base := map[string]string{
		"offset.txt":  "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n",
		"gone.txt":    "bye\n",
		"from/r.txt":  "r1\nr2\nr3\nr4\n",
		"noeol.txt":   "x\ny\nz\n",
		"addeol.txt":  "p\nq",
		"spaced f.go": "package f\n",
	}
	cases := []struct{ name, patch string }{
		{"modify with an offset", "--- a/offset.txt\n+++ b/offset.txt\n@@ -2,3 +2,4 @@\n 4\n-5\n+five\n+5.5\n 6\n"},
		{"add", "diff --git a/sub/new.txt b/sub/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/sub/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n"},
		{"delete", "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"},
		{"rename with changes", "diff --git a/from/r.txt b/to/r.txt\nsimilarity index 75%\nrename from from/r.txt\nrename to to/r.txt\n--- a/from/r.txt\n+++ b/to/r.txt\n@@ -2,3 +2,3 @@\n r2\n-r3\n+R3\n r4\n"},
		{"no newline at the end", "--- a/noeol.txt\n+++ b/noeol.txt\n@@ -2,2 +2,2 @@\n y\n-z\n+z\n\\ No newline at end of file\n"},
		{"a newline at the end", "--- a/addeol.txt\n+++ b/addeol.txt\n@@ -1,2 +1,2 @@\n p\n-q\n\\ No newline at end of file\n+q\n"},
		{"a quoted name with a space", "diff --git a/spaced f.go b/spaced f.go\n--- a/spaced f.go\t\n+++ b/spaced f.go\t\n@@ -1 +1,2 @@\n package f\n+// more\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// git apply in a directory of its own.
			gitDir := t.TempDir()
			for p, text := range base {
				must(t, os.MkdirAll(filepath.Dir(filepath.Join(gitDir, p)), 0o755))
				must(t, os.WriteFile(filepath.Join(gitDir, p), []byte(text), 0o644))
			}
			cmd := exec.Command("git", "apply", "--unsafe-paths", "-")
			cmd.Dir = gitDir
			cmd.Stdin = strings.NewReader(c.patch)
			cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(gitDir))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git apply: %v: %s", err, out)
			}
			// apply_patch on the local tier.
			sb, dir := localSB(t)
			ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
			for p, text := range base {
				seed(t, ts, sb, p, text)
			}
			wantOK(t, call(t, ts, "apply_patch", map[string]any{"patch": c.patch}))
			want, got := hostTree(t, gitDir), hostTree(t, dir)
			if !maps.Equal(got, want) {
				t.Fatalf("apply_patch made\n%q\ngit apply made\n%q", got, want)
			}
		})
	}
}

// hostTree is every regular file under dir with its content.
func hostTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		m[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A file the patch would make larger than sandbox.MaxFileSize is refused
// before anything is written.
func TestApplyPatchRefusesFilesOverMaxFileSize(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a 256 MiB file")
	}
	sb, dir := localSB(t)
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	f, err := os.Create(filepath.Join(dir, "big.txt"))
	must(t, err)
	must(t, f.Truncate(sandbox.MaxFileSize)) // one long line of NULs
	must(t, f.Close())
	wantOK(t, call(t, ts, "read_file", map[string]any{"path": "big.txt", "limit": 1}))
	wantErrText(t, call(t, ts, "apply_patch", map[string]any{"patch": "--- a/big.txt\n+++ b/big.txt\n@@ -0,0 +1 @@\n+x\n"}), "over the 268435456 byte limit")
	if fi, err := os.Stat(filepath.Join(dir, "big.txt")); err != nil || fi.Size() != sandbox.MaxFileSize {
		t.Fatalf("big.txt: %v %v", fi, err)
	}
}

// manyAdds is a patch adding n one-line files.
func manyAdds(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "--- /dev/null\n+++ b/many/%d.txt\n@@ -0,0 +1 @@\n+%d\n", i, i)
	}
	return b.String()
}
