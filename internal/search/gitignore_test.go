package search

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ignoreCase is a tree's ignore files (keyed by the directory holding the
// .gitignore, "" the root, or ".git/info/exclude") and, for paths (a
// trailing "/" for a directory), whether git ignores them: the path
// itself, or a directory above it.
type ignoreCase struct {
	name  string
	files map[string]string
	want  map[string]bool
}

// The cases follow gitignore(5) and git's tests; TestGitignoreAgainstGit
// checks each one against git check-ignore.
var ignoreCases = []ignoreCase{
	{"dir only", map[string]string{"": "foo/\n"}, map[string]bool{
		"foo/": true, "foo/x.go": true, "a/foo/": true, "a/foo/y": true, "b/foo": false, "foox/": false,
	}},
	{"anchored dir", map[string]string{"": "doc/frotz/\n"}, map[string]bool{
		"doc/frotz/": true, "doc/frotz/a": true, "a/doc/frotz/": false, "doc/frotzx/": false,
	}},
	{"base name at any depth", map[string]string{"": "*.html\nfrotz/\n"}, map[string]bool{
		"a.html": true, "x/y/b.html": true, "a.htm": false, "a/frotz/": true, "frotz/z": true, "html": false,
	}},
	{"leading slash anchors", map[string]string{"": "/*.c\n"}, map[string]bool{
		"cat-file.c": true, "mozilla-sha1/sha1.c": false,
	}},
	{"middle slash anchors", map[string]string{"": "a/b\n"}, map[string]bool{
		"a/b/": true, "a/b/c": true, "c/a/b": false, "a/bc": false, "x/a/b": false,
	}},
	{"leading double star", map[string]string{"": "**/foo\n**/x/bar\n"}, map[string]bool{
		"foo": true, "a/foo": true, "a/b/foo/": true, "x/bar": true, "q/x/bar": true, "bar": false, "a/bar": false,
	}},
	{"trailing double star", map[string]string{"": "abc/**\n"}, map[string]bool{
		"abc/": false, "abc/x": true, "abc/d/e": true, "x/abc/y": false,
	}},
	{"middle double star", map[string]string{"": "a/**/b\n"}, map[string]bool{
		"a/b": true, "a/x/b": true, "a/x/y/b": true, "a/xb": false, "ab": false, "z/a/b": false,
	}},
	{"other double stars are stars", map[string]string{"": "foo**bar\n"}, map[string]bool{
		"foobar": true, "fooxbar": true, "foo/bar": false,
	}},
	{"single star stays in one element", map[string]string{"": "a/*/c\n"}, map[string]bool{
		"a/b/c": true, "a/c": false, "a/b/x/c": false,
	}},
	{"everything but foo/bar", map[string]string{"": "/*\n!/foo\n/foo/*\n!/foo/bar\n"}, map[string]bool{
		"a": true, "foo/": false, "foo/a": true, "foo/bar/": false, "foo/bar/x": false, "x/": true,
	}},
	{"negation", map[string]string{"": "*.log\n!important.log\n"}, map[string]bool{
		"a.log": true, "important.log": false, "d/important.log": false, "d/b.log": true,
	}},
	{"last rule wins", map[string]string{"": "!a.log\n*.log\n"}, map[string]bool{
		"a.log": true,
	}},
	{"no re-include below an excluded directory", map[string]string{"": "build/\n!build/keep.txt\n"}, map[string]bool{
		"build/keep.txt": true, "build/": true,
	}},
	{"re-include a directory", map[string]string{"": "*\n!*/\n!*.go\n"}, map[string]bool{
		"a.go": false, "a.txt": true, "d/": false, "d/b.go": false, "d/b.txt": true,
	}},
	{"comments blanks escapes", map[string]string{"": "# comment\n\n\\#hash\n\\!bang\n   \n#notme\n"}, map[string]bool{
		"#hash": true, "!bang": true, "# comment": false, "#notme": false, "comment": false,
	}},
	{"trailing spaces", map[string]string{"": "spaces   \nkept\\ \nmid dle\n"}, map[string]bool{
		"spaces": true, "spaces   ": false, "kept ": true, "kept": false, "mid dle": true,
	}},
	{"crlf and bom", map[string]string{"": "\xef\xbb\xbfbom\r\ncrlf\r\nlast"}, map[string]bool{
		"bom": true, "crlf": true, "last": true, "crlf\r": false,
	}},
	{"question mark and classes", map[string]string{"": "?.c\nfile[0-9].txt\n[!a]*.md\n[[:digit:]]x\n[a-c-e]q\n[]]r\n"}, map[string]bool{
		"a.c": true, "ab.c": false, "file5.txt": true, "filex.txt": false, "b.md": true, "a.md": false,
		"7x": true, "ax": false, "bq": true, "-q": true, "eq": true, "dq": false, "]r": true,
	}},
	{"escaped wildcards", map[string]string{"": "\\*star\nq\\?\n"}, map[string]bool{
		"*star": true, "xstar": false, "q?": true, "qa": false,
	}},
	{"nested override", map[string]string{"": "*.txt\n", "sub": "!keep.txt\n"}, map[string]bool{
		"keep.txt": true, "sub/keep.txt": false, "sub/other.txt": true, "sub/deep/keep.txt": false,
	}},
	{"nested anchored", map[string]string{"sub": "/x\ny/z\n"}, map[string]bool{
		"sub/x": true, "sub/y/x": false, "x": false, "sub/y/z": true, "sub/q/y/z": false, "y/z": false,
	}},
	{"nested cannot re-include ignored parent", map[string]string{"": "sub/\n", "sub": "!a\n"}, map[string]bool{
		"sub/a": true,
	}},
	{"info exclude", map[string]string{".git/info/exclude": "*.tmp\nsecret\n", "": "!keep.tmp\n"}, map[string]bool{
		"a.tmp": true, "keep.tmp": false, "d/secret": true,
	}},
	{"dir pattern with star", map[string]string{"": "node_*/\n"}, map[string]bool{
		"node_modules/": true, "node_modules/x/y.js": true, "node_x": false,
	}},
}

// treeIgnored reports whether p is ignored as the walk decides: each
// directory above it, then p, checked against the files that apply there.
func treeIgnored(files map[string]string, p string) bool {
	isDir := strings.HasSuffix(p, "/")
	p = strings.TrimSuffix(p, "/")
	var ign *ignores
	if s, ok := files[".git/info/exclude"]; ok {
		ign = ign.push(parseIgnore("", []byte(s)))
	}
	elems := strings.Split(p, "/")
	for i := range elems {
		dir := strings.Join(elems[:i], "/")
		if s, ok := files[dir]; ok {
			ign = ign.push(parseIgnore(dir, []byte(s)))
		}
		sub := strings.Join(elems[:i+1], "/")
		if ign.ignored(sub, i < len(elems)-1 || isDir) {
			return true
		}
	}
	return false
}

func TestGitignore(t *testing.T) {
	for _, c := range ignoreCases {
		t.Run(c.name, func(t *testing.T) {
			for p, want := range c.want {
				if got := treeIgnored(c.files, p); got != want {
					t.Errorf("%q ignored = %v, want %v", p, got, want)
				}
			}
		})
	}
}

// TestGitignoreAgainstGit checks the table's expectations against git
// itself, so the table is git's behaviour rather than this package's
// reading of the documentation.
func TestGitignoreAgainstGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	for _, c := range ignoreCases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			run := func(stdin string, args ...string) string {
				cmd := exec.Command(git, args...)
				cmd.Dir = dir
				cmd.Stdin = strings.NewReader(stdin)
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "XDG_CONFIG_HOME="+dir)
				out, err := cmd.Output()
				if e, ok := err.(*exec.ExitError); err != nil && (!ok || e.ExitCode() > 1) {
					t.Fatalf("git %v: %v", args, err)
				}
				return string(out)
			}
			run("", "init", "-q")
			var paths []string
			for p := range c.want {
				full := filepath.Join(dir, filepath.FromSlash(p))
				if strings.HasSuffix(p, "/") {
					mustMkdir(t, full)
				} else {
					mustMkdir(t, filepath.Dir(full))
					mustWrite(t, full, "x")
				}
				paths = append(paths, strings.TrimSuffix(p, "/"))
			}
			for d, s := range c.files {
				name := filepath.Join(dir, d, ".gitignore")
				if d == ".git/info/exclude" {
					name = filepath.Join(dir, d)
				}
				mustMkdir(t, filepath.Dir(name))
				mustWrite(t, name, s)
			}
			slices.Sort(paths)
			out := run(strings.Join(paths, "\x00")+"\x00", "check-ignore", "--no-index", "-z", "--stdin")
			got := map[string]bool{}
			for _, p := range strings.Split(strings.TrimSuffix(out, "\x00"), "\x00") {
				got[p] = true
			}
			for p, want := range c.want {
				if got[strings.TrimSuffix(p, "/")] != want {
					t.Errorf("git says %q ignored = %v, the table %v", p, !want, want)
				}
			}
		})
	}
}

func mustMkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t testing.TB, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWildmatch(t *testing.T) {
	// From git's t/t3070-wildmatch.sh (the WM_PATHNAME column).
	cases := []struct {
		pattern, text string
		want          bool
	}{
		{"foo", "foo", true},
		{"bar", "foo", false},
		{"???", "foo", true},
		{"??", "foo", false},
		{"*", "foo", true},
		{"f*", "foo", true},
		{"*f", "foo", false},
		{"*foo*", "foo", true},
		{"*ob*a*r*", "foobar", true},
		{"*ab", "aaaaaaabababab", true},
		{`foo\*`, "foo*", true},
		{`foo\*bar`, "foobar", false},
		{`f\\oo`, `f\oo`, true},
		{"*[al]?", "ball", true},
		{"[ten]", "ten", false},
		{"**[!te]", "ten", true},
		{"**[!ten]", "ten", false},
		{"t[a-g]n", "ten", true},
		{"t[!a-g]n", "ten", false},
		{"t[!a-g]n", "ton", true},
		{"t[^a-g]n", "ton", true},
		{"a[]]b", "a]b", true},
		{"a[]-]b", "a-b", true},
		{"a[]-]b", "a]b", true},
		{"a[]-]b", "aab", false},
		{"a[]a-]b", "aab", true},
		{"]", "]", true},
		{"foo*bar", "foo/baz/bar", false},
		{"foo**bar", "foo/baz/bar", false},
		{"foo**bar", "foobazbar", true},
		{"foo/**/bar", "foo/baz/bar", true},
		{"foo/**/**/bar", "foo/baz/bar", true},
		{"foo/**/bar", "foo/b/a/z/bar", true},
		{"foo/**/bar", "foo/bar", true},
		{"foo/**/**/bar", "foo/bar", true},
		{"foo?bar", "foo/bar", false},
		{"foo[/]bar", "foo/bar", false},
		{"foo[^a-z]bar", "foo/bar", false},
		{"f[^eiu][^eiu][^eiu][^eiu][^eiu]r", "foo-bar", true},
		{"**/foo", "foo", true},
		{"**/foo", "XXX/foo", true},
		{"**/foo", "bar/baz/foo", true},
		{"*/foo", "bar/baz/foo", false},
		{"**/bar*", "foo/bar/baz", false},
		{"**/bar/*", "deep/foo/bar/baz", true},
		{"**/bar/*", "deep/foo/bar/baz/", false},
		{"**/bar/**", "deep/foo/bar/baz/", true},
		{"**/bar/*", "deep/foo/bar", false},
		{"**/bar/**", "deep/foo/bar/", true},
		{"**/bar**", "foo/bar/baz", false},
		{"*/bar/**", "deep/foo/bar/baz/x", false},
		{"**/bar/*/*", "deep/foo/bar/baz/x", true},
		{"a[c-c]st", "acrt", false},
		{"a[c-c]rt", "acrt", true},
		{"[!]-]", "]", false},
		{"[!]-]", "a", true},
		{`\`, "", false},
		{`\`, `\`, false},
		{`*/\`, `XXX/\`, false},
		{`*/\\`, `XXX/\`, true},
		{"foo", "foo", true},
		{"@foo", "@foo", true},
		{"@foo", "foo", false},
		{`\[ab]`, "[ab]", true},
		{"[[]ab]", "[ab]", true},
		{"[[:]ab]", "[ab]", true},
		{"[[::]ab]", "[ab]", false},
		{"[[:digit]ab]", "[ab]", true},
		{`[\[:]ab]`, "[ab]", true},
		{`\??\?b`, "?a?b", true},
		{`\a\b\c`, "abc", true},
		{"", "foo", false},
		{"**/t[o]", "foo/bar/baz/to", true},
		{"[[:alpha:]][[:digit:]][[:upper:]]", "a1B", true},
		{"[[:digit:][:upper:][:space:]]", "a", false},
		{"[[:digit:][:upper:][:space:]]", "A", true},
		{"[[:digit:][:upper:][:space:]]", "1", true},
		{"[[:digit:][:upper:][:spaci:]]", "1", false},
		{"[[:digit:][:upper:][:space:]]", " ", true},
		{"[[:digit:][:upper:][:space:]]", ".", false},
		{"[[:digit:][:punct:][:space:]]", ".", true},
		{"[[:xdigit:]]", "5", true},
		{"[[:xdigit:]]", "f", true},
		{"[[:xdigit:]]", "D", true},
		{"[a-c[:digit:]x-z]", "5", true},
		{"[a-c[:digit:]x-z]", "b", true},
		{"[a-c[:digit:]x-z]", "y", true},
		{"[a-c[:digit:]x-z]", "q", false},
		{"[\\-^]", "]", false},
		{"[\\-^]", "[", false},
		{"[\\-_]", "-", true},
		{"[\\]]", "]", true},
		{"[\\]]", "\\]", false},
		{"[\\]]", "\\", false},
		{"a[]b", "ab", false},
		{"a[]b", "a[]b", false},
		{"ab[", "ab[", false},
		{"[!", "ab", false},
		{"[-", "ab", false},
		{"[-]", "-", true},
		{"[a-", "-", false},
		{"[!a-", "-", false},
		{"[--A]", "-", true},
		{"[--A]", "5", true},
		{"[ --]", " ", true},
		{"[ --]", "$", true},
		{"[ --]", "-", true},
		{"[ --]", "0", false},
		{"[---]", "-", true},
		{"[------]", "-", true},
		{"[a-e-n]", "j", false},
		{"[a-e-n]", "-", true},
		{"[!------]", "a", true},
		{"[]-a]", "[", false},
		{"[]-a]", "^", true},
		{"[!]-a]", "^", false},
		{"[!]-a]", "[", true},
		{"[a^bc]", "^", true},
		{"[a-]b]", "-b]", true},
		{`[\]`, `\`, false},
		{`[\\]`, `\`, true},
		{`[!\\]`, `\`, false},
		{"[A-\\\\]", "G", true},
		{"b*a", "aaabbb", false},
		{"*ba*", "aabcaa", false},
		{"[,]", ",", true},
		{"[\\\\,]", ",", true},
		{"[\\\\,]", "\\", true},
		{"[,-.]", "-", true},
		{"[,-.]", "+", false},
		{"[,-.]", "-.]", false},
		{"[\\1-\\3]", "2", true},
		{"[\\1-\\3]", "3", true},
		{"[\\1-\\3]", "4", false},
		{"[[-\\]]", "\\", true},
		{"[[-\\]]", "[", true},
		{"[[-\\]]", "]", true},
		{"[[-\\]]", "-", false},
		{"-*-*-*-*-*-*-12-*-*-*-m-*-*-*", "-adobe-courier-bold-o-normal--12-120-75-75-m-70-iso8859-1", true},
		{"-*-*-*-*-*-*-12-*-*-*-m-*-*-*", "-adobe-courier-bold-o-normal--12-120-75-75-X-70-iso8859-1", false},
		{"-*-*-*-*-*-*-12-*-*-*-m-*-*-*", "-adobe-courier-bold-o-normal--12-120-75-75-/-70-iso8859-1", false},
		{"XXX/*/*/*/*/*/*/12/*/*/*/m/*/*/*", "XXX/adobe/courier/bold/o/normal//12/120/75/75/m/70/iso8859/1", true},
		{"XXX/*/*/*/*/*/*/12/*/*/*/m/*/*/*", "XXX/adobe/courier/bold/o/normal//12/120/75/75/X/70/iso8859/1", false},
		{"**/*a*b*g*n*t", "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txt", true},
		{"**/*a*b*g*n*t", "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txtz", false},
		{"*/*/*", "foo", false},
		{"*/*/*", "foo/bar", false},
		{"*/*/*", "foo/bba/arr", true},
		{"*/*/*", "foo/bb/aa/rr", false},
		{"**/**/**", "foo/bb/aa/rr", true},
		{"*X*i", "abcXdefXghi", true},
		{"*X*i", "ab/cXd/efXg/hi", false},
		{"*/*X*/*/*i", "ab/cXd/efXg/hi", true},
		{"**/*X*/**/*i", "ab/cXd/efXg/hi", true},
	}
	for _, c := range cases {
		if got := wildmatch(c.pattern, c.text); got != c.want {
			t.Errorf("wildmatch(%q, %q) = %v, want %v", c.pattern, c.text, got, c.want)
		}
	}
}

func FuzzGitignore(f *testing.F) {
	f.Add("*.go", "a/b.go")
	f.Add("/a/**/b/", "a/x/b")
	f.Add("[!a-c]?\\*", "x/d**")
	f.Add("a/**/**/**/**/*b", "a/a/a/a/a/a/a/a/a/a/a/a/a/a/c")
	f.Add("\\#x \\ ", "#x  ")
	f.Fuzz(func(t *testing.T, pattern, p string) {
		if p == "" || strings.ContainsAny(p, "\x00\n") || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//") {
			return
		}
		pattern, _, _ = strings.Cut(pattern, "\n")
		pattern, _, _ = strings.Cut(pattern, "\x00") // git reads lines as C strings
		one := parseIgnore("", []byte(pattern))
		for _, isDir := range []bool{false, true} {
			(&ignores{file: one}).ignored(p, isDir) // never panics
			// A pattern followed by its negation ignores nothing.
			both := parseIgnore("", []byte(pattern+"\n!"+pattern))
			if (&ignores{file: both}).ignored(p, isDir) {
				t.Errorf("%q then !%q ignores %q (dir %v)", pattern, pattern, p, isDir)
			}
		}
		// A pattern with a trailing "/" never ignores a file.
		dirs := parseIgnore("", []byte(pattern+"/"))
		if (&ignores{file: dirs}).ignored(p, false) {
			t.Errorf("%q/ ignores the file %q", pattern, p)
		}
		// Under a directory, the same rules see the same relative paths.
		nested := parseIgnore("sub", []byte(pattern))
		if a, b := (&ignores{file: one}).ignored(p, false), (&ignores{file: nested}).ignored("sub/"+p, false); a != b {
			t.Errorf("%q: %q ignored %v, sub/%q ignored %v under sub/.gitignore", pattern, p, a, p, b)
		}
		// A pattern without wildcards matches by comparison.
		if !strings.ContainsAny(pattern, globSpecial) && wildmatch(pattern, p) != (pattern == p) {
			t.Errorf("wildmatch(%q, %q) = %v", pattern, p, !(pattern == p))
		}
		// "**" matches everything, "*" every single element.
		if !wildmatch("**", p) || wildmatch("*", p) == strings.Contains(p, "/") {
			t.Errorf("** or * wrong on %q", p)
		}
	})
}
