package tierkit_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

var bg = context.Background()

func testFS() fstest.MapFS {
	return fstest.MapFS{
		"a.txt":        {Data: []byte("a")},
		"b/c.txt":      {Data: []byte("c")},
		"b/d/e.go":     {Data: []byte("e")},
		"b/d/f.txt":    {Data: []byte("f")},
		".hidden":      {Data: []byte("h")},
		"empty":        {Mode: fs.ModeDir | 0o755},
		"dangling":     {Data: []byte("nowhere"), Mode: fs.ModeSymlink},
		"filelink":     {Data: []byte("a.txt"), Mode: fs.ModeSymlink},
		"dirlink":      {Data: []byte("b/d"), Mode: fs.ModeSymlink},
		"outlink":      {Data: []byte("../etc/passwd"), Mode: fs.ModeSymlink},
		"weird name[]": {Data: []byte("w")},
	}
}

func TestGlobFS(t *testing.T) {
	tests := []struct {
		pattern  string
		dirsOnly bool
		want     []string
	}{
		{"*.txt", false, []string{"a.txt"}},
		{"**/*.txt", false, []string{"a.txt", "b/c.txt", "b/d/f.txt"}},
		{"b/**/*.go", false, []string{"b/d/e.go"}},
		// Files (and links to files) only; dangling and escaping links dropped.
		{"*", false, []string{".hidden", "a.txt", "filelink", "weird name[]"}},
		{"**", false, []string{".hidden", "a.txt", "b/c.txt", "b/d/e.go", "b/d/f.txt", "filelink", "weird name[]"}},
		// Directories only; the root is never a match, links to dirs are
		// matched but not descended into.
		{"**", true, []string{"b", "b/d", "dirlink", "empty"}},
		{"*", true, []string{"b", "dirlink", "empty"}},
		{".", true, []string{}},
		{".", false, []string{}},
		{"b", false, []string{}},
		{"b", true, []string{"b"}},
		{"a.txt", true, []string{}},
		{"a.txt", false, []string{"a.txt"}},
		{"dirlink/*", false, []string{"dirlink/e.go", "dirlink/f.txt"}},
		// Sorted and de-duplicated.
		{"{b/c.txt,a.txt,b/c.txt}", false, []string{"a.txt", "b/c.txt"}},
		{"{**/*.txt,b/**/*.txt,*.txt}", false, []string{"a.txt", "b/c.txt", "b/d/f.txt"}},
		{"weird name\\[\\]", false, []string{"weird name[]"}},
		// No match is an empty, non-nil list.
		{"*.none", false, []string{}},
		{"nope/**", false, []string{}},
		{"**/*.none", true, []string{}},
		// Brace alternatives that try to leave the root find nothing there.
		{"{..,b}/*.txt", false, []string{"b/c.txt"}},
		{"{../..,.}/*.txt", false, []string{"a.txt"}},
	}
	fsys := testFS()
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%v", tt.pattern, tt.dirsOnly), func(t *testing.T) {
			got, err := tierkit.GlobFS(bg, fsys, tt.pattern, tt.dirsOnly)
			if err != nil {
				t.Fatalf("GlobFS(%q, %v) error = %v", tt.pattern, tt.dirsOnly, err)
			}
			if got == nil {
				t.Fatalf("GlobFS(%q, %v) = nil, want non-nil", tt.pattern, tt.dirsOnly)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("GlobFS(%q, %v) = %q, want %q", tt.pattern, tt.dirsOnly, got, tt.want)
			}
		})
	}
}

// CleanPattern and GlobFS together, as the tiers use them.
func TestGlobFSWithCleanPattern(t *testing.T) {
	tests := []struct {
		pattern string
		want    []string
		err     error
	}{
		{"/r/**/", []string{"b", "b/d", "dirlink", "empty"}, nil},
		{"**/", []string{"b", "b/d", "dirlink", "empty"}, nil},
		{"./b/", []string{"b"}, nil},
		{"/r/b/*.txt", []string{"b/c.txt"}, nil},
		{"b/x/../d/*", []string{"b/d/e.go", "b/d/f.txt"}, nil},
		{"/r/", []string{}, nil},
		{"../*", nil, sandbox.ErrEscape},
		{"/etc/*", nil, sandbox.ErrEscape},
		{"[", nil, sandbox.ErrInvalidPath},
	}
	fsys := testFS()
	for _, tt := range tests {
		pat, dirs, err := sandbox.CleanPattern("/r", tt.pattern)
		var got []string
		if err == nil {
			got, err = tierkit.GlobFS(bg, fsys, pat, dirs)
		}
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("glob %q: error %v, want %v", tt.pattern, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("glob %q = %q, %v; want %q", tt.pattern, got, err, tt.want)
		}
	}
}

func TestGlobFSBadPattern(t *testing.T) {
	for _, p := range []string{"[", "{a", "a/[b", "}", `x\`} {
		got, err := tierkit.GlobFS(bg, testFS(), p, false)
		if !errors.Is(err, sandbox.ErrInvalidPath) || got != nil {
			t.Errorf("GlobFS(%q) = %q, %v; want ErrInvalidPath", p, got, err)
		}
	}
}

func TestGlobFSCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	for _, p := range []string{"**", "*.txt", "b/c.txt", "**/*.none", "nothing"} {
		got, err := tierkit.GlobFS(ctx, testFS(), p, false)
		if !errors.Is(err, context.Canceled) || got != nil {
			t.Errorf("GlobFS(%q) with a cancelled context = %q, %v; want context.Canceled", p, got, err)
		}
	}
}

// TestGlobFSCancelMidWalk cancels while the walk runs: it stops early.
func TestGlobFSCancelMidWalk(t *testing.T) {
	fsys := fstest.MapFS{}
	for i := range 200 {
		fsys[fmt.Sprintf("d%03d/f", i)] = &fstest.MapFile{}
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	counting := &cancelAfterFS{FS: fsys, n: 50, cancel: cancel}
	_, err := tierkit.GlobFS(ctx, counting, "**", false)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("GlobFS after cancellation = %v, want context.Canceled", err)
	}
	if counting.stats > 60 {
		t.Fatalf("walk went on for %d stats after cancellation at 50", counting.stats)
	}
}

// cancelAfterFS cancels a context once it has answered n Stat calls.
type cancelAfterFS struct {
	fs.FS
	n, stats int
	cancel   func()
}

func (c *cancelAfterFS) Stat(name string) (fs.FileInfo, error) {
	c.stats++
	if c.stats == c.n {
		c.cancel()
	}
	return fs.Stat(c.FS, name)
}

func TestGlobFSTooMany(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a large file system")
	}
	fsys := fstest.MapFS{}
	for i := range sandbox.MaxGlobResults {
		fsys[fmt.Sprintf("d%03d/f%05d", i%100, i)] = &fstest.MapFile{}
	}
	got, err := tierkit.GlobFS(bg, fsys, "**", false)
	if err != nil || len(got) != sandbox.MaxGlobResults {
		t.Fatalf("GlobFS with exactly MaxGlobResults matches = %d results, %v", len(got), err)
	}
	fsys["one/more"] = &fstest.MapFile{}
	got, err = tierkit.GlobFS(bg, fsys, "**", false)
	if !errors.Is(err, sandbox.ErrTooLarge) || got != nil {
		t.Fatalf("GlobFS with MaxGlobResults+1 matches = %d results, %v; want ErrTooLarge", len(got), err)
	}
	// Directories count separately: only 101 of them.
	if got, err := tierkit.GlobFS(bg, fsys, "**", true); err != nil || len(got) != 101 {
		t.Fatalf("GlobFS dirs = %d, %v", len(got), err)
	}
}

// messyFS lists directories in reverse order with every entry twice, as a
// file system is free to do; GlobFS must still sort and de-duplicate.
type messyFS struct{ fstest.MapFS }

func (m messyFS) ReadDir(name string) ([]fs.DirEntry, error) {
	es, err := m.MapFS.ReadDir(name)
	if err != nil {
		return nil, err
	}
	slices.Reverse(es)
	return append(es, es...), nil
}

func TestGlobFSSortsAndDedups(t *testing.T) {
	fsys := messyFS{fstest.MapFS{"a": {}, "b": {}, "c/d": {}, "c/e": {}}}
	for _, tt := range []struct {
		pattern  string
		dirsOnly bool
		want     []string
	}{
		{"*", false, []string{"a", "b"}},
		{"**", false, []string{"a", "b", "c/d", "c/e"}},
		{"**", true, []string{"c"}},
	} {
		got, err := tierkit.GlobFS(bg, fsys, tt.pattern, tt.dirsOnly)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("GlobFS(%q, %v) over an unsorted FS = %q, %v; want %q", tt.pattern, tt.dirsOnly, got, err, tt.want)
		}
	}
}

// countFS counts every Stat and ReadDir the glob walk makes.
type countFS struct {
	fstest.MapFS
	ops atomic.Int64
}

func (c *countFS) Stat(name string) (fs.FileInfo, error) {
	c.ops.Add(1)
	return c.MapFS.Stat(name)
}

func (c *countFS) ReadDir(name string) ([]fs.DirEntry, error) {
	c.ops.Add(1)
	return c.MapFS.ReadDir(name)
}

// GlobFS refuses a pattern whose {a,b} groups make more than
// MaxGlobAlternatives combinations, up front, with a reason and no walk:
// doublestar expands alternatives not separated by "/" combinatorially
// ("{a,b}" x 40, 200 bytes, would never finish), and glob is allowed in
// every mode, read_only included. Within the bound it works.
// Origin: security review.
func TestGlobFSBoundsAlternatives(t *testing.T) {
	fsys := &countFS{MapFS: fstest.MapFS{"a": {Data: []byte("x")}}}
	pattern, _, err := sandbox.CleanPattern("/", strings.Repeat("{a,b}", 16)) // 80 bytes
	if err != nil {
		t.Fatal(err)
	}
	// Refused up front, with a reason, and no walk at all.
	if _, err := tierkit.GlobFS(context.Background(), fsys, pattern, false); !errors.Is(err, sandbox.ErrInvalidPath) || !strings.Contains(err.Error(), "combinations") {
		t.Fatalf("a pattern of 65536 combinations: %v", err)
	}
	if n := fsys.ops.Load(); n > 0 {
		t.Fatalf("an 80-byte pattern made %d filesystem calls on a one-file tree (each extra {a,b} doubles it); bound the alternatives", n)
	}
	// Within the bound, it still works.
	got, err := tierkit.GlobFS(context.Background(), fsys, strings.Repeat("{a,b}", 1), false)
	if err != nil || len(got) != 1 {
		t.Fatalf("{a,b}: %v %v", got, err)
	}
}

func TestGlobCombinations(t *testing.T) {
	for p, want := range map[string]int{
		"x": 1, "{a,b}": 2, "{a,b}{c,d}": 4, "{a,{b,c}}": 3, "{a,b}/{c,d,e}": 6, `\{a,b}`: 1, "{}": 1, "{a,b": 2,
		strings.Repeat("{a,b}", 9): 512,
	} {
		fsys := fstest.MapFS{"a": {Data: []byte("x")}}
		_, err := tierkit.GlobFS(context.Background(), fsys, p, false)
		if tooMany := err != nil && strings.Contains(err.Error(), "combinations"); tooMany != (want > tierkit.MaxGlobAlternatives) {
			t.Errorf("%q (%d combinations): %v", p, want, err)
		}
	}
}

// A cancelled context stops GlobFS even for a pattern of alternatives
// without wildcards, which never lists a directory and never matches:
// every Stat and ReadDir of the walk checks the context.
// Origin: security review.
func TestGlobFSStopsOnCancelledContext(t *testing.T) {
	fsys := &countFS{MapFS: fstest.MapFS{"a": {Data: []byte("x")}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pattern, _, err := sandbox.CleanPattern("/", strings.Repeat("{a,b}", 6))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tierkit.GlobFS(ctx, fsys, pattern, false)
	if err == nil {
		t.Fatal("a cancelled glob succeeded")
	}
	if n := fsys.ops.Load(); n > 100 {
		t.Fatalf("a glob whose context was already cancelled still made %d filesystem calls", n)
	}
}

// GlobFS counts only distinct matches towards MaxGlobResults: repeated
// "**", which reaches each file once per way of splitting its path, does
// not make 100 distinct matches eight directories deep fail as "more
// than 100000 matches" (the contract: sorted, free of duplicates;
// ErrTooLarge only beyond MaxGlobResults matches).
// Origin: security review.
func TestGlobFSDuplicatesDoNotCountTowardsLimit(t *testing.T) {
	m := fstest.MapFS{}
	for i := range 100 {
		m[fmt.Sprintf("a/b/c/d/e/f/g/h/f%d", i)] = &fstest.MapFile{Data: []byte("x")}
	}
	got, err := tierkit.GlobFS(context.Background(), m, "**/**/**/**/**/**/*", false)
	if err != nil {
		t.Fatalf("100 distinct matches: %v", err)
	}
	if len(got) != 100 {
		t.Fatalf("got %d matches, want 100", len(got))
	}
}
