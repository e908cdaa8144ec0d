package sandboxtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
)

// testManage runs the checks of List, Mkdir, Remove and Rename on a tier
// that supports them; on one that does not, each must say so
// (ErrUnsupported) and change nothing.
func testManage(t *testing.T, fresh Factory) {
	if sb := fresh(t); !sb.Supports(sandbox.FeatureManage) {
		mustWrite(t, sb, "f", "x")
		_, err := sb.List(bg, ".")
		wantErr(t, "List", err, sandbox.ErrUnsupported)
		wantErr(t, "Mkdir", sb.Mkdir(bg, "d"), sandbox.ErrUnsupported)
		wantErr(t, "Remove", sb.Remove(bg, "f", false), sandbox.ErrUnsupported)
		wantErr(t, "Rename", sb.Rename(bg, "f", "g"), sandbox.ErrUnsupported)
		if got := mustRead(t, sb, "f"); got != "x" {
			t.Errorf("f = %q after unsupported operations", got)
		}
		return
	}
	t.Run("List", func(t *testing.T) { testList(t, fresh(t)) })
	t.Run("Mkdir", func(t *testing.T) { testMkdir(t, fresh(t)) })
	t.Run("Remove", func(t *testing.T) { testRemove(t, fresh(t)) })
	t.Run("Rename", func(t *testing.T) { testRename(t, fresh(t)) })
	t.Run("Escapes", func(t *testing.T) { testManageEscapes(t, fresh(t)) })
}

// names is the paths of entries, for messages and comparisons.
func names(ents []sandbox.FileInfo) []string {
	out := make([]string, len(ents))
	for i, e := range ents {
		out[i] = e.Path
	}
	return out
}

// testList: a directory's entries, sorted, root-relative, with kind and
// size, never descending; the errors of a path that is no directory.
func testList(t *testing.T, sb sandbox.Sandbox) {
	mustWrite(t, sb, "l/b.txt", "12345")
	mustWrite(t, sb, "l/a/deep/f", "x")
	mustWrite(t, sb, "l/c\xff", "raw")
	ents, err := sb.List(bg, "l")
	if err != nil {
		t.Fatalf("List(l): %v", err)
	}
	if got, want := names(ents), []string{"l/a", "l/b.txt", "l/c\xff"}; !slices.Equal(got, want) {
		t.Fatalf("List(l) = %q, want %q", got, want)
	}
	if ents[0].Kind != sandbox.KindDir || ents[1].Kind != sandbox.KindFile || ents[1].Size != 5 || ents[1].Link {
		t.Errorf("List(l) entries = %+v", ents)
	}
	if root, err := sb.List(bg, "."); err != nil || !slices.Contains(names(root), "l") {
		t.Errorf("List(root) = %q, %v; want it to hold l", names(root), err)
	}
	if empty, err := sb.List(bg, "l/a/deep/"); err != nil || len(empty) != 1 {
		t.Errorf("List(l/a/deep/) = %+v, %v", empty, err)
	}
	mustMkdir(t, sb, "l/empty")
	if empty, err := sb.List(bg, "l/empty"); err != nil || empty == nil || len(empty) != 0 {
		t.Errorf("List(empty dir) = %#v, %v; want an empty, non-nil list", empty, err)
	}
	_, err = sb.List(bg, "l/b.txt")
	wantErr(t, "List(file)", err, sandbox.ErrNotDir)
	_, err = sb.List(bg, "l/missing")
	wantErr(t, "List(missing)", err, sandbox.ErrNotFound)
}

func mustMkdir(t *testing.T, sb sandbox.Sandbox, p string) {
	t.Helper()
	if err := sb.Mkdir(bg, p); err != nil {
		t.Fatalf("Mkdir(%q): %v", p, err)
	}
}

// testMkdir: parents made, an existing directory no error, a file in the
// way ErrNotDir and left alone.
func testMkdir(t *testing.T, sb sandbox.Sandbox) {
	mustMkdir(t, sb, "m/n/o")
	if fi, err := sb.Stat(bg, "m/n/o"); err != nil || fi.Kind != sandbox.KindDir {
		t.Fatalf("Stat after Mkdir = %+v, %v", fi, err)
	}
	mustMkdir(t, sb, "m/n/o")
	mustMkdir(t, sb, ".")
	mustWrite(t, sb, "m/f", "keep")
	wantErr(t, "Mkdir(file)", sb.Mkdir(bg, "m/f"), sandbox.ErrNotDir)
	if err := sb.Mkdir(bg, "m/f/below"); err == nil {
		t.Error("Mkdir below a file should fail")
	}
	if got := mustRead(t, sb, "m/f"); got != "keep" {
		t.Errorf("a refused Mkdir changed m/f to %q", got)
	}
}

// testRemove: files, empty directories, trees only when recursive, never
// the root; what is next to the removed entry stays.
func testRemove(t *testing.T, sb sandbox.Sandbox) {
	mustWrite(t, sb, "r/f", "x")
	mustWrite(t, sb, "r/keep", "k")
	mustWrite(t, sb, "r/tree/a/b/c", "deep")
	mustMkdir(t, sb, "r/empty")
	cases := []struct {
		name      string
		path      string
		recursive bool
		want      error // nil: removed
	}{
		{"file", "r/f", false, nil},
		{"missing", "r/f", false, sandbox.ErrNotFound},
		{"empty directory", "r/empty", false, nil},
		{"tree without recursive", "r/tree", false, sandbox.ErrNotEmpty},
		{"file named as a directory", "r/keep/", false, sandbox.ErrNotDir},
		{"tree", "r/tree", true, nil},
		{"root", ".", true, sandbox.ErrInvalidPath},
		{"root by slash", "./", true, sandbox.ErrInvalidPath},
		{"root by absolute path", sb.Root(), true, sandbox.ErrInvalidPath},
		{"root by dot-dot", "r/..", true, sandbox.ErrInvalidPath},
	}
	for _, c := range cases {
		err := sb.Remove(bg, c.path, c.recursive)
		if c.want != nil {
			wantErr(t, c.name, err, c.want)
			continue
		}
		if err != nil {
			t.Errorf("%s: Remove(%q): %v", c.name, c.path, err)
		}
		if _, err := sb.Stat(bg, c.path); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("%s: %q still there after Remove: %v", c.name, c.path, err)
		}
	}
	if got := mustRead(t, sb, "r/keep"); got != "k" {
		t.Errorf("r/keep = %q after its neighbours were removed", got)
	}
	if fi, err := sb.Stat(bg, "."); err != nil || fi.Kind != sandbox.KindDir {
		t.Errorf("the root after the refused removes: %+v, %v", fi, err)
	}
}

// testRename: files and trees move (parents made), a file at the target
// is replaced, a directory there refused, a directory never moves below
// itself, the root never moves.
func testRename(t *testing.T, sb sandbox.Sandbox) {
	mustWrite(t, sb, "mv/a", "A")
	mustWrite(t, sb, "mv/b", "B")
	mustWrite(t, sb, "mv/dir/x", "X")
	mustWrite(t, sb, "mv/dir/sub/y", "Y")
	mustMkdir(t, sb, "mv/occupied")
	steps := []struct {
		name     string
		from, to string
		want     error
	}{
		{"file to a new directory", "mv/a", "mv/new/deeper/a2", nil},
		{"file over a file", "mv/b", "mv/new/deeper/a2", nil},
		{"tree", "mv/dir", "mv/moved", nil},
		{"missing", "mv/a", "mv/z", sandbox.ErrNotFound},
		{"onto a directory", "mv/moved/x", "mv/occupied", sandbox.ErrIsDir},
		{"below itself", "mv/moved", "mv/moved/inside", sandbox.ErrInvalidPath},
		{"onto itself", "mv/moved", "mv/./moved", sandbox.ErrInvalidPath},
		{"the root", ".", "mv/root", sandbox.ErrInvalidPath},
		{"onto the root", "mv/moved/x", ".", sandbox.ErrInvalidPath},
	}
	for _, s := range steps {
		err := sb.Rename(bg, s.from, s.to)
		if s.want != nil {
			wantErr(t, s.name, err, s.want)
		} else if err != nil {
			t.Errorf("%s: Rename(%q, %q): %v", s.name, s.from, s.to, err)
		}
	}
	want := map[string]string{"mv/new/deeper/a2": "B", "mv/moved/x": "X", "mv/moved/sub/y": "Y"}
	for p, data := range want {
		if b, err := sb.Read(bg, p); err != nil || string(b) != data {
			t.Errorf("after the moves, Read(%q) = %q, %v; want %q", p, b, err, data)
		}
	}
	for _, gone := range []string{"mv/a", "mv/b", "mv/dir"} {
		if _, err := sb.Stat(bg, gone); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("%s still there after it moved: %v", gone, err)
		}
	}
	if fi, err := sb.Stat(bg, "mv/occupied"); err != nil || fi.Kind != sandbox.KindDir {
		t.Errorf("the directory a file was refused onto: %+v, %v", fi, err)
	}
}

// testManageEscapes: no path outside the root is listed, made, removed or
// moved to or from.
func testManageEscapes(t *testing.T, sb sandbox.Sandbox) {
	mustWrite(t, sb, "inside", "x")
	paths := []string{"..", "../x", "a/../../x", "../" + lastName(sb.Root()) + "-sibling"}
	if sb.Root() != "/" {
		paths = append(paths, "/etc", "/tmp/hutch-escape-target")
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			_, err := sb.List(bg, p)
			wantErr(t, "List", err, sandbox.ErrEscape)
			wantErr(t, "Mkdir", sb.Mkdir(bg, p), sandbox.ErrEscape)
			wantErr(t, "Remove", sb.Remove(bg, p, true), sandbox.ErrEscape)
			wantErr(t, "Rename from", sb.Rename(bg, p, "in"), sandbox.ErrEscape)
			wantErr(t, "Rename to", sb.Rename(bg, "inside", p), sandbox.ErrEscape)
		})
	}
	if got := mustRead(t, sb, "inside"); got != "x" {
		t.Errorf("inside = %q after refused moves", got)
	}
	for name, p := range map[string]string{"empty": "", "nul": "a\x00b", "too long": strings.Repeat("a/", sandbox.MaxPathLen)} {
		_, err := sb.List(bg, p)
		wantErr(t, fmt.Sprintf("List(%s)", name), err, sandbox.ErrInvalidPath)
		wantErr(t, fmt.Sprintf("Mkdir(%s)", name), sb.Mkdir(bg, p), sandbox.ErrInvalidPath)
		wantErr(t, fmt.Sprintf("Remove(%s)", name), sb.Remove(bg, p, false), sandbox.ErrInvalidPath)
		wantErr(t, fmt.Sprintf("Rename(%s)", name), sb.Rename(bg, "inside", p), sandbox.ErrInvalidPath)
	}
}

func lastName(p string) string {
	if i := strings.LastIndexByte(strings.TrimSuffix(p, "/"), '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}
