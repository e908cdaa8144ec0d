package search

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/cfgerr"
	"github.com/hutchsandbox/hutch/sandbox"
)

// rootFS is an FS over os.Root, as hostfs's will be.
type rootFS struct {
	root *os.Root

	mu     sync.Mutex
	listed []string // the directories ReadDir was asked for
}

func (r *rootFS) ReadDir(name string) ([]fs.DirEntry, error) {
	r.mu.Lock()
	r.listed = append(r.listed, name)
	r.mu.Unlock()
	f, err := r.root.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A directory opened in an os.Root lists with an fstatat per entry
	// (os.newUnixDirent); a duplicate of its descriptor outside the Root
	// lists with the dirents' own types (and fstatat on the descriptor,
	// never a path, where a file system gives none).
	sc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	if cerr := sc.Control(func(s uintptr) { fd, err = syscall.Dup(int(s)) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	return d.ReadDir(-1)
}

func (r *rootFS) Open(name string) (fs.File, error) {
	return r.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// tree writes files (a path ending in "/" is a directory; content
// "->target" makes a symbolic link) under a new temporary root and returns
// an FS over it.
func tree(t testing.TB, files map[string]string) (*rootFS, string) {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			mustMkdir(t, full)
			continue
		}
		mustMkdir(t, filepath.Dir(full))
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mustWrite(t, full, content)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return &rootFS{root: root}, dir
}

func run(t testing.TB, fsys FS, req sandbox.SearchRequest) sandbox.SearchResult {
	t.Helper()
	res, err := Run(context.Background(), fsys, req)
	if err != nil {
		t.Fatalf("Run(%+v): %v", req, err)
	}
	return res
}

// where lists the matches as path:line:text.
func where(res sandbox.SearchResult) []string {
	var out []string
	for _, m := range res.Matches {
		out = append(out, fmt.Sprintf("%s:%d:%s", m.Path, m.Line, m.Text))
	}
	return out
}

func paths(res sandbox.SearchResult) []string {
	var out []string
	for _, f := range res.Files {
		out = append(out, f.Path)
	}
	return out
}

var basic = map[string]string{
	"a.go":       "package a\n\nfunc Hello() {}\n// hello again\n",
	"b.txt":      "nothing here\n",
	"sub/c.go":   "package sub\nfunc hello() {}\n",
	"sub/d.md":   "# Hello\n",
	"a-c/e.go":   "func Hello2() {}\n",
	"sub/x/f.go": "no\n",
}

func TestModes(t *testing.T) {
	fsys, _ := tree(t, basic)
	cases := []struct {
		name string
		req  sandbox.SearchRequest
		want sandbox.SearchResult
	}{
		{"content", sandbox.SearchRequest{Pattern: "Hello"}, sandbox.SearchResult{Searched: 6, Matches: []sandbox.SearchMatch{
			{Path: "a-c/e.go", Line: 1, Text: "func Hello2() {}"},
			{Path: "a.go", Line: 3, Text: "func Hello() {}"},
			{Path: "sub/d.md", Line: 1, Text: "# Hello"},
		}}},
		{"files", sandbox.SearchRequest{Pattern: "Hello", Mode: sandbox.SearchFiles}, sandbox.SearchResult{Searched: 6, Files: []sandbox.SearchFile{
			{Path: "a-c/e.go"}, {Path: "a.go"}, {Path: "sub/d.md"},
		}}},
		{"count ignoring case", sandbox.SearchRequest{Pattern: "hello", IgnoreCase: true, Mode: sandbox.SearchCount}, sandbox.SearchResult{Searched: 6, Files: []sandbox.SearchFile{
			{Path: "a-c/e.go", Count: 1}, {Path: "a.go", Count: 2}, {Path: "sub/c.go", Count: 1}, {Path: "sub/d.md", Count: 1},
		}}},
		{"files without a pattern", sandbox.SearchRequest{}, sandbox.SearchResult{Files: []sandbox.SearchFile{
			{Path: "a-c/e.go"}, {Path: "a.go"}, {Path: "b.txt"}, {Path: "sub/c.go"}, {Path: "sub/d.md"}, {Path: "sub/x/f.go"},
		}}},
		{"glob by base name", sandbox.SearchRequest{Glob: "*.go"}, sandbox.SearchResult{Files: []sandbox.SearchFile{
			{Path: "a-c/e.go"}, {Path: "a.go"}, {Path: "sub/c.go"}, {Path: "sub/x/f.go"},
		}}},
		{"glob by path", sandbox.SearchRequest{Glob: "sub/**/*.go", Pattern: "."}, sandbox.SearchResult{Searched: 2, Matches: []sandbox.SearchMatch{
			{Path: "sub/c.go", Line: 1, Text: "package sub"},
			{Path: "sub/c.go", Line: 2, Text: "func hello() {}"},
			{Path: "sub/x/f.go", Line: 1, Text: "no"},
		}}},
		{"glob outside dir", sandbox.SearchRequest{Dir: "a-c", Glob: "sub/*.go"}, sandbox.SearchResult{}},
		{"dir", sandbox.SearchRequest{Dir: "sub", Pattern: "hello", IgnoreCase: true}, sandbox.SearchResult{Searched: 3, Matches: []sandbox.SearchMatch{
			{Path: "sub/c.go", Line: 2, Text: "func hello() {}"},
			{Path: "sub/d.md", Line: 1, Text: "# Hello"},
		}}},
		{"dir a file", sandbox.SearchRequest{Dir: "./sub/c.go", Pattern: "hello", Glob: "*.md"}, sandbox.SearchResult{Searched: 1, Matches: []sandbox.SearchMatch{
			{Path: "sub/c.go", Line: 2, Text: "func hello() {}"},
		}}},
		{"literal", sandbox.SearchRequest{Pattern: "() {}", Literal: true, Mode: sandbox.SearchCount}, sandbox.SearchResult{Searched: 6, Files: []sandbox.SearchFile{
			{Path: "a-c/e.go", Count: 1}, {Path: "a.go", Count: 1}, {Path: "sub/c.go", Count: 1},
		}}},
		{"anchors are line ends", sandbox.SearchRequest{Pattern: `^func|\Apackage|\}\z`, Mode: sandbox.SearchCount}, sandbox.SearchResult{Searched: 6, Files: []sandbox.SearchFile{
			{Path: "a-c/e.go", Count: 1}, {Path: "a.go", Count: 2}, {Path: "sub/c.go", Count: 2},
		}}},
		{"no match across lines", sandbox.SearchRequest{Pattern: `sub\sfunc`}, sandbox.SearchResult{Searched: 6}},
		{"empty lines", sandbox.SearchRequest{Pattern: `^$`}, sandbox.SearchResult{Searched: 6, Matches: []sandbox.SearchMatch{
			{Path: "a.go", Line: 2, Text: ""},
		}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := run(t, fsys, c.req)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestContext(t *testing.T) {
	var lines []string
	for i := 1; i <= 20; i++ {
		lines = append(lines, fmt.Sprint("l", i))
	}
	lines[4], lines[6], lines[15] = "hit5", "hit7", "hit16"
	fsys, _ := tree(t, map[string]string{"f": strings.Join(lines, "\n") + "\n"})
	res := run(t, fsys, sandbox.SearchRequest{Pattern: "hit", Context: 2})
	want := []sandbox.SearchMatch{
		{Path: "f", Line: 5, Text: "hit5", Before: []string{"l3", "l4"}, After: []string{"l6"}},
		{Path: "f", Line: 7, Text: "hit7", After: []string{"l8", "l9"}},
		{Path: "f", Line: 16, Text: "hit16", Before: []string{"l14", "l15"}, After: []string{"l17", "l18"}},
	}
	if !reflect.DeepEqual(res.Matches, want) {
		t.Errorf("got  %+v\nwant %+v", res.Matches, want)
	}
	// Beyond the bound, and at the file's ends.
	var many []string
	for i := 1; i <= 60; i++ {
		many = append(many, fmt.Sprint("m", i))
	}
	fsys, _ = tree(t, map[string]string{"g": strings.Join(many, "\n")})
	res = run(t, fsys, sandbox.SearchRequest{Pattern: "^m(1|30|60)$", Context: 99})
	if n := len(res.Matches); n != 3 || len(res.Matches[0].Before) != 0 || len(res.Matches[0].After) != 20 ||
		len(res.Matches[1].Before) != 8 || len(res.Matches[1].After) != 20 || res.Matches[1].After[19] != "m50" ||
		len(res.Matches[2].Before) != 9 || len(res.Matches[2].After) != 0 {
		t.Errorf("bounds and ends: %+v", res.Matches)
	}
}

func TestPatterns(t *testing.T) {
	long := strings.Repeat("x", 2000) + "NEEDLE" + strings.Repeat("y", 2000)
	fsys, _ := tree(t, map[string]string{
		"meta":     "a.b*c\naxbbc\n(x)[y]\n",
		"evil":     strings.Repeat("a", 30) + "b\n",
		"bin":      "text\x00more text\n",
		"lateNUL":  strings.Repeat("z", 9000) + "\x00text\n",
		"utf8":     "bad \xff\xfe text\n",
		"long":     long + "\n",
		"crlf":     "dos text\r\nline\r\n",
		"kelvin":   "\u212a\n",
		"noEOL":    "last text",
		"twoBytes": "é text é\n",
	})
	cases := []struct {
		name string
		req  sandbox.SearchRequest
		want []string
	}{
		{"literal metacharacters", sandbox.SearchRequest{Pattern: "a.b*c", Literal: true}, []string{"meta:1:a.b*c"}},
		{"regexp metacharacters", sandbox.SearchRequest{Pattern: "a.b*c"}, []string{"meta:2:axbbc"}},
		{"literal brackets", sandbox.SearchRequest{Pattern: "(x)[y]", Literal: true}, []string{"meta:3:(x)[y]"}},
		{"ignore case literal", sandbox.SearchRequest{Pattern: "AXBBC", Literal: true, IgnoreCase: true}, []string{"meta:2:axbbc"}},
		{"ignore case folds Kelvin", sandbox.SearchRequest{Pattern: "k", IgnoreCase: true, Literal: true}, []string{"kelvin:1:\u212a"}},
		{"catastrophic in PCRE", sandbox.SearchRequest{Pattern: "(a+)+$", Glob: "evil"}, nil},
		{"binary skipped, late NUL searched", sandbox.SearchRequest{Pattern: "text", Glob: "{bin,lateNUL}", Mode: sandbox.SearchFiles}, nil},
		{"invalid UTF-8", sandbox.SearchRequest{Pattern: "bad"}, []string{"utf8:1:bad \ufffd text"}},
		{"carriage return", sandbox.SearchRequest{Pattern: "text$", Glob: "crlf"}, nil},
		{"carriage return shown", sandbox.SearchRequest{Pattern: "dos"}, []string{"crlf:1:dos text"}},
		{"no final newline", sandbox.SearchRequest{Pattern: "text$", Glob: "noEOL"}, []string{"noEOL:1:last text"}},
		{"two-byte letters", sandbox.SearchRequest{Pattern: "^é.*é$"}, []string{"twoBytes:1:é text é"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, fsys, c.req)
			if got := where(res); !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	res := run(t, fsys, sandbox.SearchRequest{Pattern: "text", Mode: sandbox.SearchFiles})
	if want := []string{"crlf", "lateNUL", "noEOL", "twoBytes", "utf8"}; !slices.Equal(paths(res), want) || res.Skipped != 1 {
		t.Errorf("binary: files %q skipped %d, want %q and 1 (bin)", paths(res), res.Skipped, want)
	}
	for _, pat := range []string{"NEEDLE", "x+NEEDLE"} {
		res = run(t, fsys, sandbox.SearchRequest{Pattern: pat})
		if len(res.Matches) != 1 {
			t.Fatalf("long line: %+v", res)
		}
		text := res.Matches[0].Text
		if !strings.Contains(text, "NEEDLE") || !strings.HasSuffix(text, "… [line cut, 4006 bytes]") || len(text) > sandbox.MaxSearchLine+50 {
			t.Errorf("%s: long line shown as %q", pat, text)
		}
	}
}

func TestIgnored(t *testing.T) {
	fsys, _ := tree(t, map[string]string{
		".gitignore":              "node_modules/\n*.log\n!keep.log\n/build\n",
		"node_modules/pkg/x.js":   "needle\n",
		"app.js":                  "needle\n",
		"a.log":                   "needle\n",
		"keep.log":                "needle\n",
		"build/out":               "needle\n",
		"src/build/in":            "needle\n",
		"src/.gitignore":          "*.gen\n!keep.log\n",
		"src/x.gen":               "needle\n",
		"src/deep/y.gen":          "needle\n",
		"src/deep/keep.log":       "needle\n",
		"x.gen":                   "needle\n",
		".git/config":             "needle\n",
		".git/info/exclude":       "secret\n",
		"secret":                  "needle\n",
		"sub/.git":                "needle\n", // a worktree's .git file
		"ignoredlink":             "->node_modules",
		"node_modules/.gitignore": "!x.js\n",
	})
	res := run(t, fsys, sandbox.SearchRequest{Pattern: "needle", Mode: sandbox.SearchFiles})
	want := []string{"app.js", "keep.log", "src/build/in", "src/deep/keep.log", "x.gen"}
	if !slices.Equal(paths(res), want) {
		t.Errorf("got %q, want %q", paths(res), want)
	}
	for _, d := range fsys.listed {
		if d == "node_modules" || d == "build" || strings.HasPrefix(d, ".git") {
			t.Errorf("%s was listed: ignored directories and .git must be pruned", d)
		}
	}
	res = run(t, fsys, sandbox.SearchRequest{Pattern: "needle", Mode: sandbox.SearchFiles, IncludeIgnored: true})
	want = []string{"a.log", "app.js", "build/out", "keep.log", "node_modules/pkg/x.js", "secret", "src/build/in", "src/deep/keep.log", "src/deep/y.gen", "src/x.gen", "x.gen"}
	if !slices.Equal(paths(res), want) {
		t.Errorf("include ignored: got %q, want %q", paths(res), want)
	}
	// Dir names an ignored directory: it is walked, with the rules that
	// apply below it; ancestors' .gitignore files apply too.
	res = run(t, fsys, sandbox.SearchRequest{Pattern: "needle", Dir: "node_modules", Mode: sandbox.SearchFiles})
	if want := []string{"node_modules/pkg/x.js"}; !slices.Equal(paths(res), want) {
		t.Errorf("dir node_modules: got %q, want %q", paths(res), want)
	}
	res = run(t, fsys, sandbox.SearchRequest{Pattern: "needle", Dir: "src/deep", Mode: sandbox.SearchFiles})
	if want := []string{"src/deep/keep.log"}; !slices.Equal(paths(res), want) {
		t.Errorf("dir src/deep: got %q, want %q", paths(res), want)
	}
	// A glob's base below Dir starts the walk there, with the same rules.
	res = run(t, fsys, sandbox.SearchRequest{Glob: "src/deep/*", Mode: sandbox.SearchFiles})
	if want := []string{"src/deep/keep.log"}; !slices.Equal(paths(res), want) {
		t.Errorf("glob src/deep/*: got %q, want %q", paths(res), want)
	}
	res = run(t, fsys, sandbox.SearchRequest{Glob: "node_modules/**"})
	if len(res.Files) != 0 {
		t.Errorf("glob node_modules/**: got %q, want nothing (ignored)", paths(res))
	}
}

func TestLinksAndSpecialFiles(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.txt")
	mustWrite(t, outside, "needle outside\n")
	fsys, dir := tree(t, map[string]string{
		"real/file.txt": "needle real\n",
		"linkdir":       "->real",
		"linkfile":      "->real/file.txt",
		"linkout":       "->" + outside,
		"linkup":        "->../../outside.txt",
		"dangling":      "->nowhere",
		"loop":          "->loop",
	})
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("fifo", filepath.Join(dir, "linkfifo")); err != nil {
		t.Fatal(err)
	}
	done := make(chan sandbox.SearchResult)
	go func() { done <- run(t, fsys, sandbox.SearchRequest{Pattern: "needle"}) }()
	var res sandbox.SearchResult
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the search blocked (on the FIFO?)")
	}
	if want := []string{"linkfile:1:needle real", "real/file.txt:1:needle real"}; !slices.Equal(where(res), want) {
		t.Errorf("got %q, want %q", where(res), want)
	}
	if res.Skipped != 0 || res.Searched != 2 {
		t.Errorf("searched %d skipped %d, want 2 and 0", res.Searched, res.Skipped)
	}
	res = run(t, fsys, sandbox.SearchRequest{})
	if want := []string{"linkfile", "real/file.txt"}; !slices.Equal(paths(res), want) {
		t.Errorf("files: got %q, want %q", paths(res), want)
	}
	// Dir may be a link inside the root.
	res = run(t, fsys, sandbox.SearchRequest{Dir: "linkdir", Pattern: "needle"})
	if want := []string{"linkdir/file.txt:1:needle real"}; !slices.Equal(where(res), want) {
		t.Errorf("dir linkdir: got %q, want %q", where(res), want)
	}
	_, err := Run(context.Background(), fsys, sandbox.SearchRequest{Dir: "linkout", Pattern: "needle"})
	if err == nil {
		t.Error("dir linkout: no error")
	}
}

func TestBounds(t *testing.T) {
	files := map[string]string{}
	for i := range 30 {
		files[fmt.Sprintf("f%02d", i)] = strings.Repeat("needle\n", 10)
	}
	fsys, _ := tree(t, files)
	res := run(t, fsys, sandbox.SearchRequest{Pattern: "needle", Limit: 25})
	if len(res.Matches) != 25 || res.More != 275 || res.Matches[24].Path != "f02" || res.Matches[24].Line != 5 {
		t.Errorf("limit 25: %d matches, more %d, last %+v", len(res.Matches), res.More, res.Matches[len(res.Matches)-1])
	}
	res = run(t, fsys, sandbox.SearchRequest{Pattern: "needle", Limit: 7, Mode: sandbox.SearchFiles})
	if len(res.Files) != 7 || res.More != 23 || res.Files[6].Path != "f06" {
		t.Errorf("files limit 7: %+v", res)
	}
	res = run(t, fsys, sandbox.SearchRequest{Pattern: "needle", Limit: 7, Mode: sandbox.SearchCount})
	if len(res.Files) != 7 || res.More != 23 || res.Files[6].Count != 10 {
		t.Errorf("count limit 7: %+v", res)
	}
	// Counting stops at 100 times Limit.
	res = run(t, fsys, sandbox.SearchRequest{Pattern: "needle", Limit: 1})
	if len(res.Matches) != 1 || res.More < 100 || res.More >= 300 {
		t.Errorf("limit 1: more %d, want at least 100 and fewer than all", res.More)
	}
	// MaxSearchBytes: lines of 400 bytes, context 20.
	big := map[string]string{}
	line := strings.Repeat("w", 395) + " hit\n"
	for i := range 20 {
		big[fmt.Sprintf("g%02d", i)] = strings.Repeat(line, 200)
	}
	fsys, _ = tree(t, big)
	res = run(t, fsys, sandbox.SearchRequest{Pattern: "hit", Limit: sandbox.MaxSearchLimit, Context: 20})
	size := 0
	for _, m := range res.Matches {
		size += matchSize(m)
	}
	if size > sandbox.MaxSearchBytes || size < sandbox.MaxSearchBytes-2000 || len(res.Matches)+res.More != 4000 {
		t.Errorf("bytes: %d bytes in %d matches, more %d", size, len(res.Matches), res.More)
	}
}

func TestErrors(t *testing.T) {
	fsys, _ := tree(t, basic)
	cases := []struct {
		req  sandbox.SearchRequest
		kind error
		msg  string
	}{
		{sandbox.SearchRequest{Pattern: "("}, sandbox.ErrConfig, "search: pattern `(` does not compile: missing closing ): fix the expression, or set literal to search for the text as it is"},
		{sandbox.SearchRequest{Pattern: "a{2,99999}"}, sandbox.ErrConfig, "invalid repeat count"},
		{sandbox.SearchRequest{Mode: "lines", Pattern: "x"}, sandbox.ErrConfig, `mode "lines" is unknown`},
		{sandbox.SearchRequest{Mode: sandbox.SearchCount}, sandbox.ErrConfig, "needs a pattern"},
		{sandbox.SearchRequest{Pattern: "x", Limit: -1}, sandbox.ErrConfig, "negative"},
		{sandbox.SearchRequest{Pattern: "x", Context: -1}, sandbox.ErrConfig, "negative"},
		{sandbox.SearchRequest{Pattern: strings.Repeat("x", MaxPattern+1)}, sandbox.ErrConfig, "shorter"},
		{sandbox.SearchRequest{Dir: "../up"}, sandbox.ErrEscape, "leaves the sandbox root"},
		{sandbox.SearchRequest{Dir: "/abs"}, sandbox.ErrInvalidPath, "is absolute"},
		{sandbox.SearchRequest{Dir: "a\x00b"}, sandbox.ErrInvalidPath, "not a valid path"},
		{sandbox.SearchRequest{Glob: "[a"}, sandbox.ErrInvalidPath, "not a valid pattern"},
		{sandbox.SearchRequest{Glob: "src/"}, sandbox.ErrInvalidPath, `use dir "src", or glob "src/**"`},
		{sandbox.SearchRequest{Glob: "../*"}, sandbox.ErrEscape, "leaves"},
		{sandbox.SearchRequest{Glob: strings.Repeat("{a,b}", 9)}, sandbox.ErrInvalidPath, "combinations"},
		{sandbox.SearchRequest{Dir: "missing", Pattern: "x"}, sandbox.ErrNotFound, "search missing: no such file or directory"},
		{sandbox.SearchRequest{Dir: "a.go/x", Pattern: "x"}, syscall.ENOTDIR, "not a directory"},
	}
	for _, c := range cases {
		_, err := Run(context.Background(), fsys, c.req)
		if !errors.Is(err, c.kind) || !strings.Contains(fmt.Sprint(err), c.msg) || strings.Contains(fmt.Sprint(err), "\n") {
			t.Errorf("%+v: error %v, want one line matching %v with %q", c.req, err, c.kind, c.msg)
		}
		if c.kind == sandbox.ErrConfig && !errors.Is(err, cfgerr.ErrAny) {
			t.Errorf("%+v: %v is no configuration error", c.req, err)
		}
	}
	if !errors.Is(sandbox.ErrNotFound, fs.ErrNotExist) {
		t.Fatal("ErrNotFound no longer matches fs.ErrNotExist")
	}
	req, err := Validate(sandbox.SearchRequest{Dir: "sub/../sub/", Glob: "./**/*.go", Limit: 1e9, Context: 1e9})
	want := sandbox.SearchRequest{Dir: "sub", Glob: "**/*.go", Mode: sandbox.SearchFiles, Limit: sandbox.MaxSearchLimit, Context: sandbox.MaxSearchContext}
	if err != nil || req != want {
		t.Errorf("Validate: %+v, %v; want %+v", req, err, want)
	}
}

func TestCancel(t *testing.T) {
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("d%d/f", i)] = "needle\n"
	}
	fsys, _ := tree(t, files)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, fsys, sandbox.SearchRequest{Pattern: "needle"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled before: %v", err)
	}
	// Cancelled during the walk: the FS cancels after some listings.
	c := &cancelFS{rootFS: fsys, after: 20}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if _, err := Run(c.ctx, c, sandbox.SearchRequest{Pattern: "needle"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled during: %v", err)
	}
	if n := len(fsys.listed); n > 40 {
		t.Errorf("%d listings after cancelling at 20: the walk did not stop", n)
	}
}

type cancelFS struct {
	*rootFS
	ctx    context.Context
	cancel context.CancelFunc
	after  int
}

func (c *cancelFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if c.after--; c.after == 0 {
		c.cancel()
	}
	return c.rootFS.ReadDir(name)
}

// TestLargeFileCancel: a search inside one large file checks its context
// at least every window of bytes, whether the lines match or not, so a
// cancelled search stops within a window however slow the regexp is.
func TestLargeFileCancel(t *testing.T) {
	dense := []byte(strings.Repeat("abcdefghij\n", 3<<20))
	sparse := []byte(strings.Repeat(strings.Repeat("abcdefghij\n", 399)+"abcdefghik\n", 8<<10))
	for _, tc := range []struct {
		name, pattern string
		buf           []byte
	}{
		{"no line matches", `[a-j]+k|\d`, dense},
		{"every line matches", `[a-j]+j|\d`, dense},
		{"one line in 400 matches", `[a-j]+[k-l]`, sparse},
		{"literal, no line matches", `needle`, dense},
		{"literal, every line matches", `abc`, dense},
		{"literal, one line in 400 matches", `ik`, sparse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := compile(tc.pattern, false, false)
			if err != nil {
				t.Fatal(err)
			}
			const checks = 3
			ctx := &checkCtx{Context: context.Background(), after: checks}
			reached := 0
			err = m.scan(ctx, tc.buf, nil, func(_, end int) bool { reached = end; return true })
			if err == nil && (m.lit == nil || !strings.Contains(tc.name, "no line")) {
				t.Fatalf("scan of %d bytes ended without an error, want context.Canceled", len(tc.buf))
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("scan = %v, want context.Canceled", err)
			}
			// A check comes once a window has been passed, and the step
			// that passes it may reach a window further.
			if limit := (checks + 1) * 2 * window; reached > limit {
				t.Errorf("scan reported a line ending at byte %d after %d checks of the context, want at most %d", reached, checks, limit)
			}
		})
	}
	// And through Run: a cancelled search over a large file is an error,
	// not a partial result.
	fsys, _ := tree(t, map[string]string{"big": string(dense)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, fsys, sandbox.SearchRequest{Pattern: `[a-j]+k|\d`}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
}

// checkCtx is a context that is cancelled once Err has been called after
// times.
type checkCtx struct {
	context.Context
	after int
}

func (c *checkCtx) Err() error {
	if c.after--; c.after < 0 {
		return context.Canceled
	}
	return nil
}

// TestDeterministic: the same search gives the same result every time,
// however the workers are scheduled.
func TestDeterministic(t *testing.T) {
	files := map[string]string{}
	for i := range 300 {
		files[fmt.Sprintf("d%d/f%d", i%17, i)] = strings.Repeat(fmt.Sprintf("line %d needle\n", i), i%5)
	}
	fsys, _ := tree(t, files)
	for _, mode := range []sandbox.SearchMode{sandbox.SearchContent, sandbox.SearchFiles, sandbox.SearchCount} {
		req := sandbox.SearchRequest{Pattern: "needle", Limit: 50, Mode: mode}
		first := run(t, fsys, req)
		for range 10 {
			if got := run(t, fsys, req); !reflect.DeepEqual(got, first) {
				t.Fatalf("%s: results differ between runs", mode)
			}
		}
		ps := paths(first)
		for _, m := range first.Matches {
			ps = append(ps, m.Path)
		}
		if !slices.IsSorted(ps) {
			t.Errorf("%s: not sorted: %q", mode, ps)
		}
	}
}

// fuzzTree is FuzzRun's fixed tree.
var fuzzTree = map[string]string{
	"a.txt":       "alpha beta\ngamma\n\nδέλτα \xff\n",
	"b/c.go":      "package b\nfunc F() int { return 42 }\n// TODO: x\r\n",
	"b/d/e":       "aaaa\naaab\nAAAA\nKk\u212a\n",
	"noeol":       "x y z",
	".gitignore":  "ign/\n",
	"ign/f":       "alpha\n",
	"empty":       "",
	"nl":          "\n\n\n",
	"b/long.txt":  strings.Repeat("ab", 400) + "\n",
	"b/bin":       "alpha\x00",
	"b/link.txt":  "->../a.txt",
	"b/d/dirlink": "->..",
}

// FuzzRun runs random patterns over a fixed tree: Run never panics, stays
// within its bounds, and counts what a naive line-by-line match counts.
func FuzzRun(f *testing.F) {
	for _, p := range []string{"a", "^$", `\z`, `(?i)k`, "a+$", `\bF\b`, `(?s).`, `[^a]`, "a\nb", `(?-m)^a`, `\Aa|b\z`, "x y"} {
		f.Add(p, false, false, uint8(0), uint8(1))
	}
	f.Add("alpha", true, true, uint8(3), uint8(2))
	fsys, _ := tree(f, fuzzTree)
	f.Fuzz(func(t *testing.T, pattern string, literal, fold bool, context, limit uint8) {
		req := sandbox.SearchRequest{Pattern: pattern, Literal: literal, IgnoreCase: fold, Context: int(context % 25), Limit: int(limit%8) + 1}
		res, err := Run(t.Context(), fsys, req)
		if pattern == "" {
			return
		}
		src := pattern
		if literal {
			src = regexp.QuoteMeta(pattern)
		}
		if fold {
			src = "(?i)" + src
		}
		naive, cerr := regexp.Compile(src)
		if (err != nil) != (cerr != nil) && len(pattern) <= MaxPattern {
			t.Fatalf("Run: %v, regexp.Compile: %v", err, cerr)
		}
		if err != nil {
			return
		}
		if len(res.Matches) > req.Limit {
			t.Errorf("%d matches, limit %d", len(res.Matches), req.Limit)
		}
		total := 0
		for _, m := range res.Matches {
			if len(m.Before) > req.Context || len(m.After) > req.Context || len(m.Text) > sandbox.MaxSearchLine+60 {
				t.Errorf("match out of bounds: %+v", m)
			}
			total += matchSize(m)
		}
		if total > sandbox.MaxSearchBytes {
			t.Errorf("%d bytes", total)
		}
		// Count mode against a naive match of each line.
		cres, err := Run(t.Context(), fsys, sandbox.SearchRequest{Pattern: pattern, Literal: literal, IgnoreCase: fold, Mode: sandbox.SearchCount})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{}
		for p, content := range fuzzTree {
			if strings.HasPrefix(content, "->") || strings.HasPrefix(p, "ign/") || p == "b/bin" || p == ".gitignore" {
				continue
			}
			n := 0
			if content != "" {
				for _, line := range strings.Split(strings.TrimSuffix(content, "\n"), "\n") {
					if naive.MatchString(line) {
						n++
					}
				}
			}
			if n > 0 {
				want[p] = n
			}
		}
		if n, ok := want["a.txt"]; ok {
			want["b/link.txt"] = n
		}
		if c := naiveCount(naive, ".gitignore", fuzzTree); c > 0 {
			want[".gitignore"] = c
		}
		got := map[string]int{}
		for _, f := range cres.Files {
			got[f.Path] = f.Count
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("pattern %q (literal %v, fold %v): counts %v, want %v", pattern, literal, fold, got, want)
		}
		if len(res.Matches)+res.More != sumCounts(got) {
			t.Errorf("content: %d matches + %d more, count mode %d", len(res.Matches), res.More, sumCounts(got))
		}
	})
}

func naiveCount(re *regexp.Regexp, p string, files map[string]string) int {
	n := 0
	for _, line := range strings.Split(strings.TrimSuffix(files[p], "\n"), "\n") {
		if re.MatchString(line) {
			n++
		}
	}
	return n
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}
