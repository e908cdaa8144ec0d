package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/remote"
)

// tree writes n files of size bytes each under dir, spread over
// subdirectories, and returns their relative paths.
func tree(t testing.TB, dir string, n, size int) []string {
	t.Helper()
	var names []string
	for i := range n {
		name := filepath.Join(fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%04d.txt", i))
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		data := []byte(strings.Repeat(fmt.Sprintf("%d ", i), size)[:size])
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// A tree goes in and out in one call each, every file intact; Changed
// names exactly what a command created or changed.
func TestCopyInOutAndChanged(t *testing.T) {
	for _, tier := range tiers {
		t.Run(tier, func(t *testing.T) {
			root := t.TempDir()
			sb := serveTier(t, tier, root)
			defer sb.Close()
			src := t.TempDir()
			names := tree(t, src, 300, 1000)
			n, err := sb.CopyIn(bg, src, "in")
			if err != nil || n != len(names) {
				t.Fatalf("CopyIn: %d files, %v", n, err)
			}
			for _, name := range names[:5] {
				want, _ := os.ReadFile(filepath.Join(src, name))
				got, err := sb.Read(bg, "in/"+name)
				if err != nil || string(got) != string(want) {
					t.Fatalf("%s: %q %v", name, got, err)
				}
			}
			before, err := sb.Changed(bg, "in", time.Time{})
			if err != nil || len(before) != len(names) {
				t.Fatalf("Changed since ever: %d, %v", len(before), err)
			}
			mark := slices.MaxFunc(before, func(a, b sandbox.FileInfo) int { return a.ModTime.Compare(b.ModTime) }).ModTime
			time.Sleep(20 * time.Millisecond)
			r, err := sb.Exec(bg, sandbox.Command{Shell: "echo changed > in/d00/f0000.txt && echo new > in/new.txt", Timeout: 10 * time.Second})
			if err != nil || r.ExitCode != 0 {
				t.Fatalf("exec: %v %s", err, r.Stderr)
			}
			changed, err := sb.Changed(bg, "in", mark)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, fi := range changed {
				paths = append(paths, fi.Path)
			}
			if !slices.Equal(paths, []string{"in/d00/f0000.txt", "in/new.txt"}) {
				t.Fatalf("Changed: %q", paths)
			}
			out := t.TempDir()
			if n, err := sb.CopyOut(bg, "in", out, time.Time{}); err != nil || n != len(names)+1 {
				t.Fatalf("CopyOut: %d, %v", n, err)
			}
			if b, _ := os.ReadFile(filepath.Join(out, "d00/f0000.txt")); string(b) != "changed\n" {
				t.Fatalf("copied out %q", b)
			}
		})
	}
}

// Copying leads nowhere outside: a dir out of the root is an escape, a
// host tree's links are not followed.
func TestCopyStaysInside(t *testing.T) {
	sb := localServer(t)
	defer sb.Close()
	src, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("TOP-SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "ok.txt"), []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"..", "../x", "/etc", "a/../../x", "in\x00x"} {
		if _, err := sb.CopyIn(bg, src, dir); err == nil {
			t.Errorf("CopyIn to %q worked", dir)
		}
		if _, err := sb.CopyOut(bg, dir, t.TempDir(), time.Time{}); err == nil {
			t.Errorf("CopyOut from %q worked", dir)
		}
	}
	if n, err := sb.CopyIn(bg, src, "in"); err != nil || n != 1 {
		t.Fatalf("CopyIn: %d %v", n, err)
	}
	if _, err := sb.Read(bg, "in/link/secret"); err == nil {
		t.Fatal("a host link was followed into the sandbox")
	}
}

// Run copies the mounts in, runs, and brings back what changed in the
// writable ones only; the result carries the hosts the network refused.
func TestRunCopiesInAndBack(t *testing.T) {
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "this host cannot build isolated sandboxes: %v", err)
	}
	root := t.TempDir()
	pol, err := json.Marshal(policy.Default().Extend(policy.Policy{Write: []string{root}, Hosts: []string{"allowed.invalid"}}))
	if err != nil {
		t.Fatal(err)
	}
	sb := newRemote(t, "isolated", string(pol))
	defer sb.Close()
	ro, rw := t.TempDir(), t.TempDir()
	tree(t, ro, 3, 10)
	tree(t, rw, 3, 10)
	r, c, err := sb.Run(bg, sandbox.Command{Shell: "echo x >> ro/d00/f0000.txt; echo made > rw/made.txt; echo y > rw/d01/f0001.txt; curl -sS --max-time 5 http://refused.invalid:8080/ || true", Timeout: 30 * time.Second},
		[]remote.Mount{{Host: ro, Dir: "ro"}, {Host: rw, Dir: "rw", Writable: true}})
	if err != nil {
		t.Fatal(err)
	}
	if c.In != 6 || c.Back != 2 {
		t.Errorf("copied %d in, %d back; want 6 and 2", c.In, c.Back)
	}
	if b, _ := os.ReadFile(filepath.Join(rw, "made.txt")); string(b) != "made\n" {
		t.Errorf("rw/made.txt on the host: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ro, "d00/f0000.txt")); strings.Contains(string(b), "x") {
		t.Errorf("the read-only mount came back: %q", b)
	}
	if !slices.Equal(r.Blocked, []string{"refused.invalid:8080"}) {
		t.Errorf("Blocked %q, stderr %q", r.Blocked, r.Stderr)
	}
}

// A copy out that fails here — a directory where a file comes, a link in
// the host folder leading out — fails with this side's error, writes
// nothing outside the host folder, and leaves the session usable (the
// server was told to stop packing).
func TestCopyOutFailureHereIsTheCallsError(t *testing.T) {
	sb := localServer(t)
	defer sb.Close()
	for _, name := range []string{"t/a.txt", "t/b/c.txt"} {
		if err := sb.Write(bg, name, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		setup func(host, outside string) error
		is    error
	}{
		{"a directory in the way", func(host, _ string) error { return os.Mkdir(filepath.Join(host, "a.txt"), 0o755) }, sandbox.ErrIsDir},
		{"a link leading out", func(host, outside string) error { return os.Symlink(outside, filepath.Join(host, "b")) }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			host, outside := t.TempDir(), t.TempDir()
			if err := c.setup(host, outside); err != nil {
				t.Fatal(err)
			}
			_, err := sb.CopyOut(bg, "t", host, time.Time{})
			if err == nil || c.is != nil && !errors.Is(err, c.is) || errors.Is(err, context.Canceled) {
				t.Errorf("CopyOut: %v, want this side's error (%v)", err, c.is)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("the copy wrote outside the host folder: %v", ents)
			}
			if _, err := sb.Read(bg, "t/a.txt"); err != nil {
				t.Errorf("the session after the failed copy: %v", err)
			}
		})
	}
}
