package hostfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Where the filesystem refuses unnamed files (O_TMPFILE: EOPNOTSUPP,
// EISDIR), or one cannot be linked in (no /proc, no capability), Write
// still replaces the file atomically through a named temporary file:
// new files 0644, an existing one keeps its mode, no temporary file left.
func TestWriteFallsBackToANamedTemporaryFile(t *testing.T) {
	fail := errors.New("refused")
	for _, c := range []struct {
		name string
		set  func()
	}{
		{"no unnamed files", func() { openTemp = func(*os.File) (*os.File, error) { return nil, fail } }},
		{"no link", func() { linkTemp = func(_, _ *os.File, _ string) error { return fail } }},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, l := openTemp, linkTemp
			defer func() { openTemp, linkTemp = o, l }()
			c.set()
			dir := t.TempDir()
			sb, err := New(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			ctx := context.Background()
			if err := sb.Write(ctx, "d/new.txt", []byte("one")); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(dir, "d/new.txt"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := sb.Write(ctx, "d/new.txt", []byte("two")); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, "d/new.txt"))
			fi, _ := os.Stat(filepath.Join(dir, "d/new.txt"))
			if err != nil || string(b) != "two" || fi.Mode().Perm() != 0o600 {
				t.Errorf("after the overwrite: %q, %v, mode %v; want \"two\", mode 0600", b, err, fi.Mode())
			}
			if err := sb.Write(ctx, "d/other.txt", []byte("x")); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(filepath.Join(dir, "d/other.txt")); err != nil || fi.Mode().Perm() != 0o644 {
				t.Errorf("a new file: %v, %v; want mode 0644", fi, err)
			}
			ents, _ := os.ReadDir(filepath.Join(dir, "d"))
			for _, e := range ents {
				if isTemp(e.Name()) {
					t.Errorf("a temporary file is left: %s", e.Name())
				}
			}
		})
	}
}
