// Package sandboxtest is the conformance suite every hutch sandbox tier runs:
// the same file, glob, stat, exec, escape and concurrency checks, so that the
// contract in package sandbox means the same thing on every tier.
//
// A tier's test calls Run with a factory that returns a fresh, empty sandbox:
//
//	func TestConformance(t *testing.T) {
//		sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return virtual.New(virtual.Options{}) }, sandboxtest.Options{})
//	}
package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
)

// Options describe what the suite may assume about a tier.
type Options struct {
	// HostProcesses: the tier's processes are visible in this host's /proc,
	// so the suite can prove that no process outlives a timeout.
	HostProcesses bool

	// Name names the tier in the messages of the cases skipped for what
	// it cannot guarantee ("" is "this tier").
	Name string

	// The fields below say what a tier cannot guarantee. Each skips only
	// the cases that prove that guarantee, and says so (t.Skip); the zero
	// value, all false, runs everything.

	// LexicalPathsOnly: paths are checked only as text, so a symbolic
	// link made on the tier that leads out of the root is not refused.
	LexicalPathsOnly bool
	// NoAtomicWrite: a reader may see a file half written.
	NoAtomicWrite bool
	// NoTreeKill: a timeout stops only what the tier's provider stops, so
	// processes a command started may outlive it.
	NoTreeKill bool
	// NoLiveOutput: output reaches Command.Stdout and Command.Stderr only
	// once the command has ended, so a failing live writer cannot stop it.
	NoLiveOutput bool
	// WholeStdin: standard input is handed over whole before the command
	// starts, so a command cannot wait on a stdin that never ends.
	WholeStdin bool
}

// skipGap skips the case proving what the tier cannot guarantee.
func (o Options) skipGap(t *testing.T, what, why string) {
	t.Helper()
	name := o.Name
	if name == "" {
		name = "this tier"
	}
	t.Skipf("%s cannot guarantee %s: %s", name, what, why)
}

// Factory returns a fresh, empty sandbox. Run closes it.
type Factory func(t *testing.T) sandbox.Sandbox

// Run runs the whole suite against sandboxes made by newSB.
func Run(t *testing.T, newSB Factory, opts Options) {
	fresh := func(t *testing.T) sandbox.Sandbox {
		t.Helper()
		sb := newSB(t)
		t.Cleanup(func() { _ = sb.Close() })
		return sb
	}
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, fresh(t)) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, fresh(t)) })
	t.Run("Escapes", func(t *testing.T) { testEscapes(t, fresh(t), opts) })
	t.Run("InvalidPaths", func(t *testing.T) { testInvalidPaths(t, fresh(t)) })
	t.Run("Names", func(t *testing.T) { testNames(t, fresh(t)) })
	t.Run("Stat", func(t *testing.T) { testStat(t, fresh(t)) })
	t.Run("Glob", func(t *testing.T) { testGlob(t, fresh(t)) })
	t.Run("GlobBracesStayInside", func(t *testing.T) { testGlobBracesStayInside(t, fresh(t)) })
	t.Run("Manage", func(t *testing.T) { testManage(t, fresh) })
	t.Run("Search", func(t *testing.T) { testSearch(t, fresh(t)) })
	t.Run("Exec", func(t *testing.T) { testExec(t, fresh(t), opts) })
	t.Run("Environment", func(t *testing.T) { testEnvironment(t, fresh(t)) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, fresh(t), opts) })
	t.Run("Close", func(t *testing.T) { testClose(t, fresh(t)) })
}

var bg = context.Background()

func mustWrite(t *testing.T, sb sandbox.Sandbox, p, data string) {
	t.Helper()
	if err := sb.Write(bg, p, []byte(data)); err != nil {
		t.Fatalf("Write(%q): %v", p, err)
	}
}

func mustRead(t *testing.T, sb sandbox.Sandbox, p string) string {
	t.Helper()
	b, err := sb.Read(bg, p)
	if err != nil {
		t.Fatalf("Read(%q): %v", p, err)
	}
	return string(b)
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want one matching %q", what, err, target)
	}
}

func testRoundTrip(t *testing.T, sb sandbox.Sandbox) {
	cases := []struct{ name, path, data string }{
		{"text", "a.txt", "hello\n"},
		{"empty", "empty", ""},
		{"binary", "bin.dat", "\x00\xff\xfe\x01 not utf-8 \xc3"},
		{"nested", "d1/d2/d3/f.txt", "deep"},
		{"dot segments", "./x/../y.txt", "why"},
		{"unicode name", "naïve/日本.txt", "ok"},
		{"spaces and quotes", "a b/'q' \"r\".txt", "ok"},
		{"absolute inside root", path.Join(sb.Root(), "abs.txt"), "abs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mustWrite(t, sb, c.path, c.data)
			if got := mustRead(t, sb, c.path); got != c.data {
				t.Errorf("Read(%q) = %q, want %q", c.path, got, c.data)
			}
		})
	}
	if got := mustRead(t, sb, "y.txt"); got != "why" {
		t.Errorf("./x/../y.txt should be y.txt, read %q", got)
	}
	if got := mustRead(t, sb, "abs.txt"); got != "abs" {
		t.Errorf("absolute path inside the root should be root-relative, read %q", got)
	}
	mustWrite(t, sb, "a.txt", "second")
	if got := mustRead(t, sb, "a.txt"); got != "second" {
		t.Errorf("overwrite: read %q", got)
	}
	if fi, err := sb.Stat(bg, "d1/d2"); err != nil || fi.Kind != sandbox.KindDir {
		t.Errorf("Write should create parent directories: Stat(d1/d2) = %+v, %v", fi, err)
	}
}

func testErrors(t *testing.T, sb sandbox.Sandbox) {
	mustWrite(t, sb, "dir/file", "x")
	_, err := sb.Read(bg, "missing.txt")
	wantErr(t, "Read(missing)", err, sandbox.ErrNotFound)
	wantErr(t, "Read(missing)", err, fs.ErrNotExist)
	_, err = sb.Stat(bg, "dir/missing")
	wantErr(t, "Stat(missing)", err, sandbox.ErrNotFound)
	_, err = sb.Read(bg, "dir")
	wantErr(t, "Read(dir)", err, sandbox.ErrIsDir)
	wantErr(t, "Write(dir)", sb.Write(bg, "dir", []byte("x")), sandbox.ErrIsDir)
	wantErr(t, "Write(root)", sb.Write(bg, ".", []byte("x")), sandbox.ErrIsDir)
	if err := sb.Write(bg, "dir/file/below", []byte("x")); err == nil {
		t.Error("Write under a regular file should fail")
	}
	if got := mustRead(t, sb, "dir/file"); got != "x" {
		t.Errorf("failed write changed dir/file to %q", got)
	}
	if err := sb.Write(bg, "big", make([]byte, sandbox.MaxFileSize+1)); !errors.Is(err, sandbox.ErrTooLarge) {
		t.Errorf("Write over MaxFileSize: %v, want ErrTooLarge", err)
	}
	if msg := fmt.Sprint(sb.Write(bg, "../x", nil)); !strings.Contains(msg, "../x") {
		t.Errorf("error %q should name the path", msg)
	}
}

func testEscapes(t *testing.T, sb sandbox.Sandbox, opts Options) {
	paths := []string{"..", "../x", "a/../../x", "./../x", "a/b/../../../x", "../" + path.Base(sb.Root()) + "/x"}
	if sb.Root() != "/" {
		paths = append(paths, path.Join(path.Dir(sb.Root()), "outside.txt"), "/etc/passwd", sb.Root()+"-sibling/x")
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			_, err := sb.Read(bg, p)
			wantErr(t, "Read", err, sandbox.ErrEscape)
			wantErr(t, "Write", sb.Write(bg, p, []byte("escaped")), sandbox.ErrEscape)
			_, err = sb.Stat(bg, p)
			wantErr(t, "Stat", err, sandbox.ErrEscape)
			_, err = sb.Glob(bg, p)
			wantErr(t, "Glob", err, sandbox.ErrEscape)
			_, err = sb.Glob(bg, p+"/*")
			wantErr(t, "Glob", err, sandbox.ErrEscape)
			if sb.Supports(sandbox.FeatureShell) {
				_, err = sb.Exec(bg, sandbox.Command{Args: []string{"true"}, Dir: p})
				wantErr(t, "Exec Dir", err, sandbox.ErrEscape)
			}
		})
	}
	t.Run("symbolic links out", func(t *testing.T) { testLinkEscapes(t, sb, opts) })
}

// testLinkEscapes: symbolic links made on the tier that lead out of the
// root (to "/", to the root's parent, dangling there) are escapes for
// every file operation and for Exec's Dir, and Glob drops them.
func testLinkEscapes(t *testing.T, sb sandbox.Sandbox, opts Options) {
	if !sb.Supports(sandbox.FeatureShell) {
		t.Skip("no shell to make symbolic links with")
	}
	if opts.LexicalPathsOnly {
		opts.skipGap(t, "that a symbolic link leading out of the root is refused", "it checks paths only as text, and links are resolved where the files are")
	}
	r, err := sb.Exec(bg, sandbox.Command{Shell: "ln -s / up && ln -s .. parent && ln -s ../hutch-escape-target dang"})
	if err != nil || r.ExitCode != 0 {
		t.Skipf("cannot make symbolic links here: %v %s", err, r.Stderr)
	}
	for _, p := range []string{"up", "up/etc/passwd", "parent"} {
		_, err := sb.Read(bg, p)
		wantErr(t, "Read "+p, err, sandbox.ErrEscape)
		_, err = sb.Stat(bg, p)
		wantErr(t, "Stat "+p, err, sandbox.ErrEscape)
	}
	wantErr(t, "Write dang", sb.Write(bg, "dang", []byte("escaped")), sandbox.ErrEscape)
	for _, pat := range []string{"*", "*/", "up/*"} {
		got, err := sb.Glob(bg, pat)
		if err != nil && !errors.Is(err, sandbox.ErrEscape) {
			t.Errorf("Glob(%q): %v", pat, err)
		}
		if len(got) > 0 {
			t.Errorf("Glob(%q) = %q; the links out must be dropped", pat, got)
		}
	}
	_, err = sb.Exec(bg, sandbox.Command{Shell: "pwd", Dir: "up"})
	wantErr(t, "Exec in up", err, sandbox.ErrEscape)
}

func testInvalidPaths(t *testing.T, sb sandbox.Sandbox) {
	for name, p := range map[string]string{
		"empty":      "",
		"nul":        "a\x00b",
		"nul at end": "a.txt\x00",
		"too long":   strings.Repeat("a/", sandbox.MaxPathLen),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sb.Read(bg, p)
			wantErr(t, "Read", err, sandbox.ErrInvalidPath)
			wantErr(t, "Write", sb.Write(bg, p, nil), sandbox.ErrInvalidPath)
			_, err = sb.Stat(bg, p)
			wantErr(t, "Stat", err, sandbox.ErrInvalidPath)
		})
	}
	_, err := sb.Glob(bg, "[")
	wantErr(t, "Glob([)", err, sandbox.ErrInvalidPath)
}

// testNames: a name is its bytes, UTF-8 or not, in and out (two names
// that differ in a byte that is not UTF-8 stay two files, each read as
// written), and a path error is an *fs.PathError naming the path asked,
// byte for byte.
func testNames(t *testing.T, sb sandbox.Sandbox) {
	names := []string{"a\xff", "a\xfe", "é.txt", "sp ace", "nl\nname"}
	for i, n := range names {
		mustWrite(t, sb, n, fmt.Sprint(i))
	}
	got, err := sb.Glob(bg, "*")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := slices.Clone(names)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Glob(*) = %q, want %q", got, want)
	}
	for i, n := range names {
		if b, err := sb.Read(bg, n); err != nil || string(b) != fmt.Sprint(i) {
			t.Errorf("Read(%q) = %q, %v; want %q", n, b, err, fmt.Sprint(i))
		}
	}
	for _, p := range []string{"nope\xff", "d\xfe/nope"} {
		_, err := sb.Read(bg, p)
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != p || !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Read(%q): %#v; want an *fs.PathError for %q matching ErrNotFound", p, err, p)
		}
	}
}

func testStat(t *testing.T, sb sandbox.Sandbox) {
	before := time.Now().Add(-2 * time.Second)
	mustWrite(t, sb, "s/f.txt", "12345")
	after := time.Now().Add(2 * time.Second)
	fi, err := sb.Stat(bg, "s/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size != 5 || fi.Kind != sandbox.KindFile || fi.Path != "s/f.txt" || fi.Mode.Perm() != 0o644 {
		t.Errorf("Stat(s/f.txt) = %+v, want size 5, kind file, path s/f.txt, mode 0644", fi)
	}
	if fi.ModTime.Before(before) || fi.ModTime.After(after) {
		t.Errorf("mtime %v is not the time of the write (%v..%v)", fi.ModTime, before, after)
	}
	data, rs, err := sandbox.ReadStat(bg, sb, "./s/f.txt", 0)
	if err != nil || string(data) != "12345" || rs.Path != fi.Path || rs.Size != fi.Size || !rs.ModTime.Equal(fi.ModTime) || rs.Kind != sandbox.KindFile {
		t.Errorf("ReadStat = %q, %+v, %v; want the content and %+v", data, rs, err, fi)
	}
	if data, rs, err := sandbox.ReadStat(bg, sb, "s/f.txt", 2); err != nil || string(data) != "12" || rs.Size != 5 {
		t.Errorf("ReadStat(max 2) = %q, size %d, %v; want \"12\" and the whole size 5", data, rs.Size, err)
	}
	if _, _, err := sandbox.ReadStat(bg, sb, "s", 0); !errors.Is(err, sandbox.ErrIsDir) {
		t.Errorf("ReadStat(dir): %v, want ErrIsDir", err)
	}
	if _, _, err := sandbox.ReadStat(bg, sb, "nope", 0); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("ReadStat(missing): %v, want ErrNotFound", err)
	}
	if _, _, err := sandbox.ReadStat(bg, sb, "../s", 0); !errors.Is(err, sandbox.ErrEscape) {
		t.Errorf("ReadStat(../s): %v, want ErrEscape", err)
	}
	// ReadStream, through the tier's Streamer where it has one: the same
	// content, description and errors; a reader that stops early is fine,
	// and fn's error comes back.
	var streamed []byte
	ss, err := sandbox.ReadStream(bg, sb, "./s/f.txt", func(r io.Reader) (err error) {
		streamed, err = io.ReadAll(r)
		return err
	})
	if err != nil || string(streamed) != "12345" || ss.Path != fi.Path || ss.Size != fi.Size || !ss.ModTime.Equal(fi.ModTime) {
		t.Errorf("ReadStream = %q, %+v, %v; want the content and %+v", streamed, ss, err, fi)
	}
	stop := errors.New("stop")
	if _, err := sandbox.ReadStream(bg, sb, "s/f.txt", func(r io.Reader) error {
		_, err := r.Read(make([]byte, 1))
		if err != nil {
			return err
		}
		return stop
	}); !errors.Is(err, stop) {
		t.Errorf("ReadStream with fn stopping after a byte: %v, want fn's error", err)
	}
	for p, want := range map[string]error{"nope": sandbox.ErrNotFound, "s": sandbox.ErrIsDir, "../s": sandbox.ErrEscape} {
		if _, err := sandbox.ReadStream(bg, sb, p, func(io.Reader) error { return nil }); !errors.Is(err, want) {
			t.Errorf("ReadStream(%s): %v, want %v", p, err, want)
		}
	}
	dir, err := sb.Stat(bg, "s")
	if err != nil || dir.Kind != sandbox.KindDir || !dir.Mode.IsDir() {
		t.Errorf("Stat(s) = %+v, %v, want a directory", dir, err)
	}
	root, err := sb.Stat(bg, sb.Root())
	if err != nil || root.Kind != sandbox.KindDir || root.Path != "." {
		t.Errorf("Stat(root) = %+v, %v, want directory \".\"", root, err)
	}
	time.Sleep(20 * time.Millisecond)
	mustWrite(t, sb, "s/f.txt", "1234567")
	fi2, err := sb.Stat(bg, "s/f.txt")
	if err != nil || fi2.Size != 7 || !fi2.ModTime.After(fi.ModTime) {
		t.Errorf("after rewrite Stat = %+v, %v; want size 7 and a later mtime than %v", fi2, err, fi.ModTime)
	}
}

func testGlob(t *testing.T, sb sandbox.Sandbox) {
	for _, f := range []string{"a.go", "b.txt", "src/c.go", "src/deep/d.go", "src/deep/e.txt", ".hidden/h.go", "x/y/z/w.md"} {
		mustWrite(t, sb, f, f)
	}
	cases := []struct {
		pattern string
		want    []string
	}{
		{"*.go", []string{"a.go"}},
		{"*", []string{"a.go", "b.txt"}},
		{"**/*.go", []string{".hidden/h.go", "a.go", "src/c.go", "src/deep/d.go"}},
		{"src/**", []string{"src/c.go", "src/deep/d.go", "src/deep/e.txt"}},
		{"src/*", []string{"src/c.go"}},
		{"src/*/", []string{"src/deep"}},
		{"**/", []string{".hidden", "src", "src/deep", "x", "x/y", "x/y/z"}},
		{"*/", []string{".hidden", "src", "x"}},
		{"{a,b}.*", []string{"a.go", "b.txt"}},
		{"{a.go,a.go,a.*}", []string{"a.go"}},
		{"src/deep/?.txt", []string{"src/deep/e.txt"}},
		{"[ab].go", []string{"a.go"}},
		{"nomatch*", []string{}},
		{"missing/dir/*", []string{}},
		{"./src/../*.txt", []string{"b.txt"}},
		{path.Join(sb.Root(), "src", "*.go"), []string{"src/c.go"}},
		{"src", []string{}},
		{"src/", []string{"src"}},
		{"b.txt", []string{"b.txt"}},
	}
	for _, c := range cases {
		t.Run(c.pattern, func(t *testing.T) {
			got, err := sb.Glob(bg, c.pattern)
			if err != nil {
				t.Fatalf("Glob(%q): %v", c.pattern, err)
			}
			if got == nil || !slices.Equal(got, c.want) {
				t.Errorf("Glob(%q) = %q, want %q", c.pattern, got, c.want)
			}
		})
	}
}

func testExec(t *testing.T, sb sandbox.Sandbox, opts Options) {
	if !sb.Supports(sandbox.FeatureShell) {
		_, err := sb.Exec(bg, sandbox.Command{Shell: "true"})
		wantErr(t, "Exec without shell", err, sandbox.ErrUnsupported)
		return
	}
	mustWrite(t, sb, "sub/dir/marker", "m")
	mustWrite(t, sb, "noexec.sh", "#!/bin/sh\necho hi\n")
	run := func(t *testing.T, c sandbox.Command) sandbox.Result {
		t.Helper()
		r, err := sb.Exec(bg, c)
		if err != nil {
			t.Fatalf("Exec(%+v): %v", c, err)
		}
		return r
	}
	t.Run("streams and exit code", func(t *testing.T) {
		r := run(t, sandbox.Command{Shell: "echo out; echo err >&2; exit 3"})
		if r.ExitCode != 3 || string(r.Stdout) != "out\n" || string(r.Stderr) != "err\n" || r.TimedOut || r.Signal != "" {
			t.Errorf("got %+v", r)
		}
		if r.StdoutSize != 4 || r.StderrSize != 4 || r.StdoutTruncated || r.StderrTruncated || r.Duration <= 0 {
			t.Errorf("sizes/duration wrong: %+v", r)
		}
	})
	t.Run("argv is not shell-parsed", func(t *testing.T) {
		r := run(t, sandbox.Command{Args: []string{"echo", "$HOME;", "`id`", "a  b"}})
		if string(r.Stdout) != "$HOME; `id` a  b\n" {
			t.Errorf("stdout %q", r.Stdout)
		}
	})
	t.Run("not found is 127", func(t *testing.T) {
		r := run(t, sandbox.Command{Args: []string{"hutch-no-such-program"}})
		if r.ExitCode != 127 || !strings.Contains(string(r.Stderr), "not found") {
			t.Errorf("got %d %q", r.ExitCode, r.Stderr)
		}
		r = run(t, sandbox.Command{Shell: "hutch-no-such-program"})
		if r.ExitCode != 127 {
			t.Errorf("shell: got %d", r.ExitCode)
		}
	})
	t.Run("not executable is 126", func(t *testing.T) {
		r := run(t, sandbox.Command{Args: []string{"./noexec.sh"}})
		if r.ExitCode != 126 {
			t.Errorf("got %d %q", r.ExitCode, r.Stderr)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		r := run(t, sandbox.Command{Args: []string{"cat"}, Stdin: strings.NewReader("from stdin")})
		if string(r.Stdout) != "from stdin" {
			t.Errorf("stdout %q", r.Stdout)
		}
		r = run(t, sandbox.Command{Args: []string{"cat"}}) // nil stdin is empty, not a hang
		if r.ExitCode != 0 || len(r.Stdout) != 0 {
			t.Errorf("nil stdin: %+v", r)
		}
	})
	t.Run("dir", func(t *testing.T) {
		r := run(t, sandbox.Command{Shell: "cat marker", Dir: "sub/dir"})
		if string(r.Stdout) != "m" {
			t.Errorf("cat marker in sub/dir: %+v", r)
		}
		r = run(t, sandbox.Command{Shell: "cat sub/dir/marker"})
		if string(r.Stdout) != "m" {
			t.Errorf("default dir is the root: %+v", r)
		}
		_, err := sb.Exec(bg, sandbox.Command{Shell: "true", Dir: "nope"})
		wantErr(t, "missing dir", err, sandbox.ErrNotFound)
		_, err = sb.Exec(bg, sandbox.Command{Shell: "true", Dir: "sub/dir/marker"})
		wantErr(t, "file as dir", err, sandbox.ErrNotDir)
	})
	t.Run("env is exactly what was allowed", func(t *testing.T) {
		t.Setenv("HUTCH_TEST_SECRET", "s3cret")
		r := run(t, sandbox.Command{Args: []string{"env"}, Env: map[string]string{"ADDED": "yes", "LANG": "C.UTF-8"}})
		out := string(r.Stdout)
		if strings.Contains(out, "s3cret") || strings.Contains(out, "HUTCH_TEST_SECRET") {
			t.Errorf("parent secret leaked: %q", out)
		}
		names := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			k, v, _ := strings.Cut(line, "=")
			names[k] = v
		}
		for k := range names {
			if !slices.Contains([]string{"PATH", "HOME", "LANG", "ADDED"}, k) {
				t.Errorf("unexpected variable %s in %q", k, out)
			}
		}
		if names["ADDED"] != "yes" || names["LANG"] != "C.UTF-8" || names["PATH"] == "" {
			t.Errorf("added/overridden variables missing: %q", out)
		}
	})
	t.Run("bad commands", func(t *testing.T) {
		for name, c := range map[string]sandbox.Command{
			"empty":       {},
			"both":        {Args: []string{"true"}, Shell: "true"},
			"nul":         {Args: []string{"echo", "a\x00b"}},
			"bad env":     {Shell: "true", Env: map[string]string{"A=B": "c"}},
			"neg timeout": {Shell: "true", Timeout: -1},
			"empty argv0": {Args: []string{""}},
		} {
			_, err := sb.Exec(bg, c)
			wantErr(t, name, err, sandbox.ErrConfig)
		}
	})
	t.Run("bounded output", func(t *testing.T) {
		r := run(t, sandbox.Command{Shell: "head -c 3000000 /dev/zero; printf END; printf xyz >&2", MaxOutput: 1000})
		if len(r.Stdout) != 1000 || !r.StdoutTruncated || r.StdoutSize != 3000003 || !bytes.HasSuffix(r.Stdout, []byte("END")) {
			t.Errorf("stdout kept %d bytes, truncated %v, size %d, tail %q", len(r.Stdout), r.StdoutTruncated, r.StdoutSize, r.Stdout[max(0, len(r.Stdout)-5):])
		}
		if string(r.Stderr) != "xyz" || r.StderrTruncated || r.StderrSize != 3 {
			t.Errorf("stderr %q truncated %v size %d", r.Stderr, r.StderrTruncated, r.StderrSize)
		}
	})
	t.Run("timeout kills the whole tree", func(t *testing.T) {
		marker := fmt.Sprintf("%d.%d", 1000+os.Getpid()%1000, time.Now().UnixNano()%1000000)
		script := fmt.Sprintf(`setsid sleep %[1]s1 & (sleep %[1]s2 &) ; sh -c 'sleep %[1]s3 &' ; trap "" TERM HUP; echo started; sleep %[1]s4`, marker)
		start := time.Now()
		r := run(t, sandbox.Command{Shell: script, Timeout: 500 * time.Millisecond})
		if !r.TimedOut || r.Signal != "SIGKILL" || r.ExitCode != 137 {
			t.Errorf("want timed out by SIGKILL (137), got %+v", r)
		}
		if string(r.Stdout) != "started\n" {
			t.Errorf("output before the timeout lost: %q", r.Stdout)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("Exec returned after %v", d)
		}
		if opts.HostProcesses {
			if opts.NoTreeKill {
				opts.skipGap(t, "that a timeout stops every process the command started", "it stops only what its provider stops")
			}
			if left := Survivors(marker, 2*time.Second); len(left) > 0 {
				t.Errorf("processes outlived the timeout: %q", left)
			}
		}
	})
	t.Run("background children do not outlive the command", func(t *testing.T) {
		if opts.NoTreeKill {
			opts.skipGap(t, "that background processes end with the command", "it stops only what its provider stops")
		}
		if !opts.HostProcesses {
			t.Skip("tier's processes are not visible in this host's /proc")
		}
		marker := fmt.Sprintf("%d.%d", 2000+os.Getpid()%1000, time.Now().UnixNano()%1000000)
		r := run(t, sandbox.Command{Shell: fmt.Sprintf("setsid sleep %s5 >/dev/null 2>&1 & echo ok", marker), Timeout: 10 * time.Second})
		if r.TimedOut || string(r.Stdout) != "ok\n" {
			t.Errorf("got %+v", r)
		}
		if left := Survivors(marker, 2*time.Second); len(left) > 0 {
			t.Errorf("background processes survived: %q", left)
		}
	})
	// A caller's live writer or stdin reader that blocks (a client that
	// stopped reading or writing) never holds Exec past the command's end
	// by more than sandbox.LiveGrace; the Result keeps what was captured.
	t.Run("stalled live writer", func(t *testing.T) {
		stall := &stallWriter{release: make(chan struct{})}
		defer close(stall.release)
		start := time.Now()
		r := run(t, sandbox.Command{Shell: "echo hi; echo err >&2", Stdout: stall, Stderr: stall, Timeout: 30 * time.Second})
		if d := time.Since(start); d > sandbox.LiveGrace+5*time.Second {
			t.Errorf("Exec returned %v after the command", d)
		}
		if string(r.Stdout) != "hi\n" || string(r.Stderr) != "err\n" || r.ExitCode != 0 {
			t.Errorf("got %+v", r)
		}
		stall = &stallWriter{release: make(chan struct{})}
		defer close(stall.release)
		start = time.Now()
		r = run(t, sandbox.Command{Shell: "yes", Stdout: stall, Timeout: time.Second})
		if d := time.Since(start); !r.TimedOut || d > time.Second+sandbox.LiveGrace+5*time.Second {
			t.Errorf("a flood into a stalled writer: timed out %v after %v", r.TimedOut, d)
		}
	})
	t.Run("blocking stdin", func(t *testing.T) {
		block := &blockReader{release: make(chan struct{})}
		defer close(block.release)
		start := time.Now()
		r := run(t, sandbox.Command{Shell: "echo ok", Stdin: block, Timeout: 30 * time.Second})
		if d := time.Since(start); d > 10*time.Second || string(r.Stdout) != "ok\n" {
			t.Errorf("got %q after %v", r.Stdout, d)
		}
		if opts.WholeStdin {
			opts.skipGap(t, "that a command may wait on a stdin that never ends", "standard input is handed over whole before the command starts")
		}
		start = time.Now()
		r = run(t, sandbox.Command{Shell: "cat", Stdin: block, Timeout: 500 * time.Millisecond})
		if d := time.Since(start); !r.TimedOut || d > 10*time.Second {
			t.Errorf("cat of a blocking stdin: timed out %v after %v", r.TimedOut, d)
		}
	})
	t.Run("a failing live writer ends the command with SIGPIPE", func(t *testing.T) {
		if opts.NoLiveOutput {
			opts.skipGap(t, "that a failing live writer stops the command", "output reaches live writers only once the command has ended")
		}
		fail := writerFunc(func([]byte) (int, error) { return 0, errors.New("client went away") })
		marker := fmt.Sprintf("%d.%d", 3000+os.Getpid()%1000, time.Now().UnixNano()%1000000)
		r := run(t, sandbox.Command{Shell: "yes " + marker, Stdout: fail, Timeout: 8 * time.Second})
		// 141 (128+SIGPIPE) is how a shell reports its child killed by it.
		if r.TimedOut || r.Signal != "SIGPIPE" && r.ExitCode != 141 {
			t.Errorf("timed out %v, exit %d, signal %q; want SIGPIPE at once", r.TimedOut, r.ExitCode, r.Signal)
		}
		if opts.HostProcesses {
			if left := Survivors(marker, 2*time.Second); len(left) > 0 {
				t.Errorf("the command outlived its broken pipe: %q", left)
			}
		}
	})
	t.Run("live output is complete", func(t *testing.T) {
		var live bytes.Buffer
		r := run(t, sandbox.Command{Shell: "head -c 300000 /dev/zero | tr '\\0' a; printf END", Stdout: &live})
		if live.Len() != 300003 || !bytes.HasSuffix(live.Bytes(), []byte("aEND")) || r.StdoutSize != 300003 {
			t.Errorf("live got %d bytes (tail %q), the result %d", live.Len(), live.Bytes()[max(0, live.Len()-4):], r.StdoutSize)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
		defer cancel()
		r, err := sb.Exec(ctx, sandbox.Command{Shell: "sleep 30"})
		if !errors.Is(err, context.DeadlineExceeded) || r.TimedOut {
			t.Errorf("cancelled caller context: err %v, timed out %v", err, r.TimedOut)
		}
	})
}

// stallWriter blocks every Write until release is closed.
type stallWriter struct{ release chan struct{} }

func (w *stallWriter) Write(p []byte) (int, error) {
	<-w.release
	return len(p), nil
}

// blockReader blocks every Read until release is closed, then ends.
type blockReader struct{ release chan struct{} }

func (r *blockReader) Read([]byte) (int, error) {
	<-r.release
	return 0, io.EOF
}

// Processes lists the live (non-zombie) host processes whose command line
// contains marker, as "PID:command line". Tier tests use it to prove that
// nothing a command started outlives it.
func Processes(marker string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(marker)) {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && bytes.HasPrefix(stat[i:], []byte(") Z")) {
			continue // a zombie is dead, only not reaped yet
		}
		found = append(found, e.Name()+":"+strings.ReplaceAll(string(b), "\x00", " "))
	}
	return found
}

// Survivors polls Processes for up to grace (the kernel may take a moment
// to finish killing) and returns what is still alive.
func Survivors(marker string, grace time.Duration) []string {
	deadline := time.Now().Add(grace)
	for {
		left := Processes(marker)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testEnvironment(t *testing.T, sb sandbox.Sandbox) {
	env := sandbox.Probe(bg, sb)
	if !sb.Supports(sandbox.FeatureShell) {
		if env.Error == "" || len(env.Commands) != 0 {
			t.Errorf("a sandbox without shell must say it could not probe: %+v", env)
		}
		return
	}
	if env.Error != "" {
		t.Fatalf("probe failed: %s", env.Error)
	}
	sh, ok := env.Commands["sh"]
	if !ok || !strings.HasSuffix(sh.Path, "sh") {
		t.Errorf("sh not found by the probe: %+v", env)
	}
	other := sandbox.Probe(bg, sb, "sh", "hutch-no-such-command")
	if other.Error != "" || len(other.Commands) != 1 {
		t.Errorf("probing for a missing command is an answer, not an error: %+v", other)
	}
	if again := sandbox.Probe(bg, sb); !equalEnv(again, env) {
		t.Errorf("memoized answer changed: %+v vs %+v", again, env)
	}
	if bad := sandbox.Probe(bg, sb, "bad\nname"); bad.Error == "" {
		t.Errorf("a malformed command name must be reported: %+v", bad)
	}
}

func equalEnv(a, b sandbox.Environment) bool {
	if a.Locale != b.Locale || a.Error != b.Error || len(a.Commands) != len(b.Commands) {
		return false
	}
	for k, v := range a.Commands {
		if b.Commands[k] != v {
			return false
		}
	}
	return true
}

func testConcurrency(t *testing.T, sb sandbox.Sandbox, opts Options) {
	const workers, rounds = 8, 25
	big := func(w, i int) []byte { return bytes.Repeat([]byte{byte('a' + w)}, 4096+i) }
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds*4)
	torn := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				if err := sb.Write(bg, fmt.Sprintf("own/%d/%d", w, i), []byte("x")); err != nil {
					errs <- err
				}
				if err := sb.Write(bg, "shared.bin", big(w, i)); err != nil {
					errs <- err
				}
				b, err := sb.Read(bg, "shared.bin")
				if err != nil {
					errs <- err
				} else if len(b) < 4096 || !bytes.Equal(b, bytes.Repeat(b[:1], len(b))) {
					torn <- fmt.Errorf("torn read: %d bytes mixing writers", len(b))
				}
				if _, err := sb.Glob(bg, "own/**"); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(torn)
	for err := range errs {
		t.Error(err)
	}
	t.Run("no torn reads", func(t *testing.T) {
		if opts.NoAtomicWrite {
			opts.skipGap(t, "that a reader never sees a file half written", "its writes are not atomic")
		}
		for err := range torn {
			t.Error(err)
		}
	})
	got, err := sb.Glob(bg, "own/**")
	if err != nil || len(got) != workers*rounds {
		t.Errorf("after concurrent writes Glob found %d files (%v), want %d", len(got), err, workers*rounds)
	}
}

func testClose(t *testing.T, sb sandbox.Sandbox) {
	mustWrite(t, sb, "f", "x")
	if err := sb.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := sb.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, err := sb.Read(bg, "f")
	wantErr(t, "Read after Close", err, sandbox.ErrClosed)
	wantErr(t, "Write after Close", sb.Write(bg, "g", nil), sandbox.ErrClosed)
	_, err = sb.Glob(bg, "*")
	wantErr(t, "Glob after Close", err, sandbox.ErrClosed)
	_, err = sb.Stat(bg, "f")
	wantErr(t, "Stat after Close", err, sandbox.ErrClosed)
	_, err = sb.Exec(bg, sandbox.Command{Shell: "true"})
	wantErr(t, "Exec after Close", err, sandbox.ErrClosed)
	if sb.Supports(sandbox.FeatureManage) {
		_, err = sb.List(bg, ".")
		wantErr(t, "List after Close", err, sandbox.ErrClosed)
		wantErr(t, "Mkdir after Close", sb.Mkdir(bg, "d"), sandbox.ErrClosed)
		wantErr(t, "Remove after Close", sb.Remove(bg, "f", false), sandbox.ErrClosed)
		wantErr(t, "Rename after Close", sb.Rename(bg, "f", "g"), sandbox.ErrClosed)
	}
	// The functions over the contract report it too, whether the tier has
	// the optional interface or they fall back on the contract.
	_, _, err = sandbox.ReadStat(bg, sb, "f", 0)
	wantErr(t, "ReadStat after Close", err, sandbox.ErrClosed)
	_, err = sandbox.ReadStream(bg, sb, "f", func(io.Reader) error { return nil })
	wantErr(t, "ReadStream after Close", err, sandbox.ErrClosed)
}

// testGlobBracesStayInside: a {a,b} group, a class or an escaped dot never
// takes Glob out of the root; every answer is root-relative, and the
// alternative inside the root is still found.
func testGlobBracesStayInside(t *testing.T, sb sandbox.Sandbox) {
	mustWrite(t, sb, "in/secret.txt", "IN")
	inside := []string{"in/secret.txt"}
	cases := []struct {
		pattern string
		want    []string // nil: nothing inside the root can match
	}{
		{"{..,in}/secret.txt", inside},
		{"{../outside,in}/secret.txt", inside},
		{"{../outside,in}/*", inside},
		{"{../outside/**,in/*}", inside},
		{"{/etc,in}/{passwd,secret.txt}", inside},
		{"in/{..,.}/secret.txt", nil},
		{"..{,}/outside/*", nil},
		{"in/{..,.}/../outside/*", nil},
		{`\.\./outside/*`, nil},
		{"[.][.]/outside/*", nil},
		{"{..}/**", nil},
		{"{/,}secret.txt", nil},
	}
	for _, c := range cases {
		got, err := sb.Glob(bg, c.pattern)
		if err != nil {
			if !errors.Is(err, sandbox.ErrEscape) && !errors.Is(err, sandbox.ErrInvalidPath) {
				t.Errorf("Glob(%q): error %v matches neither ErrEscape nor ErrInvalidPath", c.pattern, err)
			}
			continue
		}
		for _, g := range got {
			if strings.HasPrefix(g, "/") || g == ".." || strings.HasPrefix(g, "../") || strings.Contains(g, "/../") {
				t.Errorf("Glob(%q) returned %q, which is not root-relative", c.pattern, g)
			}
		}
		if c.want != nil && !slices.Equal(got, c.want) {
			t.Errorf("Glob(%q) = %q; want %q", c.pattern, got, c.want)
		}
		if c.want == nil && slices.ContainsFunc(got, func(g string) bool { return g != "in/secret.txt" }) {
			t.Errorf("Glob(%q) = %q; want nothing but in/secret.txt", c.pattern, got)
		}
	}
}

// writerFunc is an io.Writer made of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
