package local_test

// Review 7: adversarial tests of the local tier. Tests that FAIL on the
// current code demonstrate a defect (their comment says the right
// behaviour); the others pin down correct behaviour nobody tested yet.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
)

// TestReview7WriteLinkThroughNonDirectory: a link whose target walks
// through a regular file or a missing directory and back with ".."
// ("file.txt/../x", "missing/../y") does not resolve for the kernel
// (ENOTDIR / ENOENT), and Read, Stat and Exec (through os.Root) agree. But
// Write's followLinks applies ".." lexically to whatever it reached, so
// Write succeeds and creates x / y, after which Read and Stat of the very
// path just written still fail. Right behaviour: followLinks must only
// apply ".." to a component that exists and is a directory (return
// ENOTDIR / ENOENT otherwise), so Write refuses exactly what Read refuses.
func TestReview7WriteLinkThroughNonDirectory(t *testing.T) {
	cases := []struct {
		name, target, created string
	}{
		{"through a regular file", "file.txt/../x.txt", "x.txt"},
		{"through a missing directory", "missing/../y.txt", "y.txt"},
		{"through a deeper missing directory", "sub/nope/../../z.txt", "z.txt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newAttackEnv(t, local.Options{})
			e.file(t, "file.txt", "F")
			e.file(t, "sub/keep", "K")
			e.symlink(t, c.target, "l")
			_, rerr := e.sb.Read(bg, "l")
			werr := e.sb.Write(bg, "l", []byte("DATA"))
			_, rerr2 := e.sb.Read(bg, "l")
			_, serr := e.sb.Stat(bg, "l")
			if rerr == nil {
				t.Fatalf("Read(l) before the write succeeded: the kernel should refuse %q", c.target)
			}
			if werr == nil {
				t.Errorf("Write(l -> %q) succeeded (created %s: %v), but Read(l) says %v and after the write Read says %v, Stat says %v; want Write to refuse like Read",
					c.target, c.created, exists(e.host(c.created)), rerr, rerr2, serr)
			}
		})
	}
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// TestReview7LexicalDotDotBeforeLinks: the contract applies ".." to the
// path as written ("lnk/../f" is root/f), while the kernel (and so every
// command Exec runs) climbs from where lnk leads: "lout/../secret.txt" with
// lout -> ../outside/sub is outside/secret.txt to the kernel. The file
// tools and the shell must never name different files, so a ".." right
// after a symbolic link is refused (ErrInvalidPath, naming the link);
// ".." anywhere else keeps the contract's meaning.
func TestReview7LexicalDotDotBeforeLinks(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	e.file(t, "secret.txt", "INSIDE-SECRET")
	e.file(t, "a/x.txt", "A-X")
	e.file(t, "x.txt", "ROOT-X")
	e.symlink(t, "../outside/sub", "lout")
	e.symlink(t, "a/b", "lin")
	if err := os.MkdirAll(e.host("a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	// (1) resolves outside for the kernel: must be an escape.
	// The same through an absolute path, under the root as given and as
	// resolved (the root reached through a link elsewhere).
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(e.root, alias); err != nil {
		t.Fatal(err)
	}
	viaAlias, err := local.New(alias, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer viaAlias.Close()
	for _, p := range []string{e.root + "/lin/../x.txt", alias + "/lin/../x.txt"} {
		if data, err := viaAlias.Read(bg, p); !errors.Is(err, sandbox.ErrInvalidPath) {
			t.Errorf("Read(%s) = %q, %v; want ErrInvalidPath", p, data, err)
		}
	}
	if data, err := viaAlias.Read(bg, alias+"/a/../x.txt"); err != nil || string(data) != "ROOT-X" {
		t.Errorf("Read(%s/a/../x.txt) = %q, %v; want ROOT-X", alias, data, err)
	}
	for _, p := range []string{"lout/../secret.txt", "lin/../x.txt", "./lin/../x.txt", "a/../lin/../x.txt"} {
		data, err := e.sb.Read(bg, p)
		if !errors.Is(err, sandbox.ErrInvalidPath) || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("Read(%s) = %q, %v; want ErrInvalidPath naming the link", p, data, err)
		}
		if err := e.sb.Write(bg, p, []byte("W")); !errors.Is(err, sandbox.ErrInvalidPath) {
			t.Errorf("Write(%s): %v; want ErrInvalidPath", p, err)
		}
	}
	// ".." after a real directory, or after a name inside a link's
	// target, keeps its meaning.
	for p, want := range map[string]string{"a/../x.txt": "ROOT-X", "lin/../../a/x.txt": "", "a/b/../x.txt": "A-X"} {
		data, err := e.sb.Read(bg, p)
		if want == "" {
			if err == nil {
				t.Errorf("Read(%s) = %q; want a refusal", p, data)
			}
			continue
		}
		if err != nil || string(data) != want {
			t.Errorf("Read(%s) = %q, %v; want %q", p, data, err, want)
		}
	}
}

// TestReview7WriteTrailingSlash: a trailing "/" says "directory" (POSIX,
// and this contract's own Glob rule). sandbox.Clean drops it, so
// Write("new/") creates a regular FILE named "new", Write("f.txt/")
// replaces the file f.txt, and Read/Stat("f.txt/") return the file where
// the kernel says ENOTDIR. Right behaviour: keep the trailing slash's
// meaning: Write of a path ending in "/" is ErrIsDir (or ErrInvalidPath),
// Read/Stat of "file/" are ErrNotDir.
func TestReview7WriteTrailingSlash(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	e.file(t, "f.txt", "OLD")
	if err := e.sb.Write(bg, "new/", []byte("N")); err == nil {
		fi, _ := os.Lstat(e.host("new"))
		t.Errorf("Write(\"new/\") succeeded and created %v; want ErrIsDir or ErrInvalidPath", fi.Mode())
	}
	if err := e.sb.Write(bg, "f.txt/", []byte("NEW")); err == nil {
		t.Errorf("Write(\"f.txt/\") replaced the file f.txt; want an error")
	}
	if data, err := e.sb.Read(bg, "f.txt/"); err == nil {
		t.Errorf("Read(\"f.txt/\") = %q; the kernel says ENOTDIR, want ErrNotDir", data)
	}
	if fi, err := e.sb.Stat(bg, "f.txt/"); err == nil {
		t.Errorf("Stat(\"f.txt/\") = %+v; want ErrNotDir", fi)
	}
}

// TestReview7GlobSeesTemporaryFiles: Write's temporary file
// ".hutch-<random>.tmp" is a real directory entry for the time of the write
// (and forever if hutch dies mid-write), and Glob lists it: an agent
// globbing while another tool writes sees phantom files that vanish when it
// tries to read them. Right behaviour: Glob (and Stat/Read if wanted) hide
// ".hutch-*.tmp" entries, or Write uses O_TMPFILE + linkat so the
// temporary file never has a name.
func TestReview7GlobSeesTemporaryFiles(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	big := make([]byte, 256<<10) // long enough that the temp file lives a while
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				_ = e.sb.Write(bg, fmt.Sprintf("d/f%d.bin", w), big)
			}
		}()
	}
	seen := map[string]bool{}
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) && len(seen) == 0 {
		got, err := e.sb.Glob(bg, "**")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range got {
			if strings.Contains(g, ".hutch-") {
				seen[g] = true
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if len(seen) > 0 {
		t.Errorf("Glob(**) listed Write's temporary files: %q", slices.Sorted(func(y func(string) bool) {
			for k := range seen {
				if !y(k) {
					return
				}
			}
		}))
	}
}

// TestReview7SwapFinalComponentMode races the LAST component of a written
// path between a 0600 regular file and a symbolic link to an outside file
// (a swapper renames one or the other over "t", atomically). followLinks
// may see the file, then Write's Lstat(base) sees the link and copies the
// LINK's permission bits (0777 on Linux) onto the new file: a private file
// becomes world-writable (and executable). Nothing outside may change.
// Right behaviour: take the mode from an fstat of what is replaced (or
// refuse when Lstat finds a symbolic link where followLinks found none),
// never a link's 0777.
func TestReview7SwapFinalComponentMode(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	tp := e.host("t")
	if err := os.WriteFile(tp, []byte("PRIVATE"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var swaps atomic.Int64
	bad := map[fs.FileMode]int{}
	var badMu sync.Mutex
	check := func() {
		if fi, err := os.Lstat(tp); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() != 0o600 {
			badMu.Lock()
			bad[fi.Mode().Perm()]++
			badMu.Unlock()
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			check()
			if i%2 == 0 {
				l := e.host("t.l")
				_ = os.Remove(l)
				if os.Symlink("../outside/secret.txt", l) == nil {
					_ = os.Rename(l, tp)
				}
			} else {
				f := e.host("t.f")
				if os.WriteFile(f, []byte("PRIVATE"), 0o600) == nil && os.Chmod(f, 0o600) == nil {
					_ = os.Rename(f, tp)
				}
			}
			swaps.Add(1)
		}
	}()
	var ok, refused int
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if err := e.sb.Write(bg, "t", []byte("NEW")); err != nil {
			refused++
		} else {
			ok++
			check()
		}
		badMu.Lock()
		n := len(bad)
		badMu.Unlock()
		if n > 0 {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	check()
	t.Logf("%d swaps; %d writes succeeded, %d refused", swaps.Load(), ok, refused)
	for m, n := range bad {
		t.Errorf("a write during the swap left t a regular file with mode %v (seen x%d); every file there was 0600", m, n)
	}
}

// TestReview7DeepChainSwapRace: the written path goes through a chain of
// links (l1 -> l2 -> a/b) and a/b is swapped, as fast as possible, between
// a real directory and a link to the outside. Write, Read, Stat and Glob
// run meanwhile. Nothing outside may change, no outside content may be
// read or listed. Pins down os.Root's guarantee through followLinks.
func TestReview7DeepChainSwapRace(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	e.file(t, "a/b/x.txt", "INSIDE-X")
	e.symlink(t, "../../outside", "a/alt")
	e.symlink(t, "l2", "l1")
	e.symlink(t, "a/b", "l2")
	b, alt := e.host("a/b"), e.host("a/alt")
	stopSwapping := startSwapping(t, b, alt)
	var problems []string
	var mu sync.Mutex
	var okWrites, ops atomic.Int64
	var wwg sync.WaitGroup
	deadline := time.Now().Add(1500 * time.Millisecond)
	for w := range 3 {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				ops.Add(5)
				if e.sb.Write(bg, fmt.Sprintf("l1/new%d-%d/deep.txt", w, i%50), []byte("D")) == nil {
					okWrites.Add(1)
				}
				_ = e.sb.Write(bg, "l1/x.txt", []byte("INSIDE-X"))
				if data, err := e.sb.Read(bg, "l1/x.txt"); err == nil && string(data) != "INSIDE-X" {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("Read(l1/x.txt) = %q", data))
					mu.Unlock()
				}
				if fi, err := e.sb.Stat(bg, "l1/secret.txt"); err == nil {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("Stat(l1/secret.txt) = %+v", fi))
					mu.Unlock()
				}
				for _, pat := range []string{"l1/*", "a/*/*"} {
					got, _ := e.sb.Glob(bg, pat)
					for _, g := range got {
						if strings.HasSuffix(g, "secret.txt") || strings.HasSuffix(g, "private.txt") || strings.HasSuffix(g, "/sub") {
							mu.Lock()
							problems = append(problems, fmt.Sprintf("Glob(%s) listed outside entry %s", pat, g))
							mu.Unlock()
						}
					}
				}
			}
		}()
	}
	wwg.Wait()
	stopSwapping() // a/b is the real directory again
	t.Logf("%d operations, %d deep writes succeeded", ops.Load(), okWrites.Load())
	for _, p := range problems[:min(len(problems), 10)] {
		t.Error(p)
	}
	if okWrites.Load() == 0 {
		t.Errorf("no write succeeded: the race was not exercised")
	}
}

// TestReview7GlobBraceTraversal: "{..,x}", "{/etc,x}" and escapes are not
// seen by the lexical Clean; after brace expansion the glob library asks
// the filesystem for "../outside/..." or "/etc/...". os.Root must refuse
// those, so nothing outside is ever listed. Pins down correct behaviour.
func TestReview7GlobBraceTraversal(t *testing.T) {
	e := newAttackEnv(t, local.Options{})
	e.file(t, "in/secret.txt", "IN")
	cases := []struct {
		pattern string
		want    []string
	}{
		{"{..,in}/secret.txt", []string{"in/secret.txt"}},
		{"{../outside,in}/secret.txt", []string{"in/secret.txt"}},
		{"{../outside,in}/*", []string{"in/secret.txt"}},
		{"{../outside/**,in/*}", []string{"in/secret.txt"}},
		{"{" + e.out + ",in}/secret.txt", []string{"in/secret.txt"}},
		{"{/etc,in}/{passwd,secret.txt}", []string{"in/secret.txt"}},
		{"..{,}/outside/*", []string{}},
		{"in/{..,.}/../outside/*", []string{}},
		{`\.\./outside/*`, []string{}},
		{"[.][.]/outside/*", []string{}},
		{"{..}/**", []string{}},
	}
	for _, c := range cases {
		got, err := e.sb.Glob(bg, c.pattern)
		if err != nil && !errors.Is(err, sandbox.ErrEscape) && !errors.Is(err, sandbox.ErrInvalidPath) {
			t.Errorf("Glob(%q): untyped error %v", c.pattern, err)
			continue
		}
		if err == nil && !slices.Equal(got, c.want) {
			t.Errorf("Glob(%q) = %q; want %q", c.pattern, got, c.want)
		}
	}
}

// TestReview7WriteENOSPCNotTorn: a write that fails midway (the disk is
// full) leaves the old content intact and no temporary file behind. Uses
// a 64 KiB tmpfs (needs mount rights; skipped otherwise). Pins down the
// "never torn" promise against a real mid-write failure.
func TestReview7WriteENOSPCNotTorn(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		testenv.Missing(t, "cannot mount a small tmpfs (CI runs as root and can): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	sb, err := local.New(dir, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	old := []byte(strings.Repeat("o", 8<<10))
	if err := sb.Write(bg, "f.txt", old); err != nil {
		t.Fatal(err)
	}
	err = sb.Write(bg, "f.txt", make([]byte, 1<<20))
	if err == nil {
		t.Fatal("a 1 MiB write to a 64 KiB filesystem succeeded")
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Logf("error (not wrapping ENOSPC, fine): %v", err)
	}
	if got, err := sb.Read(bg, "f.txt"); err != nil || string(got) != string(old) {
		t.Errorf("after a failed write f.txt = %d bytes, %v; want the old %d bytes", len(got), err, len(old))
	}
	ents, _ := os.ReadDir(dir)
	for _, en := range ents {
		if en.Name() != "f.txt" {
			t.Errorf("leftover after a failed write: %s", en.Name())
		}
	}
}

// TestReview7RootRemoved: the root directory is deleted while the sandbox
// is open. Every operation fails with a typed error or finds nothing; none
// panics, none recreates the root or writes anywhere else. Pins down
// correct behaviour.
func TestReview7RootRemoved(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := local.New(root, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"x", "sub/x", "a/b/c"} {
		if err := sb.Write(bg, p, []byte("X")); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Write(%s) in a deleted root: %v, want ErrNotFound", p, err)
		}
		if _, err := sb.Read(bg, p); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Read(%s) in a deleted root: %v, want ErrNotFound", p, err)
		}
	}
	if got, err := sb.Glob(bg, "**"); err != nil || len(got) != 0 {
		t.Errorf("Glob(**) in a deleted root = %q, %v", got, err)
	}
	if ents, _ := os.ReadDir(base); len(ents) != 0 {
		t.Errorf("operations on a deleted root created %v in its parent", ents)
	}
}

// The stalled live writer and the blocking stdin reader this review found
// hanging Exec are now cases of the conformance suite ("stalled live
// writer", "blocking stdin"), which every tier runs.

// TestReview7OptionsEnvAliased: New keeps the caller's Options.Env map
// itself. Changing the map after New changes what later commands get,
// bypasses New's CheckEnvVar validation (a name with "=" goes through),
// and races with concurrent Exec calls reading it. Right behaviour: New
// copies the map (maps.Clone) after validating it.
func TestReview7OptionsEnvAliased(t *testing.T) {
	shellOK(t)
	env := map[string]string{"OPT": "1"}
	e := newAttackEnv(t, local.Options{Env: env})
	env["LATE_SECRET"] = "leaked"
	env["BAD=NAME"] = "x"
	r, err := e.sb.Exec(bg, sandbox.Command{Args: []string{"env"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(r.Stdout), "LATE_SECRET") || strings.Contains(string(r.Stdout), "BAD=NAME") {
		t.Errorf("variables added to Options.Env after New reached the command (one with an invalid name):\n%s", r.Stdout)
	}
}

// TestReview7ExecSecretsNotInheritedByDaemon: a secret in hutch's own
// environment does not reach a double-forked, setsid'd daemon (which sees
// the command's environment, not hutch's), and the daemon is gone when
// Exec returns. Pins down correct behaviour.
func TestReview7ExecSecretsNotInheritedByDaemon(t *testing.T) {
	shellOK(t)
	t.Setenv("HUTCH_REVIEW7_SECRET", "s3cr3t-review7")
	e := newAttackEnv(t, local.Options{})
	e.file(t, "probe.sh", "")
	script := `(setsid sh -c 'env > daemon.env; sleep 30' &) ; sleep 0.3; cat daemon.env`
	r, err := e.sb.Exec(bg, sandbox.Command{Shell: script, Timeout: 10 * time.Second})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("%+v, %v", r, err)
	}
	if strings.Contains(string(r.Stdout), "s3cr3t-review7") {
		t.Errorf("the daemon saw hutch's secret:\n%s", r.Stdout)
	}
	if !strings.Contains(string(r.Stdout), "PATH=") {
		t.Errorf("the daemon's environment was not captured: %q", r.Stdout)
	}
}
