package local_test

// Attack tests for the local tier: every way a path, a link, a race or a
// command could reach outside the root, or could make hutch hang or grow.
//
// Layout of every attack environment (see newAttackEnv):
//
//	base/                  t.TempDir, resolved
//	base/parent-secret.txt the root's sibling (reached by "..")
//	base/outside/...       sentinel files outside the root
//	base/root/             the sandbox root
//
// Everything under base except root/ is snapshotted before the test (mode,
// size, mtime, content, link target) and compared after it, so a write,
// create, truncate or chmod outside the root fails the test.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

var bg = context.Background()

const (
	parentSecret  = "PARENT-SECRET"
	outsideSecret = "OUTSIDE-SECRET"
	outsideX      = "OUTSIDE-X"
	outsideDeep   = "OUTSIDE-DEEP"
	pwned         = "PWNED-BY-ATTACK"
)

type attackEnv struct {
	sb     *local.Sandbox
	base   string
	root   string
	out    string
	before map[string]fileState
}

type fileState struct {
	mode  fs.FileMode
	size  int64
	mtime time.Time
	data  string // content of a regular file, target of a link
}

func (s fileState) String() string {
	return fmt.Sprintf("{mode %v size %d mtime %v data %q}", s.mode, s.size, s.mtime.Format(time.RFC3339Nano), s.data)
}

// newAttackEnv builds the layout above and registers a cleanup that fails
// the test if anything outside the root changed.
func newAttackEnv(t *testing.T, opts local.Options) *attackEnv {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &attackEnv{base: base, root: filepath.Join(base, "root"), out: filepath.Join(base, "outside")}
	for _, d := range []string{e.root, e.out, filepath.Join(e.out, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range map[string]string{
		filepath.Join(base, "parent-secret.txt"):   parentSecret,
		filepath.Join(e.out, "secret.txt"):         outsideSecret,
		filepath.Join(e.out, "x.txt"):              outsideX,
		filepath.Join(e.out, "sub", "deep.txt"):    outsideDeep,
		filepath.Join(e.out, "private.txt"):        "OUTSIDE-PRIVATE",
		filepath.Join(e.out, "sub", "private.txt"): "OUTSIDE-SUB-PRIVATE",
	} {
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(p, "private.txt") {
			mode = 0o600
		}
		if err := os.WriteFile(p, []byte(c), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	// Make mtimes distinct from "now" so that a rewrite with the same
	// content is still noticed.
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	_ = filepath.WalkDir(base, func(p string, _ fs.DirEntry, err error) error {
		if err == nil && p != e.root {
			err = os.Chtimes(p, old, old)
		}
		return err
	})
	e.before = snapshotOutside(t, base, e.root)
	opts.Dir = e.root
	sb, err := local.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	e.sb = sb
	t.Cleanup(func() {
		_ = sb.Close()
		e.assertOutsideUnchanged(t)
	})
	return e
}

// snapshotOutside records everything under base except the root's subtree.
func snapshotOutside(t *testing.T, base, root string) map[string]fileState {
	t.Helper()
	snap := map[string]fileState{}
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fileState{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime()}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			st.data = string(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			st.data, err = os.Readlink(p)
			if err != nil {
				return err
			}
		}
		snap[p] = st
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", base, err)
	}
	return snap
}

func (e *attackEnv) assertOutsideUnchanged(t *testing.T) {
	t.Helper()
	now := snapshotOutside(t, e.base, e.root)
	for p, was := range e.before {
		is, ok := now[p]
		switch {
		case !ok:
			t.Errorf("outside the root: %s was removed", p)
		case is != was:
			t.Errorf("outside the root: %s changed: %v -> %v", p, was, is)
		}
	}
	for p, is := range now {
		if _, ok := e.before[p]; !ok {
			t.Errorf("outside the root: new entry %s %v", p, is)
		}
	}
}

// host is the host path of a root-relative path.
func (e *attackEnv) host(rel string) string { return filepath.Join(e.root, filepath.FromSlash(rel)) }

// expand replaces {out}, {root} and {base} in a link target.
func (e *attackEnv) expand(s string) string {
	return strings.NewReplacer("{out}", e.out, "{root}", e.root, "{base}", e.base).Replace(s)
}

func (e *attackEnv) symlink(t *testing.T, target, link string) {
	t.Helper()
	p := e.host(link)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e.expand(target), p); err != nil {
		t.Fatal(err)
	}
}

func (e *attackEnv) file(t *testing.T, rel, content string) {
	t.Helper()
	p := e.host(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rootFiles maps every entry under the root (host view, links not
// followed) to its content or link target ("<dir>" for directories).
func (e *attackEnv) rootFiles(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(e.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == e.root {
			return err
		}
		rel, _ := filepath.Rel(e.root, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			m[rel], err = os.Readlink(p)
			m[rel] = "-> " + m[rel]
		case d.IsDir():
			m[rel] = "<dir>"
		case d.Type().IsRegular():
			var b []byte
			b, err = os.ReadFile(p)
			m[rel] = string(b)
		default:
			m[rel] = "<" + d.Type().String() + ">"
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func wantIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want one matching %q", what, err, target)
	}
}

// within runs fn and fails the test if it does not return within d. A hung
// fn is left behind (the test fails anyway).
func within(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s did not return within %v (hang)", what, d)
	}
}

func shellOK(t *testing.T) {
	t.Helper()
	if err := local.Check(); err != nil {
		testenv.Missing(t, "the local tier's commands: %v", err)
	}
}

// ---------------------------------------------------------------------------
// Symbolic links

// TestAttackSymlinkEscape: every operation on a path that reaches outside
// through a symbolic link is ErrEscape and touches nothing.
func TestAttackSymlinkEscape(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string // regular files inside the root
		links map[string]string // link (root-relative) -> target ({out}, {root}, {base} expanded)
		paths []string          // each one must be refused by every operation
	}{
		{
			name:  "relative link to outside file",
			links: map[string]string{"l": "../outside/secret.txt"},
			paths: []string{"l", "./l", "sub/../l"},
		},
		{
			name:  "absolute link to outside file",
			links: map[string]string{"l": "{out}/secret.txt"},
			paths: []string{"l"},
		},
		{
			name:  "relative link to 0600 outside file",
			links: map[string]string{"l": "../outside/private.txt"},
			paths: []string{"l"},
		},
		{
			name:  "relative link to outside dir as intermediate component",
			links: map[string]string{"d": "../outside"},
			paths: []string{"d", "d/secret.txt", "d/x.txt", "d/sub", "d/sub/deep.txt", "d/new.txt", "d/newdir/new.txt", "d/sub/new.txt"},
		},
		{
			name:  "absolute link to outside dir as intermediate component",
			links: map[string]string{"d": "{out}"},
			paths: []string{"d", "d/secret.txt", "d/sub", "d/sub/deep.txt", "d/new.txt", "d/newdir/new.txt"},
		},
		{
			name:  "link to outside dir deep in the tree",
			links: map[string]string{"a/b/c/d": "../../../../outside/sub"},
			paths: []string{"a/b/c/d", "a/b/c/d/deep.txt", "a/b/c/d/new.txt"},
		},
		{
			name:  "dangling relative link pointing outside",
			links: map[string]string{"l": "../outside/created.txt"},
			paths: []string{"l"},
		},
		{
			name:  "dangling absolute link pointing outside",
			links: map[string]string{"l": "{out}/created.txt"},
			paths: []string{"l"},
		},
		{
			name:  "dangling link pointing into a missing outside dir",
			links: map[string]string{"l": "../outside/newdir/deeper/created.txt"},
			paths: []string{"l"},
		},
		{
			name:  "dangling link pointing into the root's parent",
			links: map[string]string{"l": "../created-in-parent.txt"},
			paths: []string{"l"},
		},
		{
			name:  "chain inside -> inside -> outside (file)",
			links: map[string]string{"a": "b", "b": "sub/c", "sub/c": "../../outside/secret.txt"},
			paths: []string{"a", "b", "sub/c"},
		},
		{
			name:  "chain inside -> inside -> outside (dir)",
			links: map[string]string{"da": "db", "db": "dc", "dc": "{out}"},
			paths: []string{"da/secret.txt", "da/new.txt", "db/sub/deep.txt", "da"},
		},
		{
			name:  "chain inside -> inside -> dangling outside",
			links: map[string]string{"a": "b", "b": "../outside/created.txt"},
			paths: []string{"a"},
		},
		{
			name:  "link to the root's parent",
			links: map[string]string{"up": ".."},
			paths: []string{"up", "up/parent-secret.txt", "up/outside/secret.txt", "up/new.txt", "up/root", "up/root/inside.txt"},
			files: map[string]string{"inside.txt": "INSIDE"},
		},
		{
			name:  "deep link to the root's parent",
			links: map[string]string{"a/b/up": "../../.."},
			paths: []string{"a/b/up", "a/b/up/parent-secret.txt", "a/b/up/new.txt"},
		},
		{
			name:  "link that leaves and comes back in",
			links: map[string]string{"l": "../root/inside.txt", "d": "../root"},
			files: map[string]string{"inside.txt": "INSIDE"},
			paths: []string{"l", "d", "d/inside.txt", "d/new.txt"},
		},
		{
			// Documented: os.Root never follows absolute links, even
			// when they point inside the root.
			name:  "absolute link pointing inside the root",
			links: map[string]string{"l": "{root}/inside.txt", "d": "{root}/dir", "dang": "{root}/missing.txt"},
			files: map[string]string{"inside.txt": "INSIDE", "dir/f.txt": "INSIDE-F"},
			paths: []string{"l", "d", "d/f.txt", "d/new.txt", "dang"},
		},
		{
			name:  "absolute link to /",
			links: map[string]string{"slash": "/"},
			paths: []string{"slash", "slash/etc/passwd", "slash/tmp/hutch-attack-created"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newAttackEnv(t, local.Options{})
			for f, content := range c.files {
				e.file(t, f, content)
			}
			for l, target := range c.links {
				e.symlink(t, target, l)
			}
			insideBefore := e.rootFiles(t)
			canExec := local.Check() == nil
			for _, p := range c.paths {
				data, err := e.sb.Read(bg, p)
				wantIs(t, "Read "+p, err, sandbox.ErrEscape)
				if data != nil {
					t.Errorf("Read %s returned data %q", p, data)
				}
				wantIs(t, "Write "+p, e.sb.Write(bg, p, []byte(pwned)), sandbox.ErrEscape)
				fi, err := e.sb.Stat(bg, p)
				wantIs(t, "Stat "+p, err, sandbox.ErrEscape)
				if fi != (sandbox.FileInfo{}) {
					t.Errorf("Stat %s returned %+v", p, fi)
				}
				if canExec {
					r, err := e.sb.Exec(bg, sandbox.Command{Args: []string{"pwd", "-P"}, Dir: p})
					wantIs(t, "Exec Dir "+p, err, sandbox.ErrEscape)
					if len(r.Stdout) != 0 {
						t.Errorf("Exec Dir %s ran: %q", p, r.Stdout)
					}
				}
				// Glob of the path itself and of what is under it: an
				// entry that resolves outside is dropped, never listed.
				for _, pat := range []string{p, p + "/*", p + "/**", p + "/**/"} {
					got, err := e.sb.Glob(bg, pat)
					if err != nil {
						t.Errorf("Glob(%q): %v", pat, err)
					}
					if len(got) != 0 {
						t.Errorf("Glob(%q) = %q, want nothing (it resolves outside)", pat, got)
					}
				}
			}
			if after := e.rootFiles(t); !maps.Equal(insideBefore, after) {
				t.Errorf("refused operations changed the root:\nbefore %q\nafter  %q", insideBefore, after)
			}
			e.assertOutsideUnchanged(t)
		})
	}
}

// TestAttackGlobAll: "**" over a tree full of hostile links lists exactly
// the entries that resolve inside, and terminates.
func TestAttackGlobAll(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	e.file(t, "in.txt", "IN")
	e.file(t, "dir/f.txt", "F")
	links := map[string]string{
		"lin":          "in.txt",    // inside file: listed
		"dir/lup":      "../in.txt", // inside file via "..": listed
		"lout":         "../outside/secret.txt",
		"labs":         "{out}/secret.txt",
		"labsin":       "{root}/in.txt", // absolute, refused even inside
		"ldang":        "missing.txt",
		"ldangout":     "../outside/missing.txt",
		"dout":         "../outside",
		"dabs":         "{out}",
		"dup":          "..",
		"dir/dself":    ".",  // inside dir: listed by "**/", not descended
		"dir/dback":    "..", // inside dir (the root): listed by "**/", not descended
		"loop":         "loop",
		"loopa":        "loopb",
		"loopb":        "loopa",
		"chain":        "chain2",
		"chain2":       "../outside/secret.txt",
		"dir/deepdout": "../../outside/sub",
	}
	for l, target := range links {
		e.symlink(t, target, l)
	}
	cases := []struct {
		pattern string
		want    []string
	}{
		{"**", []string{"dir/f.txt", "dir/lup", "in.txt", "lin"}},
		{"**/", []string{"dir", "dir/dback", "dir/dself"}},
		{"*", []string{"in.txt", "lin"}},
		{"*/", []string{"dir"}},
		{"**/*secret*", []string{}},
		{"**/deep.txt", []string{}},
		{"*/*.txt", []string{"dir/f.txt"}},
		{"*/secret.txt", []string{}},
		{"**/sub/**", []string{}},
		{"dup/**", []string{}},
		{"dir/dback/*", []string{"dir/dback/in.txt", "dir/dback/lin"}},
	}
	for _, c := range cases {
		var got []string
		var err error
		within(t, 5*time.Second, "Glob "+c.pattern, func() { got, err = e.sb.Glob(bg, c.pattern) })
		if err != nil || got == nil || !slices.Equal(got, c.want) {
			t.Errorf("Glob(%q) = %q, %v; want %q", c.pattern, got, err, c.want)
		}
	}
}

// TestAttackDanglingInside: a dangling link whose target is inside the root
// is followed by Write, which creates the target (and its directories).
func TestAttackDanglingInside(t *testing.T) {
	cases := []struct {
		name   string
		files  map[string]string
		links  map[string]string
		write  string // path written through
		target string // host file (root-relative) that must receive the data
	}{
		{"same dir", nil, map[string]string{"l": "new.txt"}, "l", "new.txt"},
		{"missing dirs", nil, map[string]string{"l": "sub/dir/new.txt"}, "l", "sub/dir/new.txt"},
		{"via ..", nil, map[string]string{"a/b/l": "../../c/new.txt"}, "a/b/l", "c/new.txt"},
		{"chain", nil, map[string]string{"a": "b", "b": "c/new.txt"}, "a", "c/new.txt"},
		{"existing target", map[string]string{"t.txt": "OLD"}, map[string]string{"l": "t.txt"}, "l", "t.txt"},
		{"link in a linked dir", nil, map[string]string{"dl": "real/deep", "real/deep/l": "../t.txt"}, "dl/l", "real/t.txt"},
		{"link in a linked dir via ../..", nil, map[string]string{"dl": "real/deep", "real/deep/l": "../../t.txt"}, "dl/l", "t.txt"},
		{"linked dir then a dangling link", map[string]string{"real/other.txt": "O"}, map[string]string{"dl": "real", "real/l": "new/n.txt"}, "dl/l", "real/new/n.txt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newAttackEnv(t, local.Options{})
			for f, content := range c.files {
				e.file(t, f, content)
			}
			for l, target := range c.links {
				e.symlink(t, target, l)
			}
			if err := os.MkdirAll(e.host("real/deep"), 0o755); err != nil {
				t.Fatal(err)
			}
			want := e.rootFiles(t)
			if err := e.sb.Write(bg, c.write, []byte("DATA")); err != nil {
				t.Fatalf("Write(%s): %v", c.write, err)
			}
			// The target got the data, every link is still a link.
			for dir := filepath.Dir(c.target); dir != "."; dir = filepath.Dir(dir) {
				if _, ok := want[dir]; !ok {
					want[dir] = "<dir>"
				}
			}
			want[c.target] = "DATA"
			if got := e.rootFiles(t); !maps.Equal(got, want) {
				t.Errorf("after Write(%s):\n got %q\nwant %q", c.write, got, want)
			}
			data, err := e.sb.Read(bg, c.write)
			if err != nil || string(data) != "DATA" {
				t.Errorf("Read(%s) after the write = %q, %v", c.write, data, err)
			}
			fi, err := e.sb.Stat(bg, c.write)
			if err != nil || fi.Kind != sandbox.KindFile || fi.Size != 4 || fi.Mode.Perm() != 0o644 {
				t.Errorf("Stat(%s) = %+v, %v", c.write, fi, err)
			}
		})
	}
}

// TestAttackSymlinkLoops: loops fail quickly, never hang, touch nothing.
func TestAttackSymlinkLoops(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	for l, target := range map[string]string{
		"self":     "self",
		"a":        "b",
		"b":        "a",
		"dl":       "dl/x", // a link that names itself as a directory
		"d1":       "d2/sub",
		"d2":       "d1/sub",
		"cyc/back": "..", // directory cycle: fine to follow, must not hang "**"
	} {
		e.symlink(t, target, l)
	}
	canExec := local.Check() == nil
	for _, p := range []string{"self", "a", "b", "self/x", "a/x", "dl", "dl/x", "d1", "d1/f.txt"} {
		within(t, 5*time.Second, "operations on "+p, func() {
			if data, err := e.sb.Read(bg, p); err == nil {
				t.Errorf("Read(%s) = %q, want an error", p, data)
			} else {
				wantIs(t, "Read "+p, err, syscall.ELOOP)
			}
			err := e.sb.Write(bg, p, []byte(pwned))
			wantIs(t, "Write "+p, err, syscall.ELOOP)
			_, err = e.sb.Stat(bg, p)
			wantIs(t, "Stat "+p, err, syscall.ELOOP)
			if canExec {
				_, err = e.sb.Exec(bg, sandbox.Command{Args: []string{"true"}, Dir: p})
				wantIs(t, "Exec Dir "+p, err, syscall.ELOOP)
			}
			if got, err := e.sb.Glob(bg, p+"/**"); err != nil || len(got) != 0 {
				t.Errorf("Glob(%s/**) = %q, %v; want nothing", p, got, err)
			}
		})
	}
	var got []string
	var err error
	within(t, 5*time.Second, "Glob **", func() { got, err = e.sb.Glob(bg, "**") })
	if err != nil || len(got) != 0 {
		t.Errorf("Glob(**) = %q, %v; want nothing", got, err)
	}
	within(t, 5*time.Second, "Glob **/", func() { got, err = e.sb.Glob(bg, "**/") })
	if want := []string{"cyc", "cyc/back"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Glob(**/) = %q, %v; want %q", got, err, want)
	}
	// Following the cycle a bounded number of times is fine and stays inside.
	if err := e.sb.Write(bg, "cyc/back/cyc/back/new.txt", []byte("N")); err != nil {
		t.Errorf("Write through the directory cycle: %v", err)
	}
	if b, err := os.ReadFile(e.host("new.txt")); err != nil || string(b) != "N" {
		t.Errorf("cycle write landed wrong: %q, %v", b, err)
	}
	for _, f := range []string{"self", "a", "b", "dl", "d1", "d2"} {
		if fi, err := os.Lstat(e.host(f)); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symlink: %v", f, err)
		}
	}
}

// ---------------------------------------------------------------------------
// Races

// TestAttackSwapTOCTOU swaps root/d between a real directory and a link to
// the outside directory (atomic rename exchange, as fast as possible) while
// other goroutines write, read, stat and glob through d. Nothing outside may
// change, no read may return outside content, and every write that
// succeeded must have landed in the real directory.
func TestAttackSwapTOCTOU(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	e.file(t, "d/x.txt", "INSIDE-X") // outside/x.txt is "OUTSIDE-X"
	e.symlink(t, "../outside", "alt")
	d, alt := e.host("d"), e.host("alt")
	const runFor = 1500 * time.Millisecond
	stopSwapping := startSwapping(t, d, alt)

	type stats struct {
		ops, ok, escape, other int // other: typed refusals other than ErrEscape
		written                []string
		otherErrs              map[string]int
		problems               []string
	}
	worker := func(w int, st *stats) {
		st.otherErrs = map[string]int{}
		note := func(err error) {
			switch {
			case err == nil:
				st.ok++
			case errors.Is(err, sandbox.ErrEscape):
				st.escape++
			case errors.Is(err, sandbox.ErrNotFound), errors.Is(err, sandbox.ErrNotDir), errors.Is(err, syscall.ELOOP):
				// The path is caught mid-swap: a typed refusal.
				st.other++
			default:
				// An untyped error: the race leaked an os.Root
				// internal error past the tier's mapping.
				st.other++
				st.otherErrs[err.Error()]++
			}
		}
		deadline := time.Now().Add(runFor)
		for i := 0; time.Now().Before(deadline); i++ {
			st.ops += 4
			name := fmt.Sprintf("d/w%d-%d.txt", w, i)
			err := e.sb.Write(bg, name, []byte("DATA"))
			note(err)
			if err == nil {
				st.written = append(st.written, name)
			}
			data, err := e.sb.Read(bg, "d/x.txt")
			note(err)
			if err == nil && string(data) != "INSIDE-X" {
				st.problems = append(st.problems, fmt.Sprintf("Read(d/x.txt) = %q", data))
			}
			fi, err := e.sb.Stat(bg, "d/x.txt")
			note(err)
			if err == nil && fi.Size != int64(len("INSIDE-X")) {
				st.problems = append(st.problems, fmt.Sprintf("Stat(d/x.txt) = %+v", fi))
			}
			got, err := e.sb.Glob(bg, "d/*")
			if err != nil {
				st.problems = append(st.problems, fmt.Sprintf("Glob(d/*): %v", err))
			}
			for _, g := range got {
				if g == "d/secret.txt" || g == "d/private.txt" {
					st.problems = append(st.problems, fmt.Sprintf("Glob(d/*) listed outside file %s", g))
				}
			}
		}
	}
	const workers = 3
	all := make([]stats, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker(w, &all[w])
		}()
	}
	wg.Wait()
	swaps := stopSwapping() // d is the real directory again

	var total stats
	total.otherErrs = map[string]int{}
	for _, st := range all {
		total.ops += st.ops
		total.ok += st.ok
		total.escape += st.escape
		total.other += st.other
		total.written = append(total.written, st.written...)
		total.problems = append(total.problems, st.problems...)
		for k, v := range st.otherErrs {
			total.otherErrs[k] += v
		}
	}
	t.Logf("%d swaps, %d operations: %d ok, %d ErrEscape, %d other refusals, %d files written", swaps, total.ops, total.ok, total.escape, total.other, len(total.written))
	for msg, n := range total.otherErrs {
		t.Logf("other error x%d: %s", n, msg)
	}
	for _, p := range total.problems {
		t.Errorf("race: %s", p)
	}
	if total.ops < 2000 || swaps < 100 {
		t.Errorf("race barely exercised: %d ops, %d swaps", total.ops, swaps)
	}
	if total.ok == 0 || total.escape == 0 {
		t.Errorf("race not exercised both ways: %d ok, %d escape", total.ok, total.escape)
	}
	if len(total.otherErrs) > 0 {
		t.Errorf("%d errors were not typed (sandbox.ErrNotFound, ErrNotDir or ELOOP): see the log", len(total.otherErrs))
	}
	// Write pins the directory it writes in, so even a write refused
	// mid-swap removes its temporary file.
	leftovers := 0
	for rel := range e.rootFiles(t) {
		if strings.HasPrefix(filepath.Base(rel), ".hutch-") {
			leftovers++
		}
	}
	if leftovers > 0 {
		t.Errorf("%d temporary files left inside the root by refused writes", leftovers)
	}
	for _, name := range total.written {
		if b, err := os.ReadFile(e.host(name)); err != nil || string(b) != "DATA" {
			t.Errorf("successful Write(%s) is not in the real directory: %q, %v", name, b, err)
		}
	}
	e.assertOutsideUnchanged(t)
}

// ---------------------------------------------------------------------------
// Hard links and special files

// TestAttackHardLinkOutside: a hard link inside the root to a file outside
// (planted by someone with access to both). Write must replace the link,
// never write through it, so the outside file keeps its content and mode.
func TestAttackHardLinkOutside(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	for _, c := range []struct{ link, outside, content string }{
		{"hl.txt", filepath.Join(e.out, "secret.txt"), outsideSecret},
		{"sub/hl-private.txt", filepath.Join(e.out, "private.txt"), "OUTSIDE-PRIVATE"},
	} {
		if err := os.MkdirAll(filepath.Dir(e.host(c.link)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(c.outside, e.host(c.link)); err != nil {
			t.Skipf("cannot hard link here: %v", err)
		}
		// Read goes through: a hard link IS the file (same inode), and
		// nothing on the inode says where its other names are. Whoever
		// can plant a hard link in the root already has the file; the
		// tier's promise is that it never *modifies* anything outside.
		data, err := e.sb.Read(bg, c.link)
		if err != nil || string(data) != c.content {
			t.Errorf("Read(%s) = %q, %v; want the linked content %q", c.link, data, err, c.content)
		}
		if err := e.sb.Write(bg, c.link, []byte("REPLACED")); err != nil {
			t.Fatalf("Write(%s): %v", c.link, err)
		}
		if b, err := os.ReadFile(c.outside); err != nil || string(b) != c.content {
			t.Errorf("outside file %s = %q, %v after Write through a hard link", c.outside, b, err)
		}
		out, _ := os.Stat(c.outside)
		in, err := os.Stat(e.host(c.link))
		if err != nil {
			t.Fatal(err)
		}
		if os.SameFile(out, in) {
			t.Errorf("%s is still the outside inode after Write", c.link)
		}
		if n := out.Sys().(*syscall.Stat_t).Nlink; n != 1 {
			t.Errorf("outside file still has %d links after Write replaced the hard link", n)
		}
		// The new file takes the link's permission bits, as for any
		// rewrite; the outside file's own bits are not touched.
		if in.Mode().Perm() != out.Mode().Perm() {
			t.Errorf("new file mode %v, want the replaced file's %v", in.Mode().Perm(), out.Mode().Perm())
		}
		if data, err := e.sb.Read(bg, c.link); err != nil || string(data) != "REPLACED" {
			t.Errorf("Read(%s) after Write = %q, %v", c.link, data, err)
		}
	}
	e.assertOutsideUnchanged(t)
}

// TestAttackFIFO: reading a named pipe planted in the root fails at once
// instead of blocking for a writer that never comes.
func TestAttackFIFO(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	if err := syscall.Mkfifo(e.host("fifo"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	e.symlink(t, "fifo", "lfifo")
	e.symlink(t, "../fifo", "dir/lfifo")
	if err := syscall.Mkfifo(e.host("fifo2"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Unblock anything that does hang, so the test process can exit.
	t.Cleanup(func() {
		for _, f := range []string{"fifo", "fifo2"} {
			if w, err := os.OpenFile(e.host(f), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
	})
	for _, p := range []string{"fifo", "lfifo", "dir/lfifo"} {
		within(t, 2*time.Second, "Read "+p, func() {
			data, err := e.sb.Read(bg, p)
			if err == nil || data != nil {
				t.Errorf("Read(%s) = %q, %v; want an error", p, data, err)
			} else if !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("Read(%s): %v; want \"not a regular file\"", p, err)
			}
		})
		within(t, 2*time.Second, "Stat "+p, func() {
			fi, err := e.sb.Stat(bg, p)
			if err != nil || fi.Kind != sandbox.KindOther || fi.Mode&fs.ModeNamedPipe == 0 {
				t.Errorf("Stat(%s) = %+v, %v; want a pipe of kind other", p, fi, err)
			}
		})
	}
	// Glob never opens a pipe as if it were a directory.
	for _, pat := range []string{"fifo/*", "fifo/**", "lfifo/*", "fifo/x", "*/x", "**/x", "fifo/"} {
		within(t, 2*time.Second, "Glob "+pat, func() {
			if got, err := e.sb.Glob(bg, pat); err != nil || len(got) != 0 {
				t.Errorf("Glob(%q) = %q, %v; want no match", pat, got, err)
			}
		})
	}
	// A pipe as the working directory is refused at once.
	if local.Check() == nil {
		for _, p := range []string{"fifo", "lfifo"} {
			within(t, 2*time.Second, "Exec Dir "+p, func() {
				_, err := e.sb.Exec(bg, sandbox.Command{Args: []string{"true"}, Dir: p})
				wantIs(t, "Exec Dir "+p, err, sandbox.ErrNotDir)
			})
		}
	}
	// Write replaces the pipe with a regular file; it never opens it.
	within(t, 2*time.Second, "Write fifo2", func() {
		if err := e.sb.Write(bg, "fifo2", []byte("F")); err != nil {
			t.Errorf("Write(fifo2): %v", err)
		}
	})
	if fi, err := os.Lstat(e.host("fifo2")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("fifo2 after Write: %v, %v; want a regular file", fi, err)
	}
	if got, err := e.sb.Glob(bg, "*"); err != nil || !slices.Equal(got, []string{"fifo", "fifo2", "lfifo"}) {
		t.Errorf("Glob(*) = %q, %v", got, err)
	}
}

// ---------------------------------------------------------------------------
// Malformed and unusual paths

// TestAttackInvalidPaths: NUL bytes, overlong components and overlong
// paths are ErrInvalidPath for every operation, and create nothing.
func TestAttackInvalidPaths(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	if err := os.MkdirAll(e.host("a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	canExec := local.Check() == nil
	long300 := strings.Repeat("n", 300)
	cases := map[string]string{
		"nul":                      "a\x00b",
		"only nul":                 "\x00",
		"nul in a directory":       "sub/\x00/x",
		"nul then traversal":       "x\x00/../../outside/secret.txt",
		"traversal then nul":       "../outside/secret.txt\x00",
		"nul in absolute path":     e.out + "\x00",
		"300-byte component":       long300,
		"300-byte directory":       long300 + "/x.txt",
		"300-byte deep":            "a/b/" + long300 + "/c.txt", // a/b exists
		"one byte over MaxPathLen": strings.Repeat("a/", sandbox.MaxPathLen/2) + "b",
		"long with traversal":      strings.Repeat("a/../", sandbox.MaxPathLen/5) + "../outside/secret.txt",
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := e.sb.Read(bg, p)
			wantIs(t, "Read", err, sandbox.ErrInvalidPath)
			wantIs(t, "Write", e.sb.Write(bg, p, []byte(pwned)), sandbox.ErrInvalidPath)
			_, err = e.sb.Stat(bg, p)
			wantIs(t, "Stat", err, sandbox.ErrInvalidPath)
			if canExec {
				_, err = e.sb.Exec(bg, sandbox.Command{Args: []string{"true"}, Dir: p})
				wantIs(t, "Exec Dir", err, sandbox.ErrInvalidPath)
			}
			got, err := e.sb.Glob(bg, p)
			if strings.Contains(p, "\x00") || len(p) > sandbox.MaxPathLen {
				wantIs(t, "Glob", err, sandbox.ErrInvalidPath)
			} else if err != nil || len(got) != 0 {
				// An overlong component cannot exist: no match.
				t.Errorf("Glob(%q) = %q, %v; want no match", p, got, err)
			}
		})
	}
	if got, want := e.rootFiles(t), map[string]string{"a": "<dir>", "a/b": "<dir>"}; !maps.Equal(got, want) {
		t.Errorf("refused paths changed the root: %q", got)
	}
}

// TestAttackLongPaths: the longest legal names and paths work, one byte
// more is refused.
func TestAttackLongPaths(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	name255 := strings.Repeat("x", 255)
	if err := e.sb.Write(bg, name255, []byte("255")); err != nil {
		t.Fatalf("Write of a 255-byte name: %v", err)
	}
	if b, err := os.ReadFile(e.host(name255)); err != nil || string(b) != "255" {
		t.Errorf("255-byte name on the host: %q, %v", b, err)
	}
	wantIs(t, "Write 256-byte name", e.sb.Write(bg, name255+"y", nil), sandbox.ErrInvalidPath)

	// A path of exactly MaxPathLen bytes made of 254-byte directories.
	// os.Root walks it one component at a time, so the kernel's PATH_MAX
	// never applies to the whole.
	var parts []string
	n := 0
	for i := 0; n+255 < sandbox.MaxPathLen-10; i++ {
		c := fmt.Sprintf("%03d", i) + strings.Repeat("d", 251)
		parts = append(parts, c)
		n += len(c) + 1
	}
	last := strings.Repeat("f", sandbox.MaxPathLen-n)
	long := strings.Join(append(parts, last), "/")
	if len(long) != sandbox.MaxPathLen {
		t.Fatalf("built a %d-byte path, want %d", len(long), sandbox.MaxPathLen)
	}
	if err := e.sb.Write(bg, long, []byte("LONG")); err != nil {
		t.Fatalf("Write of a %d-byte path: %v", len(long), err)
	}
	if b, err := e.sb.Read(bg, long); err != nil || string(b) != "LONG" {
		t.Errorf("Read of the %d-byte path = %q, %v", len(long), b, err)
	}
	if fi, err := e.sb.Stat(bg, long); err != nil || fi.Path != long || fi.Size != 4 {
		t.Errorf("Stat of the %d-byte path = %+v, %v", len(long), fi, err)
	}
	if got, err := e.sb.Glob(bg, "**/f*"); err != nil || !slices.Equal(got, []string{long}) {
		t.Errorf("Glob(**/f*) = %d matches, %v; want the long path", len(got), err)
	}
	wantIs(t, "Write of MaxPathLen+1 bytes", e.sb.Write(bg, long+"g", nil), sandbox.ErrInvalidPath)
	_, err := e.sb.Read(bg, long+"g")
	wantIs(t, "Read of MaxPathLen+1 bytes", err, sandbox.ErrInvalidPath)
	// Nothing else was created (the host walk cannot be used: the long
	// path's absolute form is over the kernel's PATH_MAX).
	if got, err := e.sb.Glob(bg, "**"); err != nil || !slices.Equal(got, []string{long, name255}) {
		t.Errorf("Glob(**) = %d matches, %v; want the 255-byte name and the long path", len(got), err)
	}
}

// TestAttackOddNames: names are bytes. Invalid UTF-8, control characters,
// leading dashes, backslashes and Unicode normalization variants are
// distinct, literal file names, round-trip exactly and stay in the root.
func TestAttackOddNames(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	names := []string{
		"\xff\xfe.txt",             // invalid UTF-8
		"bad\x80name",              // lone continuation byte
		"\xc3",                     // truncated sequence
		"a\nb.txt",                 // newline
		"cr\r",                     // carriage return
		"tab\tname",                // tab
		"\x1b[31mred",              // terminal escape
		"-rf",                      // leading dash
		"--help",                   // long option
		"-",                        // lone dash
		"\u00e9.txt",               // é, NFC
		"e\u0301.txt",              // é, NFD: a different name
		"\ufb01le",                 // "ﬁ" ligature, not "fi"
		"fi" + "le",                // plain
		"K",                        // Kelvin sign vs K
		"\u212a",                   // KELVIN SIGN
		"a\\b.txt",                 // backslash is a literal character
		"..\\outside\\x.txt",       // Windows-style traversal: literal
		"C:\\Windows",              // drive letter: literal
		"...",                      // not ".."
		"....",                     //
		" lead space",              //
		"trail space ",             //
		"trail.",                   //
		"$HOME",                    //
		"`id`",                     //
		"a;b|c&d",                  //
		"*?[",                      // glob characters in a name
		"\u202eevil.txt",           // right-to-left override
		"\u200bzero-width",         // zero-width space
		"\U0001F600.txt",           // emoji
		"null\u2400",               // SYMBOL FOR NULL, not NUL
		"%2e%2e%2fescape",          // URL-encoded "../": literal
		"\xc0\xae\xc0\xae",         // overlong UTF-8 ".." : literal bytes
		"\xef\xbc\x8e\xef\xbc\x8e", // fullwidth ".." : literal
	}
	want := map[string]string{}
	for i, n := range names {
		content := fmt.Sprintf("content %d", i)
		if err := e.sb.Write(bg, n, []byte(content)); err != nil {
			t.Errorf("Write(%q): %v", n, err)
			continue
		}
		want[n] = content
	}
	for n, content := range want {
		data, err := e.sb.Read(bg, n)
		if err != nil || string(data) != content {
			t.Errorf("Read(%q) = %q, %v; want %q", n, data, err, content)
		}
		fi, err := e.sb.Stat(bg, n)
		if err != nil || fi.Path != n || fi.Kind != sandbox.KindFile {
			t.Errorf("Stat(%q) = %+v, %v", n, fi, err)
		}
	}
	// On the host: exactly these names, byte for byte, all at the top.
	if got := e.rootFiles(t); !maps.Equal(got, want) {
		t.Errorf("host files differ:\n got %q\nwant %q", got, want)
	}
	got, err := e.sb.Glob(bg, "*")
	wantNames := slices.Sorted(func(yield func(string) bool) {
		for n := range want {
			if !yield(n) {
				return
			}
		}
	})
	if err != nil || !slices.Equal(got, wantNames) {
		t.Errorf("Glob(*) = %q, %v\nwant %q", got, err, wantNames)
	}
	// Distinct normalization variants really are distinct files.
	nfc, _ := e.sb.Read(bg, "\u00e9.txt")
	nfd, _ := e.sb.Read(bg, "e\u0301.txt")
	if bytes.Equal(nfc, nfd) {
		t.Errorf("NFC and NFD names share content %q", nfc)
	}
	// Names are also safe as Exec directories (a leading dash is not an
	// option to anything).
	if local.Check() == nil {
		for _, d := range []string{"-rf-dir", "--dir", "new\nline dir", "\xff dir"} {
			if err := e.sb.Write(bg, d+"/f", []byte("F")); err != nil {
				t.Fatal(err)
			}
			r, err := e.sb.Exec(bg, sandbox.Command{Args: []string{"cat", "f"}, Dir: d})
			if err != nil || string(r.Stdout) != "F" {
				t.Errorf("Exec in %q: %+v, %v", d, r, err)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Exec

// TestAttackExecDirLinks: a working directory reached through links is
// checked like a file path.
func TestAttackExecDirLinks(t *testing.T) {
	shellOK(t)
	e := newAttackEnv(t, local.Options{})
	e.file(t, "real/sub/f.txt", "F")
	e.symlink(t, "real", "lreal")
	e.symlink(t, "../outside", "lout")
	e.symlink(t, "lreal/sub", "lchain")
	r, err := e.sb.Exec(bg, sandbox.Command{Args: []string{"pwd", "-P"}, Dir: "lchain"})
	if err != nil || strings.TrimSpace(string(r.Stdout)) != e.host("real/sub") {
		t.Errorf("Exec in lchain: pwd -P = %q, %v; want %s", r.Stdout, err, e.host("real/sub"))
	}
	for _, d := range []string{"lout", "lout/sub", e.out, e.base, "/"} {
		_, err := e.sb.Exec(bg, sandbox.Command{Args: []string{"true"}, Dir: d})
		wantIs(t, "Exec Dir "+d, err, sandbox.ErrEscape)
	}
	// ".." right after a link is refused before anything else (see
	// TestDotDotAfterLinkIsRefused).
	_, err = e.sb.Exec(bg, sandbox.Command{Args: []string{"true"}, Dir: "lreal/../lout"})
	wantIs(t, "Exec Dir lreal/../lout", err, sandbox.ErrInvalidPath)
}

// TestAttackExecDirSwap races Exec's working directory check against a
// swap of the directory for a link to the outside: the command must never
// start outside the root.
func TestAttackExecDirSwap(t *testing.T) {
	shellOK(t)
	e := newAttackEnv(t, local.Options{})
	e.file(t, "d/marker", "IN")
	e.symlink(t, "../outside", "alt")
	d, alt := e.host("d"), e.host("alt")
	stopSwapping := startSwapping(t, d, alt)
	var ran, refused, outside int
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		r, err := e.sb.Exec(bg, sandbox.Command{Args: []string{"pwd", "-P"}, Dir: "d"})
		switch {
		case errors.Is(err, sandbox.ErrEscape), errors.Is(err, syscall.ELOOP), errors.Is(err, sandbox.ErrNotFound), errors.Is(err, sandbox.ErrNotDir):
			// Refused: os.Root saw the link, or the path changing under it.
			refused++
		case err != nil:
			t.Errorf("Exec: %v", err)
		default:
			ran++
			wd := strings.TrimSpace(string(r.Stdout))
			if wd != e.root && !strings.HasPrefix(wd, e.root+"/") {
				outside++
				if outside <= 3 {
					t.Errorf("command started outside the root, in %q", wd)
				}
			}
		}
	}
	stopSwapping()
	t.Logf("%d commands ran, %d refused, %d started outside", ran, refused, outside)
	if ran == 0 {
		t.Errorf("no command ran during the race")
	}
}

// TestAttackExecEnvSecrets: hutch's own environment never reaches the
// command; it gets exactly PATH, HOME, LANG and what was added.
func TestAttackExecEnvSecrets(t *testing.T) {
	shellOK(t)
	secret := fmt.Sprintf("hutch-secret-%d", time.Now().UnixNano())
	for _, k := range []string{"HUTCH_ATTACK_SECRET", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "SSH_AUTH_SOCK", "BASH_ENV", "ENV"} {
		t.Setenv(k, secret)
	}
	e := newAttackEnv(t, local.Options{Env: map[string]string{"OPT_VAR": "opt"}})
	want := map[string]string{"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v := os.Getenv(k); v != "" {
			want[k] = v
		}
	}
	want["OPT_VAR"] = "opt"
	want["CMD_VAR"] = "cmd"
	parse := func(s, sep string) map[string]string {
		m := map[string]string{}
		for _, kv := range strings.Split(strings.TrimSuffix(s, sep), sep) {
			if kv == "" {
				continue
			}
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		return m
	}
	cmdEnv := map[string]string{"CMD_VAR": "cmd"}

	r, err := e.sb.Exec(bg, sandbox.Command{Args: []string{"env"}, Env: cmdEnv})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("env: %+v, %v", r, err)
	}
	if strings.Contains(string(r.Stdout), secret) {
		t.Errorf("secret leaked to env: %q", r.Stdout)
	}
	if got := parse(string(r.Stdout), "\n"); !maps.Equal(got, want) {
		t.Errorf("env = %q\nwant %q", got, want)
	}

	r, err = e.sb.Exec(bg, sandbox.Command{Shell: "cat /proc/self/environ", Env: cmdEnv})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("cat /proc/self/environ: %+v, %v", r, err)
	}
	if strings.Contains(string(r.Stdout), secret) {
		t.Errorf("secret leaked to /proc/self/environ: %q", r.Stdout)
	}
	// dash exports PWD to its children; nothing else is added.
	wantSh := map[string]string{"PWD": e.root}
	for k, v := range want {
		wantSh[k] = v
	}
	if got := parse(string(r.Stdout), "\x00"); !maps.Equal(got, wantSh) {
		t.Errorf("/proc/self/environ = %q\nwant %q", got, wantSh)
	}
	// The command's own initial environment (PID 1's, read before the
	// shell changes anything) carries no secret either.
	r, err = e.sb.Exec(bg, sandbox.Command{Args: []string{"cat", "/proc/self/environ"}, Env: cmdEnv})
	if err != nil || strings.Contains(string(r.Stdout), secret) {
		t.Errorf("initial environ: %q, %v", r.Stdout, err)
	}
	if got := parse(string(r.Stdout), "\x00"); !maps.Equal(got, want) {
		t.Errorf("initial environ = %q\nwant %q", got, want)
	}
}

func uniqueMarker() string {
	return fmt.Sprintf("%d%09d", os.Getpid()%1000, time.Now().UnixNano()%1_000_000_000)
}

// TestAttackExecForkBomb: a command that forks as fast as it can is
// stopped by its timeout with every process it started.
func TestAttackExecForkBomb(t *testing.T) {
	shellOK(t)
	e := newAttackEnv(t, local.Options{})
	marker := "1000." + uniqueMarker()
	// The bomb prints how many sleeps it has started, to prove it forked.
	start := time.Now()
	r, err := e.sb.Exec(bg, sandbox.Command{
		Shell:   fmt.Sprintf("i=0; while :; do sleep %s & i=$((i+1)); echo $i; done", marker),
		Timeout: 500 * time.Millisecond,
	})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || r.Signal != "SIGKILL" || r.ExitCode != 137 {
		t.Errorf("want timed out by SIGKILL, got %+v", r)
	}
	if elapsed > 5*time.Second {
		t.Errorf("Exec returned %v after a 500ms timeout", elapsed)
	}
	lines := strings.Split(strings.TrimSpace(string(r.Stdout)), "\n")
	forks, _ := strconv.Atoi(lines[len(lines)-1])
	left := sandboxtest.Survivors(marker, 2*time.Second)
	t.Logf("fork bomb: %d sleeps started, Exec returned after %v, %d survivors", forks, elapsed, len(left))
	if len(left) > 0 {
		t.Errorf("%d processes survived the timeout, e.g. %q", len(left), left[:min(5, len(left))])
	}
	if forks < 5 {
		t.Errorf("the bomb never got going (%d sleeps started): the test proves nothing", forks)
	}
}

// TestAttackExecMemoryHog: a command that grabs hundreds of MiB and then
// spins is killed by its timeout.
func TestAttackExecMemoryHog(t *testing.T) {
	shellOK(t)
	if _, err := exec.LookPath("awk"); err != nil {
		testenv.Missing(t, "awk")
	}
	e := newAttackEnv(t, local.Options{})
	marker := "hog-" + uniqueMarker()
	var peakKiB atomic.Int64
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for _, p := range sandboxtest.Processes(marker) {
				pid, _, _ := strings.Cut(p, ":")
				if kib := vmRSSOf("/proc/" + pid + "/status"); kib > peakKiB.Load() {
					peakKiB.Store(kib)
				}
			}
		}
	}()
	// 128 MiB string by doubling (peak ~192 MiB), then spin forever. The
	// marker is an (unread) operand so the process can be found in /proc.
	prog := `BEGIN { s = "x"; while (length(s) < 134217728) s = s s; print "allocated"; fflush(); for (;;) {} }`
	start := time.Now()
	r, err := e.sb.Exec(bg, sandbox.Command{Args: []string{"awk", prog, marker}, Timeout: 4 * time.Second})
	elapsed := time.Since(start)
	close(stopWatch)
	<-watched
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || r.Signal != "SIGKILL" {
		t.Errorf("want timed out by SIGKILL, got %+v", r)
	}
	if string(r.Stdout) != "allocated\n" {
		t.Errorf("stdout %q: the hog did not finish allocating before the timeout", r.Stdout)
	}
	if elapsed > 9*time.Second {
		t.Errorf("Exec returned %v after a 4s timeout", elapsed)
	}
	t.Logf("memory hog: peak RSS seen %d MiB, Exec returned after %v", peakKiB.Load()>>10, elapsed)
	if peakKiB.Load() < 128<<10 {
		t.Errorf("peak RSS seen %d KiB: the hog was not hungry, the test proves nothing", peakKiB.Load())
	}
	if left := sandboxtest.Survivors(marker, 2*time.Second); len(left) > 0 {
		t.Errorf("hog survived: %q", left)
	}
}

// TestAttackExecClosedStdout: closing the output streams does not let a
// command outlive its timeout, and a child left holding them does not make
// Exec wait.
func TestAttackExecClosedStdout(t *testing.T) {
	shellOK(t)
	e := newAttackEnv(t, local.Options{})
	marker := "1000." + uniqueMarker()
	cases := []struct {
		name     string
		script   string
		timeout  time.Duration
		timedOut bool
		stdout   string
	}{
		{"closes stdout and stderr, sleeps", `echo before; exec >&- 2>&-; sleep %s1`, 500 * time.Millisecond, true, "before\n"},
		{"closes all streams, spins, ignores signals", `echo before; exec >&- 2>&- <&-; trap "" TERM INT HUP; while :; do :; done; : %s2`, 500 * time.Millisecond, true, "before\n"},
		{"redirects to /dev/null, child keeps the pipe", `sleep %s3 & exec >/dev/null 2>&1; sleep %s3`, 500 * time.Millisecond, true, ""},
		{"exits at once, daemon keeps the pipe", `setsid sleep %s4 & echo bye`, 20 * time.Second, false, "bye\n"},
		{"exits at once, double-forked daemon keeps the pipe", `(setsid sh -c 'sleep %s5' &) ; echo bye`, 20 * time.Second, false, "bye\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			script := strings.ReplaceAll(c.script, "%s", marker)
			start := time.Now()
			r, err := e.sb.Exec(bg, sandbox.Command{Shell: script, Timeout: c.timeout})
			elapsed := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if r.TimedOut != c.timedOut || string(r.Stdout) != c.stdout {
				t.Errorf("got timed out %v, stdout %q (%+v); want %v, %q", r.TimedOut, r.Stdout, r, c.timedOut, c.stdout)
			}
			if c.timedOut && r.Signal != "SIGKILL" {
				t.Errorf("signal %q, want SIGKILL", r.Signal)
			}
			// Well under exec.Cmd.WaitDelay (5s): Exec did not wait for a
			// pipe held open by a process that should be dead.
			if limit := min(c.timeout, time.Second) + 2*time.Second; elapsed > limit {
				t.Errorf("Exec returned after %v, want under %v", elapsed, limit)
			}
			if left := sandboxtest.Survivors(marker, 2*time.Second); len(left) > 0 {
				t.Errorf("processes survived: %q", left)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Output flood

func vmRSSOf(statusFile string) int64 { return statusKiB(statusFile, "VmRSS:") }

// vmHWM is this process's own peak RSS (the kernel's high-water mark for
// its address space).
func vmHWM() int64 { return statusKiB("/proc/self/status", "VmHWM:") }

func statusKiB(statusFile, field string) int64 {
	f, err := os.Open(statusFile)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kib
		}
	}
	return 0
}

const floodBytes = 1 << 30

// raceBuild reports whether this test binary was built with -race.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// floodProgram is the measured half of TestAttackExecOutputFlood, a
// program of this test binary (testenv.RegisterProgram): it floods a
// command's stdout and prints one HUTCH_FLOOD line of numbers, or of why
// it could not.
func floodProgram([]string) {
	fail := func(err error) {
		fmt.Printf("HUTCH_FLOOD error: %v\n", err)
		os.Exit(1)
	}
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	startMaxrss := ru0.Maxrss
	if err := local.Check(); err != nil {
		fmt.Printf("HUTCH_FLOOD unsupported: %v\n", err)
		return
	}
	dir, err := os.MkdirTemp("", "hutch-flood")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	sb, err := local.New(context.Background(), local.Options{Dir: dir})
	if err != nil {
		fail(err)
	}
	defer sb.Close()
	// Warm up the exec path so that its one-time costs are in the baseline.
	if _, err := sb.Exec(bg, sandbox.Command{Args: []string{"true"}}); err != nil {
		fail(err)
	}
	runtime.GC()
	debug.FreeOSMemory()
	before := vmRSSOf("/proc/self/status")
	start := time.Now()
	r, err := sb.Exec(bg, sandbox.Command{Args: []string{"head", "-c", strconv.Itoa(floodBytes), "/dev/zero"}, Timeout: 5 * time.Minute})
	dur := time.Since(start)
	if err != nil {
		fail(err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail(err)
	}
	fmt.Printf("HUTCH_FLOOD before_kib=%d maxrss_kib=%d hwm_kib=%d start_maxrss_kib=%d stdout_size=%d stdout_len=%d truncated=%v exit=%d timed_out=%v duration_ns=%d\n",
		before, ru.Maxrss, vmHWM(), startMaxrss, r.StdoutSize, len(r.Stdout), r.StdoutTruncated, r.ExitCode, r.TimedOut, dur.Nanoseconds())
}

func init() { testenv.RegisterProgram("flood", floodProgram) }

// TestAttackExecOutputFlood: 1 GiB of output keeps only the last MiB and
// hutch's memory stays flat. Measured in a fresh process (the test binary
// run as its flood program) so other tests' allocations do not blur it.
func TestAttackExecOutputFlood(t *testing.T) {
	shellOK(t)
	if testing.Short() {
		t.Skip("1 GiB flood skipped in -short mode")
	}
	// The child is started by a shell that forks it, not directly: the
	// kernel carries ru_maxrss across execve, and a process vforked from
	// this (big) test binary would start with this binary's peak as its
	// own. A child forked by a small shell starts near zero.
	cmd := exec.Command("/bin/sh", append([]string{"-c", `"$@"; exit $?`, "sh"}, testenv.ProgramArgv()...)...)
	cmd.Env = append(os.Environ(), testenv.ProgramEnv("flood"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "HUTCH_FLOOD ") {
			line = l
		}
	}
	if strings.HasPrefix(line, "HUTCH_FLOOD unsupported") {
		t.Skip(line)
	}
	var before, maxrss, hwm, startMaxrss, size, kept, exit, durNS int64
	var truncated, timedOut bool
	_, err = fmt.Sscanf(line, "HUTCH_FLOOD before_kib=%d maxrss_kib=%d hwm_kib=%d start_maxrss_kib=%d stdout_size=%d stdout_len=%d truncated=%t exit=%d timed_out=%t duration_ns=%d",
		&before, &maxrss, &hwm, &startMaxrss, &size, &kept, &truncated, &exit, &timedOut, &durNS)
	if err != nil {
		t.Fatalf("cannot parse the child's report %q: %v\n%s", line, err, out)
	}
	rise := maxrss - before
	t.Logf("flood: baseline RSS %d KiB, peak RSS (rusage) %d KiB, rise %d KiB = %.1f MiB (VmHWM %d KiB, maxrss at child start %d KiB); %d bytes counted, %d kept, took %v",
		before, maxrss, rise, float64(rise)/1024, hwm, startMaxrss, size, kept, time.Duration(durNS))
	if startMaxrss > before {
		t.Errorf("the child started with ru_maxrss %d KiB, above its baseline %d KiB: the peak would not be its own", startMaxrss, before)
	}
	if size != floodBytes || kept != sandbox.DefaultMaxOutput || !truncated || exit != 0 || timedOut {
		t.Errorf("flood result: size %d (want %d), kept %d (want %d), truncated %v, exit %d, timed out %v",
			size, floodBytes, kept, sandbox.DefaultMaxOutput, truncated, exit, timedOut)
	}
	if before <= 0 || maxrss <= 0 {
		t.Fatalf("no memory numbers: before %d, max %d", before, maxrss)
	}
	if raceBuild() {
		t.Skip("the race detector's shadow memory grows with the heap: the 16 MiB bound is checked without -race")
	}
	if rise >= 16<<10 {
		t.Errorf("hutch's peak RSS rose by %d KiB during a 1 GiB flood, want under 16 MiB", rise)
	}
}

// startSwapping exchanges a and b (renameat2 with RENAME_EXCHANGE) from a
// goroutine, again and again, until the returned stop is called; stop
// waits for it, puts a and b back as they were, and returns how many
// exchanges there were (a failed one fails the test). It skips the test
// where the kernel cannot exchange.
func startSwapping(t *testing.T, a, b string) (stop func() int64) {
	t.Helper()
	exchange := func() error {
		return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	}
	if err := exchange(); err != nil {
		t.Skipf("renameat2(RENAME_EXCHANGE) unsupported here: %v", err)
	}
	if err := exchange(); err != nil {
		t.Fatal(err)
	}
	var quit atomic.Bool
	var n atomic.Int64
	var swapErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !quit.Load() {
			if err := exchange(); err != nil {
				swapErr = err
				return
			}
			n.Add(1)
		}
	}()
	return func() int64 {
		quit.Store(true)
		<-done
		if swapErr == nil && n.Load()%2 == 1 {
			swapErr = exchange()
		}
		if swapErr != nil {
			t.Fatalf("swap failed: %v", swapErr)
		}
		return n.Load()
	}
}

// A directory of a write's or a move's path swapped for a link to .git
// while the call runs never gets the agent's file into .git: the file
// tools judge the path, then act in the directory they pinned only if it
// is still that path's, through no link. Found by a red-team pass: a
// move-only swap loop got write_file a/config onto .git/config, which the
// host's next git status ran (core.fsmonitor).
func TestAttackSwapIntoProtectedPath(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	e.file(t, ".git/HEAD", "ref: refs/heads/main\n") // no config, no hooks yet
	e.file(t, "a/keep", "")
	e.file(t, "other", "[core]\n\tfsmonitor = evil\n")
	e.symlink(t, ".git", "b")
	stop := startSwapping(t, e.host("a"), e.host("b")) // a: a directory, then a link to .git
	deadline := time.Now().Add(1500 * time.Millisecond)
	var writes, moves, ok int
	for time.Now().Before(deadline) {
		if e.sb.Write(bg, "a/config", []byte("[core]\n\tfsmonitor = evil\n")) == nil {
			ok++
		}
		writes++
		if e.sb.Rename(bg, "other", "a/config") == nil {
			ok++
			// Put a source back for the next try.
			os.WriteFile(e.host("other"), []byte("[core]\n\tfsmonitor = evil\n"), 0o644)
		}
		moves++
	}
	swaps := stop()
	t.Logf("%d swaps, %d writes, %d moves, %d went through (into the real a/)", swaps, writes, moves, ok)
	for _, p := range []string{".git/config", ".git/hooks"} {
		if _, err := os.Lstat(e.host(p)); err == nil {
			t.Errorf("%s was made through the swapped link", p)
		}
	}
	if swaps < 100 || writes < 100 {
		t.Errorf("race barely exercised: %d swaps, %d writes", swaps, writes)
	}
}
