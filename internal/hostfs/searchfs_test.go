//go:build linux

package hostfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/search"
	"github.com/hutchsandbox/hutch/sandbox"
)

// marker is only ever written outside the root: no search may find it.
const marker = "OUTSIDE-c0ffee-never-inside"

// searchTree builds a root with every kind of entry a search meets, and
// a directory outside it holding marker.
func searchTree(t *testing.T) (*FS, string, string) {
	t.Helper()
	base := t.TempDir()
	root, out := filepath.Join(base, "root"), filepath.Join(base, "out")
	for _, d := range []string{root, out, out + "/dir"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	write(out+"/secret.txt", "needle "+marker+"\n")
	write(out+"/dir/secret.go", "needle "+marker+"\n")
	for p, s := range map[string]string{
		"real/file.txt":               "needle real\n",
		"real/sub/deep.go":            "package x // needle deep\n",
		"a/b/c.go":                    "needle c\n",
		"denied/secret.txt":           "needle denied\n",
		"also/denied.txt":             "needle denied too\n",
		"also/kept.txt":               "needle kept\n",
		"bin.dat":                     "needle\x00binary\n",
		"bad\xff\xfename.txt":         "needle in a non-UTF-8 name \xff\n",
		"dir\xc3(/inner.txt":          "needle below a non-UTF-8 directory\n",
		".gitignore":                  "ignored/\n",
		"ignored/x.txt":               "needle ignored\n",
		"chain/target.txt":            "needle chain\n",
		".hutch-0123456789abcdef.tmp": "needle temp\n",
	} {
		write(filepath.Join(root, p), s)
	}
	link("real", "linkdir")
	link("real/file.txt", "linkfile")
	link("../real/file.txt", "a/up")
	link(out+"/secret.txt", "linkabs")
	link(out+"/dir", "linkabsdir")
	link(root+"/real/file.txt", "linkabsin") // absolute, pointing inside: refused
	link("../out/secret.txt", "linkup")
	link("../out/dir", "linkupdir")
	link("real/../../out/secret.txt", "linkdotdot")
	link("nowhere", "dangling")
	link("linkfile", "linkchain2")
	link("../denied/secret.txt", "real/todenied")
	// A chain of 9 links: os.Root follows 8.
	prev := "target.txt"
	for i := range 9 {
		name := fmt.Sprintf("chain/l%d", i)
		link(prev, name)
		prev = path.Base(name)
	}
	link("l8", "chain/long")
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	link("fifo", "linkfifo")
	s, err := New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, root, out
}

func hideDenied(rel string) bool {
	return rel == "denied" || strings.HasPrefix(rel, "denied/") || rel == "also/denied.txt"
}

// fsVariants are the FSs compared: the reference, the fast path, and
// the fast FS with openat2 forced off (its fallback).
func fsVariants(s *FS, hide func(string) bool) []struct {
	name string
	fs   search.FS
	off  bool
} {
	return []struct {
		name string
		fs   search.FS
		off  bool
	}{
		{"os.Root", rootFS{root: s.root, hide: hide}, false},
		{"openat2", s.searchFS(hide), false},
		{"fallback", s.searchFS(hide), true},
	}
}

func withOpenat2Off(off bool, f func()) {
	old := openat2Off
	openat2Off = off
	defer func() { openat2Off = old }()
	f()
}

func needFast(t *testing.T, s *FS) {
	t.Helper()
	if s.search == nil {
		t.Skip("no openat2 here (kernel before 5.6, or a seccomp filter refuses it)")
	}
}

// TestSearchFSSame: over a tree of links (in, out, absolute, dangling,
// chained), a FIFO, denied paths, binary files and non-UTF-8 names, the
// openat2 FS and its fallback search, list and open exactly as os.Root
// does, errors included.
func TestSearchFSSame(t *testing.T) {
	s, root, _ := searchTree(t)
	needFast(t, s)
	ctx := context.Background()
	reqs := []sandbox.SearchRequest{
		{Pattern: "needle"},
		{Pattern: "needle", IncludeIgnored: true},
		{Pattern: "needle", Mode: sandbox.SearchFiles},
		{Pattern: "needle", Mode: sandbox.SearchCount, IgnoreCase: true},
		{},
		{Glob: "**/*.go"},
		{Glob: "*.txt", Pattern: "e"},
		{Dir: "linkdir", Pattern: "needle"},
		{Dir: "a/up", Pattern: "needle"},
		{Dir: "linkfile", Pattern: "needle"},
		{Dir: "chain/l0", Pattern: "needle"},
		{Dir: "chain/long", Pattern: "needle"},
		{Dir: "linkabs", Pattern: "needle"},
		{Dir: "linkabsdir", Pattern: "needle"},
		{Dir: "linkabsin", Pattern: "needle"},
		{Dir: "linkup", Pattern: "needle"},
		{Dir: "linkupdir", Pattern: "needle"},
		{Dir: "linkdotdot", Pattern: "needle"},
		{Dir: "dangling", Pattern: "needle"},
		{Dir: "fifo", Pattern: "needle"},
		{Dir: "linkfifo", Pattern: "needle"},
		{Dir: "missing", Pattern: "needle"},
		{Dir: "real/file.txt/x", Pattern: "needle"},
		{Dir: "denied", Pattern: "needle"},
		{Dir: "dir\xc3(", Pattern: "needle"},
	}
	for _, hide := range []func(string) bool{nil, hideDenied} {
		vs := fsVariants(s, hide)
		for _, req := range reqs {
			var want sandbox.SearchResult
			var wantErr error
			for i, v := range vs {
				var got sandbox.SearchResult
				var err error
				withOpenat2Off(v.off, func() { got, err = search.Run(ctx, v.fs, req) })
				if i == 0 {
					want, wantErr = got, err
					continue
				}
				if !reflect.DeepEqual(got, want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
					t.Errorf("hide %v, %+v: %s found %+v, %v; os.Root %+v, %v", hide != nil, req, v.name, got, err, want, wantErr)
				}
			}
			if strings.Contains(fmt.Sprintf("%+v", want), marker) {
				t.Errorf("%+v: read outside the root: %+v", req, want)
			}
		}
	}
	// Every name, opened and listed alone: the same file or the same error.
	var names []string
	filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if rel, rerr := filepath.Rel(root, p); rerr == nil {
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	names = append(names, "missing", "real/file.txt/x", "linkdir/sub", "linkdir/sub/deep.go", "a/up/x", "linkupdir/secret.go", "linkabsdir/secret.go")
	for _, hide := range []func(string) bool{nil, hideDenied} {
		vs := fsVariants(s, hide)
		for _, name := range names {
			wantOpen, wantList := "", ""
			for i, v := range vs {
				var open, list string
				withOpenat2Off(v.off, func() { open, list = describe(v.fs, name) })
				if i == 0 {
					wantOpen, wantList = open, list
					continue
				}
				if open != wantOpen {
					t.Errorf("hide %v, Open(%q): %s %s; os.Root %s", hide != nil, name, v.name, open, wantOpen)
				}
				if list != wantList {
					t.Errorf("hide %v, ReadDir(%q): %s %s; os.Root %s", hide != nil, name, v.name, list, wantList)
				}
			}
			if strings.Contains(wantOpen+wantList, marker) {
				t.Errorf("%q: read outside the root", name)
			}
		}
	}
	// The typed errors the contract promises.
	f := s.searchFS(nil)
	for name, want := range map[string]error{
		"linkabs": sandbox.ErrEscape, "linkabsin": sandbox.ErrEscape, "linkup": sandbox.ErrEscape,
		"linkupdir/secret.go": sandbox.ErrEscape, "linkdotdot": sandbox.ErrEscape,
		"dangling": sandbox.ErrNotFound, "missing": sandbox.ErrNotFound, "chain/long": syscall.ELOOP, "chain/l0": nil,
	} {
		file, err := f.Open(name)
		if err == nil {
			file.Close()
		}
		if !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Errorf("Open(%q): %v, want %v", name, err, want)
		}
	}
	if _, err := s.SearchHiding(ctx, sandbox.SearchRequest{Dir: "linkup", Pattern: "x"}, nil); !errors.Is(err, sandbox.ErrEscape) {
		t.Errorf("search of a link leading out: %v, want ErrEscape", err)
	}
}

// describe is what Open and ReadDir make of name: the content or the
// error, and the sorted entries with their types or the error.
func describe(f search.FS, name string) (open, list string) {
	if file, err := f.Open(name); err != nil {
		open = "error " + err.Error()
	} else {
		fi, serr := file.Stat()
		switch {
		case serr != nil:
			open = "stat error " + serr.Error()
		case fi.Mode().IsRegular():
			b := make([]byte, 4096)
			n, rerr := file.Read(b)
			open = fmt.Sprintf("%v %d %q %v", fi.Mode(), fi.Size(), b[:n], rerr)
		default:
			open = fi.Mode().String()
		}
		file.Close()
	}
	ents, err := f.ReadDir(name)
	var sb strings.Builder
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range ents {
		fmt.Fprintf(&sb, "%q:%v ", e.Name(), e.Type())
	}
	if err != nil {
		sb.WriteString("error " + err.Error())
	}
	return open, sb.String()
}

// TestSearchFSFastPath: plain paths do open through openat2 (a bare
// descriptor), links through os.Root.
func TestSearchFSFastPath(t *testing.T) {
	s, _, _ := searchTree(t)
	needFast(t, s)
	f := s.searchFS(nil)
	for name, fast := range map[string]bool{"real/file.txt": true, ".": true, "real": true, "linkfile": false, "linkdir/file.txt": false, "fifo": true} {
		file, err := f.Open(name)
		if err != nil {
			t.Fatalf("Open(%q): %v", name, err)
		}
		if _, ok := file.(*searchFile); ok != fast {
			t.Errorf("Open(%q) is %T; want openat2's: %v", name, file, fast)
		}
		file.Close()
	}
	withOpenat2Off(true, func() {
		file, err := f.Open("real/file.txt")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := file.(*os.File); !ok {
			t.Errorf("with openat2 off, Open is %T, want *os.File", file)
		}
		file.Close()
	})
	// Info of a listed entry is the entry's lstat, through os.Root.
	ents, err := f.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "linkfile" {
			continue
		}
		fi, err := e.Info()
		if err != nil || fi.Mode().Type() != fs.ModeSymlink || e.Type() != fs.ModeSymlink {
			t.Errorf("linkfile: type %v, Info %v, %v", e.Type(), fi, err)
		}
	}
}

// TestSearchFSSwap: a directory swapped (atomically, back and forth) for
// a link leading out while searches run, at the top and in the middle
// of paths, with relative and absolute links: no search reads outside.
func TestSearchFSSwap(t *testing.T) {
	s, root, out := searchTree(t)
	for _, d := range []string{"swap", "mid/swap/x"} {
		for i := range 20 {
			p := filepath.Join(root, d, fmt.Sprintf("f%02d.txt", i))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("needle inside\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// out/x mirrors the inside names, so a path that resolved outside
	// would find a file.
	for i := range 20 {
		for _, p := range []string{fmt.Sprintf("%s/f%02d.txt", out, i), fmt.Sprintf("%s/x/f%02d.txt", out, i)} {
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte("needle "+marker+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Symlink(out, filepath.Join(root, "swapabs")); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(filepath.Join(root, "mid"), out)
	if err := os.Symlink(rel, filepath.Join(root, "mid/swaprel")); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	swaps := 0
	wg.Go(func() {
		pairs := [][2]string{{"swap", "swapabs"}, {"mid/swap", "mid/swaprel"}}
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, p := range pairs {
				a, b := filepath.Join(root, p[0]), filepath.Join(root, p[1])
				if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
					t.Errorf("exchange: %v", err)
					return
				}
			}
			swaps++
		}
	})
	ctx := context.Background()
	reqs := []sandbox.SearchRequest{
		{Pattern: "needle", Limit: sandbox.MaxSearchLimit},
		{Dir: "swap", Pattern: "needle"},
		{Dir: "mid/swap/x", Pattern: "needle"},
		{Dir: "swap/f03.txt", Pattern: "needle"},
		{Dir: "mid/swap/x/f07.txt", Pattern: "needle"},
		{Mode: sandbox.SearchFiles, Glob: "**/*.txt", Limit: sandbox.MaxSearchLimit},
	}
	deadline := time.Now().Add(2 * time.Second)
	runs, found := 0, 0
	for _, off := range []bool{false, true} {
		withOpenat2Off(off, func() {
			for time.Now().Before(deadline.Add(map[bool]time.Duration{false: -time.Second, true: 0}[off])) {
				for _, req := range reqs {
					res, err := s.Search(ctx, req)
					runs++
					if err == nil {
						found += len(res.Matches) + len(res.Files)
					}
					if strings.Contains(fmt.Sprintf("%+v", res), marker) {
						t.Fatalf("openat2 off %v, %+v: read outside the root: %+v", off, req, res)
					}
					// A file named directly, read while its directory is a
					// link out, must not be the outside one.
					for _, name := range []string{"swap/f03.txt", "mid/swap/x/f07.txt"} {
						if file, err := s.searchFS(nil).Open(name); err == nil {
							b := make([]byte, 256)
							n, _ := file.Read(b)
							file.Close()
							if strings.Contains(string(b[:n]), marker) {
								t.Fatalf("openat2 off %v, Open(%q) read outside: %q", off, name, b[:n])
							}
						}
					}
				}
			}
		})
	}
	close(stop)
	wg.Wait()
	t.Logf("%d searches, %d swaps, %d matches and files found inside", runs, swaps, found)
	if found == 0 {
		t.Error("no search found anything inside: the test tests nothing")
	}
}

// TestSearchFSClose: searches racing Close end (with ErrClosed, or done
// before it), and the descriptor kept for openat2 is closed with the FS.
func TestSearchFSClose(t *testing.T) {
	s, _, _ := searchTree(t)
	needFast(t, s)
	var fd int
	s.search.rc.Control(func(d uintptr) { fd = int(d) })
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				_, err := s.Search(context.Background(), sandbox.SearchRequest{Pattern: "needle"})
				if errors.Is(err, sandbox.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("search: %v", err)
					return
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
		// The number may have been reused since; it must not be the root.
		var st, rst unix.Stat_t
		if unix.Fstat(fd, &st) == nil && unix.Stat(s.Root(), &rst) == nil && st.Ino == rst.Ino && st.Dev == rst.Dev {
			t.Errorf("descriptor %d, the root's, still open after Close", fd)
		}
	}
}

// TestDirentParse: getdents64 records of every type, a long and a
// non-UTF-8 name, parse as listed.
func TestDirentParse(t *testing.T) {
	s, _, _ := searchTree(t)
	needFast(t, s)
	long := strings.Repeat("n", 255)
	if err := os.WriteFile(filepath.Join(s.Root(), long), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ref, err := rootFS{root: s.root}.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.searchFS(nil).ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	str := func(ents []fs.DirEntry) []string {
		var out []string
		for _, e := range ents {
			out = append(out, fmt.Sprintf("%q %v %v", e.Name(), e.Type(), e.IsDir()))
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(str(got), str(ref)) {
		t.Errorf("listing:\n%q\nos.File.ReadDir:\n%q", str(got), str(ref))
	}
	if !slices.ContainsFunc(got, func(e fs.DirEntry) bool { return e.Name() == long }) {
		t.Error("the 255-byte name is missing")
	}
	if _, _, ok := nextDirent(make([]byte, 10)); ok {
		t.Error("a short record parsed")
	}
}
