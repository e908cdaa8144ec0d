package sandbox_test

// Regression tests for defects found in a security review: each one failed
// before its fix.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/hutchsandbox/hutch/sandbox"
)

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

// doublestar expands brace alternatives combinatorially when they are not
// separated by "/": "{a,b}" repeated k times costs 2^k stats. A 200-byte
// pattern ("{a,b}" x 40) never finishes. glob is allowed in every mode,
// read_only included, so any MCP client can pin a CPU core forever.
func TestReviewGlobAlternationsExponential(t *testing.T) {
	fsys := &countFS{MapFS: fstest.MapFS{"a": {Data: []byte("x")}}}
	pattern, _, err := sandbox.CleanPattern("/", strings.Repeat("{a,b}", 16)) // 80 bytes
	if err != nil {
		t.Fatal(err)
	}
	// Refused up front, with a reason, and no walk at all.
	if _, err := sandbox.GlobFS(context.Background(), fsys, pattern, false); !errors.Is(err, sandbox.ErrInvalidPath) || !strings.Contains(err.Error(), "combinations") {
		t.Fatalf("a pattern of 65536 combinations: %v", err)
	}
	if n := fsys.ops.Load(); n > 0 {
		t.Fatalf("an 80-byte pattern made %d filesystem calls on a one-file tree (each extra {a,b} doubles it); bound the alternatives", n)
	}
	// Within the bound, it still works.
	got, err := sandbox.GlobFS(context.Background(), fsys, strings.Repeat("{a,b}", 1), false)
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
		_, err := sandbox.GlobFS(context.Background(), fsys, p, false)
		if tooMany := err != nil && strings.Contains(err.Error(), "combinations"); tooMany != (want > sandbox.MaxGlobAlternatives) {
			t.Errorf("%q (%d combinations): %v", p, want, err)
		}
	}
}

// The walk only looks at ctx in ReadDir and in the match callback. A
// pattern of alternatives without wildcards never lists a directory and
// never matches, so a cancelled or timed-out context does not stop it: the
// call runs to completion (which, with the pattern above, is never).
func TestReviewGlobIgnoresCancelledContext(t *testing.T) {
	fsys := &countFS{MapFS: fstest.MapFS{"a": {Data: []byte("x")}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pattern, _, err := sandbox.CleanPattern("/", strings.Repeat("{a,b}", 6))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sandbox.GlobFS(ctx, fsys, pattern, false)
	if err == nil {
		t.Fatal("a cancelled glob succeeded")
	}
	if n := fsys.ops.Load(); n > 100 {
		t.Fatalf("a glob whose context was already cancelled still made %d filesystem calls", n)
	}
}

// GlobFS counts matches against MaxGlobResults before removing duplicates,
// and repeated "**" reports each file once per way of splitting its path.
// 100 files eight directories deep make "**/**/**/**/**/**/*" fail with
// "more than 100000 matches" although it has 100 distinct matches (the
// contract: sorted, free of duplicates; ErrTooLarge only beyond
// MaxGlobResults matches).
func TestReviewGlobDuplicatesCountTowardsLimit(t *testing.T) {
	m := fstest.MapFS{}
	for i := range 100 {
		m[fmt.Sprintf("a/b/c/d/e/f/g/h/f%d", i)] = &fstest.MapFile{Data: []byte("x")}
	}
	got, err := sandbox.GlobFS(context.Background(), m, "**/**/**/**/**/**/*", false)
	if err != nil {
		t.Fatalf("100 distinct matches: %v", err)
	}
	if len(got) != 100 {
		t.Fatalf("got %d matches, want 100", len(got))
	}
}
