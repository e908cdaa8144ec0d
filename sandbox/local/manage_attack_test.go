package local_test

// Attacks on List, Mkdir, Remove and Rename: links that lead out, links
// that dangle, and a directory swapped for a link while the operations
// run. The attack environment fails each test if anything outside the
// root changed (see newAttackEnv).

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
)

// TestAttackManageThroughLinks: a link leading out is never listed
// through, made in, removed through or moved to or from; removing or
// moving the link itself touches only the link.
func TestAttackManageThroughLinks(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	e.symlink(t, "../outside", "out")            // relative, to a directory outside
	e.symlink(t, "{out}/secret.txt", "abs")      // absolute, to a file outside
	e.symlink(t, "../../outside/sub", "d/inner") // from a subdirectory
	e.symlink(t, "missing-target", "dangling")
	e.file(t, "keep.txt", "KEEP")
	e.file(t, "tree/a/b.txt", "B")
	e.symlink(t, "../../../outside", "tree/a/up") // inside a tree that is removed whole

	refused := []struct {
		name string
		op   func() error
	}{
		{"list through a link out", func() error { _, err := e.sb.List(bg, "out"); return err }},
		{"list below a link out", func() error { _, err := e.sb.List(bg, "out/sub"); return err }},
		{"mkdir through a link out", func() error { return e.sb.Mkdir(bg, "out/new") }},
		{"mkdir through a nested link out", func() error { return e.sb.Mkdir(bg, "d/inner/new") }},
		{"remove a file through a link out", func() error { return e.sb.Remove(bg, "out/secret.txt", false) }},
		{"remove a tree through a link out", func() error { return e.sb.Remove(bg, "out/sub", true) }},
		{"rename from outside", func() error { return e.sb.Rename(bg, "out/secret.txt", "stolen.txt") }},
		{"rename to outside", func() error { return e.sb.Rename(bg, "keep.txt", "out/planted.txt") }},
		{"rename to outside below a new directory", func() error { return e.sb.Rename(bg, "keep.txt", "out/newdir/planted.txt") }},
		{"rename a tree to outside", func() error { return e.sb.Rename(bg, "tree", "d/inner/tree") }},
		{"absolute path outside", func() error { return e.sb.Remove(bg, e.out+"/x.txt", false) }},
	}
	for _, c := range refused {
		wantIs(t, c.name, c.op(), sandbox.ErrEscape)
	}
	if b, err := os.ReadFile(e.host("keep.txt")); err != nil || string(b) != "KEEP" {
		t.Fatalf("keep.txt after refused moves: %q, %v", b, err)
	}

	// The listing shows the links as links, each with what it leads to
	// when that is inside the root.
	ents, err := e.sb.List(bg, ".")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, fi := range ents {
		kinds[fi.Path] = fmt.Sprintf("%s link=%v", fi.Kind, fi.Link)
	}
	for p, want := range map[string]string{"out": "other link=true", "abs": "other link=true", "dangling": "other link=true", "keep.txt": "file link=false", "tree": "dir link=false"} {
		if kinds[p] != want {
			t.Errorf("List: %s is %q, want %q", p, kinds[p], want)
		}
	}

	// Removing and moving links acts on the links alone.
	for _, step := range []struct {
		name string
		op   func() error
	}{
		{"remove a link to a directory outside", func() error { return e.sb.Remove(bg, "out", false) }},
		{"remove a dangling link", func() error { return e.sb.Remove(bg, "dangling", false) }},
		{"move a link to a file outside", func() error { return e.sb.Rename(bg, "abs", "moved/abs") }},
		{"remove a tree holding a link out", func() error { return e.sb.Remove(bg, "tree", true) }},
	} {
		if err := step.op(); err != nil {
			t.Errorf("%s: %v", step.name, err)
		}
	}
	if target, err := os.Readlink(e.host("moved/abs")); err != nil || target != e.expand("{out}/secret.txt") {
		t.Errorf("the moved link: %q, %v; want it unchanged, still a link", target, err)
	}
	_, err = e.sb.Read(bg, "moved/abs")
	wantIs(t, "read through the moved link", err, sandbox.ErrEscape)
	for _, gone := range []string{"out", "dangling", "abs", "tree"} {
		if _, err := os.Lstat(e.host(gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there: %v", gone, err)
		}
	}
}

// TestAttackManageSwap: a directory swapped back and forth with a link
// to one outside while Mkdir, Rename and a recursive Remove run in it:
// every operation acts inside the root or is refused; outside, nothing
// changes.
func TestAttackManageSwap(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	e.file(t, "d/seed.txt", "SEED")
	e.symlink(t, "../outside", "alt")
	stop := startSwapping(t, e.host("d"), e.host("alt"))
	deadline := time.Now().Add(1200 * time.Millisecond)
	var ops, ok, refused int
	untyped := map[string]int{}
	for i := 0; time.Now().Before(deadline); i++ {
		for _, err := range []error{
			e.sb.Mkdir(bg, fmt.Sprintf("d/m%d/n", i)),
			e.sb.Rename(bg, "d/seed.txt", fmt.Sprintf("d/r%d/seed.txt", i)),
			e.sb.Rename(bg, fmt.Sprintf("d/r%d/seed.txt", i), "d/seed.txt"),
			e.sb.Remove(bg, fmt.Sprintf("d/m%d", i), true),
			e.sb.Remove(bg, "d/x.txt", false), // outside/x.txt while swapped
			e.sb.Remove(bg, "d/sub", true),    // outside/sub while swapped
		} {
			ops++
			switch {
			case err == nil:
				ok++
			case errors.Is(err, sandbox.ErrEscape), errors.Is(err, sandbox.ErrNotFound), errors.Is(err, sandbox.ErrNotDir), errors.Is(err, sandbox.ErrIsDir):
				refused++
			default:
				untyped[err.Error()]++
			}
		}
	}
	swaps := stop()
	t.Logf("%d swaps, %d operations: %d done, %d refused", swaps, ops, ok, refused)
	for msg, n := range untyped {
		if !strings.Contains(msg, "no such file") {
			t.Logf("untyped error x%d: %s", n, msg)
		}
	}
	if ok == 0 || refused == 0 || swaps < 100 {
		t.Errorf("the race was not exercised both ways: %d done, %d refused, %d swaps", ok, refused, swaps)
	}
	// The cleanup compares everything outside the root with before.
}
