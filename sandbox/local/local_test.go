package local_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
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
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

func newLocal(t *testing.T) *local.Sandbox { return newLocalB(t) }

func newLocalB(tb testing.TB) *local.Sandbox {
	tb.Helper()
	sb, err := local.New(context.Background(), local.Options{Dir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sb.Close() })
	return sb
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return newLocal(t) }, sandboxtest.Options{HostProcesses: true})
}

// killedWriteEnv, set to a directory, makes this test binary a process
// that writes a large file into it through the local tier and is killed
// in the middle (see TestWriteKilledMidwayLeavesNoTemporaryFile).
const killedWriteEnv = "HUTCH_TEST_KILLED_WRITE"

// stallingReader gives n zero bytes, says "started" on stdout at its
// first read, and then never returns: the write is under way for as long
// as the process lives.
type stallingReader struct {
	n       int64
	started bool
}

func (r *stallingReader) Read(p []byte) (int, error) {
	if !r.started {
		r.started = true
		fmt.Println("started")
	}
	if r.n <= 0 {
		select {} // the killer comes
	}
	n := min(int64(len(p)), r.n)
	clear(p[:n])
	r.n -= n
	return int(n), nil
}

// A write killed with SIGKILL left its ".hutch-<hex>.tmp" (the content
// so far) in the directory forever. The content now goes to a file with
// no name until it is whole, so a kill leaves nothing.
func TestWriteKilledMidwayLeavesNoTemporaryFile(t *testing.T) {
	if dir := os.Getenv(killedWriteEnv); dir != "" {
		sb, err := local.New(context.Background(), local.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		err = sb.WriteFrom(context.Background(), "big.bin", &stallingReader{n: 64 << 20}, 0)
		t.Fatalf("the write ended: %v", err)
	}
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(self, "-test.run=^TestWriteKilledMidwayLeavesNoTemporaryFile$", "-test.count=1")
	c.Env = append(os.Environ(), killedWriteEnv+"="+dir)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	defer c.Process.Kill()
	started := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if s.Text() == "started" {
				started <- true
			}
		}
		close(started)
	}()
	select {
	case ok := <-started:
		if !ok {
			t.Fatal("the writer ended before it started writing")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the writer did not start within 20 s")
	}
	// Until the 64 MiB are in the file (the reader then stalls).
	time.Sleep(500 * time.Millisecond)
	if err := c.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("the killed write left %s in the directory", e.Name())
	}
}

// Write removes the temporary files killed writes left (where it had to
// name them, or between naming and renaming) in each directory it writes
// to, once a minute old: exactly its own names, its user's, regular
// files; nothing else.
func TestWriteSweepsOnlyItsOwnStaleTemporaryFiles(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute)
	put := func(name string, mtime time.Time) string {
		p := filepath.Join(sub, name)
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return name
	}
	stale := put(".hutch-0123456789abcdef.tmp", old)
	keep := []string{
		put(".hutch-fedcba9876543210.tmp", time.Now()), // a write may be renaming it now
		put(".hutch-0123456789ABCDEF.tmp", old),        // not hutch's hex
		put(".hutch-0123456789abcde.tmp", old),
		put(".hutch-0123456789abcdef.tmp.bak", old),
		put("x.hutch-0123456789abcdef.tmp", old),
		put("notes.tmp", old),
	}
	if err := os.Mkdir(filepath.Join(sub, ".hutch-00000000000000aa.tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, ".hutch-00000000000000aa.tmp") // a directory
	if os.Geteuid() == 0 {
		other := put(".hutch-1111111111111111.tmp", old)
		if err := os.Chown(filepath.Join(sub, other), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		keep = append(keep, other) // another user's
	}
	sb, err := local.New(context.Background(), local.Options{Dir: root})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sb.Write(bg, "sub/f.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(sub, stale)); err == nil {
		t.Errorf("the stale %s is still there", stale)
	}
	for _, n := range keep {
		if _, err := os.Lstat(filepath.Join(sub, n)); err != nil {
			t.Errorf("%s was removed: %v", n, err)
		}
	}
}

// Write refuses exactly what Read refuses: a link whose target walks
// through a regular file or a missing directory and back with ".."
// ("file.txt/../x", "missing/../y") does not resolve for the kernel
// (ENOTDIR / ENOENT), and followLinks applies ".." only to a component
// that exists and is a directory, so Write creates neither x nor y.
// Origin: review 7.
func TestWriteLinkThroughNonDirectory(t *testing.T) {
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

// The contract applies ".." to the path as written ("lnk/../f" is
// root/f), while the kernel (and so every command Exec runs) climbs from
// where lnk leads: "lout/../secret.txt" with lout -> ../outside/sub is
// outside/secret.txt to the kernel. The file tools and the shell must
// never name different files, so a ".." right after a symbolic link is
// refused (ErrInvalidPath, naming the link); ".." anywhere else keeps the
// contract's meaning.
// Origin: review 7.
func TestDotDotAfterLinkIsRefused(t *testing.T) {
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
	viaAlias, err := local.New(context.Background(), local.Options{Dir: alias})
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

// A trailing "/" says "directory" (POSIX, and the contract's own Glob
// rule): Write of a path ending in "/" fails (it neither creates a file
// "new" nor replaces f.txt), and Read and Stat of "file/" fail as the
// kernel's ENOTDIR does.
// Origin: review 7.
func TestTrailingSlashMeansDirectory(t *testing.T) {
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

// Glob never lists Write's temporary files (".hutch-<random>.tmp"): the
// content has no name until it is whole (O_TMPFILE) and Glob hides such
// names, so an agent globbing while another tool writes sees no phantom
// files.
// Origin: review 7.
func TestGlobHidesTemporaryFiles(t *testing.T) {
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

// The last component of a written path is raced between a 0600 regular
// file and a symbolic link to an outside file (a swapper renames one or
// the other over "t", atomically). Write takes the new file's mode from
// the regular file it replaces, and refuses when a link has taken its
// place since followLinks ran: never a link's 0777, so a private file
// never becomes world-writable. Nothing outside changes.
// Origin: review 7.
func TestWriteNeverTakesASwappedLinksMode(t *testing.T) {
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

// The written path goes through a chain of links (l1 -> l2 -> a/b) and
// a/b is swapped, as fast as possible, between a real directory and a
// link to the outside, while Write, Read, Stat and Glob run: nothing
// outside changes, no outside content is read or listed (os.Root's
// guarantee, through followLinks).
// Origin: review 7.
func TestDeepChainSwapRaceStaysInside(t *testing.T) {
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

// "{..,x}", "{/etc,x}" and escapes are not seen by the lexical Clean;
// after brace expansion the glob library asks the filesystem for
// "../outside/..." or "/etc/...", which os.Root refuses: nothing outside
// is ever listed.
// Origin: review 7.
func TestGlobBraceTraversalStaysInside(t *testing.T) {
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

// A write that fails midway (the disk is full) leaves the old content
// intact and no temporary file behind: "never torn" against a real
// mid-write failure. Uses a 64 KiB tmpfs (needs mount rights; skipped
// otherwise).
// Origin: review 7.
func TestWriteENOSPCNotTorn(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		testenv.Missing(t, "cannot mount a small tmpfs (CI runs as root and can): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	sb, err := local.New(context.Background(), local.Options{Dir: dir})
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

// When the root directory is deleted while the sandbox is open, every
// operation fails with a typed error or finds nothing; none panics, none
// recreates the root or writes anywhere else.
// Origin: review 7.
func TestRootRemoved(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := local.New(context.Background(), local.Options{Dir: root})
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

// New copies Options.Env after validating it: changing the caller's map
// after New does not change what later commands get, cannot bypass New's
// CheckEnvVar (a name with "=") and does not race with Exec.
// Origin: review 7.
func TestNewCopiesOptionsEnv(t *testing.T) {
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

// ReadStream has the checks and errors of ReadStat (sandbox.Streamer's
// promise): a file that grows past sandbox.MaxFileSize while it is read
// fails with ErrTooLarge, as ReadStat does and as the isolated tier does,
// rather than being cut silently at MaxFileSize (which would make a
// read_file line window count "of N lines" on the cut file).
// Origin: review 16.
func TestReadStreamOfFileGrowingPastMaxIsTooLarge(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "log")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(sandbox.MaxFileSize); err != nil { // sparse
		t.Fatal(err)
	}
	f.Close()
	sb, err := local.New(context.Background(), local.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	var got int64
	_, err = sb.ReadStream(context.Background(), "log", func(r io.Reader) error {
		// It grows while it is read (a log being written).
		if err := os.Truncate(name, sandbox.MaxFileSize+4096); err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, r)
		got = n
		return err
	})
	if !errors.Is(err, sandbox.ErrTooLarge) {
		t.Errorf("ReadStream of a file that grew past MaxFileSize while read: %v after %d bytes; want ErrTooLarge, as ReadStat", err, got)
	}
}

func TestMain(m *testing.M) {
	testenv.RunProgram()
	os.Exit(m.Run())
}

// The file tools keep the protected paths of the root (.git/hooks,
// .vscode, shell rc files...) read-only, whether they exist or not.
func TestFileToolsKeepProtectedPaths(t *testing.T) {
	sandboxtest.RunProtected(t, func(t *testing.T, dir string) sandbox.Sandbox {
		sb, err := local.New(context.Background(), local.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return sb
	})
}

// Unprotect lifts an entry, and one that names no protected path is a
// configuration error, never ignored.
func TestUnprotectIsExplicit(t *testing.T) {
	dir := t.TempDir()
	sb, err := local.New(context.Background(), local.Options{Dir: dir, Unprotect: []string{".vscode"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sb.Write(context.Background(), ".vscode/settings.json", []byte("{}")); err != nil {
		t.Errorf("write an unprotected .vscode: %v", err)
	}
	if err := sb.Write(context.Background(), ".idea/x.xml", []byte("{}")); !errors.Is(err, sandbox.ErrProtected) {
		t.Errorf("write .idea: %v, want sandbox.ErrProtected", err)
	}
	if _, err := local.New(context.Background(), local.Options{Dir: dir, Unprotect: []string{".vscod"}}); !errors.Is(err, sandbox.ErrConfig) {
		t.Errorf("unprotect of no protected path: %v, want sandbox.ErrConfig", err)
	}
}
