package tool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
	"github.com/hutchsandbox/hutch/tool"
)

// TestListShowsEntriesBounded: kinds, sizes and links, depth breadth
// first, the bound with its count, links never descended.
func TestListShowsEntriesBounded(t *testing.T) {
	sb, dir := localSB(t)
	host := func(p string) string { return filepath.Join(dir, p) }
	must(t, os.MkdirAll(host("a/b/c"), 0o755))
	must(t, os.WriteFile(host("a/f.txt"), []byte("12345"), 0o644))
	must(t, os.WriteFile(host("a/b/c/deep.txt"), []byte("x"), 0o644))
	must(t, os.Symlink("b", host("a/lb")))
	must(t, os.Symlink("/etc", host("a/out")))
	ts := toolset(t, sb, permission.Config{})

	out := call(t, ts, "list", map[string]any{"path": "a"})
	wantOK(t, out)
	got := map[string]tool.ListEntry{}
	for _, e := range out.Data.(tool.ListResult).Entries {
		got[e.Path] = e
	}
	want := map[string]tool.ListEntry{
		"a/b":     {Path: "a/b", Kind: "dir"},
		"a/f.txt": {Path: "a/f.txt", Kind: "file", Size: 5},
		"a/lb":    {Path: "a/lb", Kind: "dir", Link: true},
		"a/out":   {Path: "a/out", Kind: "other", Link: true},
	}
	if len(got) != len(want) {
		t.Errorf("list a = %+v, want %+v", got, want)
	}
	for p, w := range want {
		if g := got[p]; g.Path != w.Path || g.Kind != w.Kind || g.Link != w.Link || (w.Kind == "file" && g.Size != w.Size) {
			t.Errorf("list a: %s = %+v, want %+v", p, g, w)
		}
	}
	deep := call(t, ts, "list", map[string]any{"path": "a", "depth": 3})
	wantOK(t, deep)
	var paths []string
	for _, e := range deep.Data.(tool.ListResult).Entries {
		paths = append(paths, e.Path)
	}
	if s := strings.Join(paths, " "); !strings.Contains(s, "a/b/c/deep.txt") || strings.Contains(s, "a/lb/c") {
		t.Errorf("depth 3 = %s: want a/b/c/deep.txt, and nothing below the link a/lb", s)
	}

	must(t, os.Mkdir(host("many"), 0o755))
	for i := range tool.MaxListEntries + 5 {
		must(t, os.WriteFile(host(fmt.Sprintf("many/%04d", i)), nil, 0o644))
	}
	big := call(t, ts, "list", map[string]any{"path": "many"})
	wantOK(t, big)
	if r := big.Data.(tool.ListResult); len(r.Entries) != tool.MaxListEntries || r.More != 5 || !strings.Contains(r.Note, "5 more") {
		t.Errorf("list of %d entries: %d shown, more %d, note %q", tool.MaxListEntries+5, len(r.Entries), r.More, r.Note)
	}

	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "../"}, "escapes"},
		{map[string]any{"path": "a/out"}, "escapes"},
		{map[string]any{"path": "a/f.txt"}, "not a directory"},
		{map[string]any{"path": "a", "depth": tool.MaxListDepth + 1}, "depth must be"},
		{map[string]any{"path": "a\x00"}, "NUL"},
	} {
		wantErrText(t, call(t, ts, "list", c.args), c.want)
	}
}

// TestManageToolsGuarded: move, delete and mkdir act inside the root
// only, replace a file only after it was read, never delete the root, and
// need recursive for a tree.
func TestManageToolsGuarded(t *testing.T) {
	sb, dir := localSB(t)
	host := func(p string) string { return filepath.Join(dir, p) }
	must(t, os.WriteFile(host("a.txt"), []byte("A"), 0o644))
	must(t, os.WriteFile(host("b.txt"), []byte("B"), 0o644))
	must(t, os.MkdirAll(host("tree/x"), 0o755))
	must(t, os.Symlink("/tmp", host("out")))
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})

	steps := []struct {
		name string
		tool string
		args map[string]any
		want string // "" is success
	}{
		{"move to a new directory", "move", map[string]any{"from": "a.txt", "to": "new/dir/a.txt"}, ""},
		{"move over a file never read", "move", map[string]any{"from": "new/dir/a.txt", "to": "b.txt"}, "read b.txt before overwriting it"},
		{"move out through a link", "move", map[string]any{"from": "new/dir/a.txt", "to": "out/a.txt"}, "escapes"},
		{"move out by dot-dot", "move", map[string]any{"from": "new/dir/a.txt", "to": "../a.txt"}, "escapes"},
		{"move in from outside", "move", map[string]any{"from": "/etc/hostname", "to": "stolen"}, "escapes"},
		{"move the root", "move", map[string]any{"from": ".", "to": "x"}, "root"},
		{"mkdir", "mkdir", map[string]any{"path": "made/deep"}, ""},
		{"mkdir over a file", "mkdir", map[string]any{"path": "b.txt"}, "not a directory"},
		{"mkdir outside", "mkdir", map[string]any{"path": "out/x"}, "escapes"},
		{"delete a tree without recursive", "delete", map[string]any{"path": "tree"}, "recursive"},
		{"delete the root", "delete", map[string]any{"path": ".", "recursive": true}, "root"},
		{"delete the root by dot-dot", "delete", map[string]any{"path": "tree/..", "recursive": true}, "root"},
		{"delete the root by its path", "delete", map[string]any{"path": sb.Root(), "recursive": true}, "root"},
		{"delete outside", "delete", map[string]any{"path": "out/x", "recursive": true}, "escapes"},
		{"delete a tree", "delete", map[string]any{"path": "tree", "recursive": true}, ""},
		{"delete a link", "delete", map[string]any{"path": "out"}, ""},
		{"delete what is gone", "delete", map[string]any{"path": "tree"}, "no such file"},
	}
	for _, s := range steps {
		out := call(t, ts, s.tool, s.args)
		if s.want == "" {
			if out.IsError {
				t.Errorf("%s: %s", s.name, out.Text)
			}
			continue
		}
		if !out.IsError || !strings.Contains(out.Text, s.want) {
			t.Errorf("%s: got %q (error %v), want an error with %q", s.name, out.Text, out.IsError, s.want)
		}
	}
	// Read, then the move replaces it; a later write of it is not stale.
	wantOK(t, call(t, ts, "read_file", map[string]any{"path": "b.txt"}))
	wantOK(t, call(t, ts, "move", map[string]any{"from": "new/dir/a.txt", "to": "b.txt"}))
	if b, _ := os.ReadFile(host("b.txt")); string(b) != "A" {
		t.Errorf("b.txt = %q after the move, want A", b)
	}
	wantOK(t, call(t, ts, "write_file", map[string]any{"path": "b.txt", "content": "after"}))
	if _, err := os.Lstat("/tmp"); err != nil {
		t.Fatalf("the link's target went with the link: %v", err)
	}
}

// TestManageToolsOffered: in read_only mode only list is offered; on a
// tier that cannot manage, none of them.
func TestManageToolsOffered(t *testing.T) {
	vsb := virtual.New(virtual.Options{})
	t.Cleanup(func() { _ = vsb.Close() })
	ro := names(toolset(t, vsb, permission.Config{}))
	if !strings.Contains(strings.Join(ro, " "), "list") || strings.Contains(strings.Join(ro, " "), "delete") {
		t.Errorf("read_only offers %v: want list, no delete", ro)
	}
	ts := toolset(t, noManage{vsb}, permission.Config{Mode: permission.Auto})
	for _, n := range names(ts) {
		if n == "list" || n == "move" || n == "delete" || n == "mkdir" {
			t.Errorf("a sandbox without manage offers %s", n)
		}
	}
}

type noManage struct{ sandbox.Sandbox }

func (n noManage) Supports(c sandbox.Feature) bool {
	return c != sandbox.FeatureManage && n.Sandbox.Supports(c)
}
