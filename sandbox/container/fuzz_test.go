package container

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

func TestParseListing(t *testing.T) {
	out := "/w\x00D\x00./src\x00./src/deep\x00F\x00./a.go\x00./src/c.go\x00L\x00" +
		"./lf\x00/w/beyond/listing\x00f\x00./in\x00/w/src\x00d\x00./out\x00/etc\x00d\x00./dang\x00/w/none\x00x\x00./self\x00/w\x00d\x00"
	fsys, err := parseListing([]byte(out), ".")
	if err != nil {
		t.Fatal(err)
	}
	for pattern, want := range map[string]string{
		"*":       "a.go lf",
		"*/":      "in self src",
		"in/*":    "in/c.go",
		"**/*.go": "a.go src/c.go",
		"out/*":   "",
		"src/*/":  "src/deep",
	} {
		pat, dirs, err := sandbox.CleanPattern("/w", pattern)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tierkit.GlobFS(context.Background(), fsys, pat, dirs)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("Glob(%q) = %q, %v; want %q", pattern, got, err, want)
		}
	}
	for _, bad := range []string{"", "/w\x00./x\x00", "/w\x00L\x00./l\x00/t\x00"} {
		if _, err := parseListing([]byte(bad), "."); err == nil && bad != "" {
			t.Errorf("parseListing(%q) accepted a malformed listing", bad)
		}
	}
}

// FuzzParseListing: a listing from the container (which a command there
// can shape, by naming files) never panics the host, and every match
// stays a clean root-relative path.
func FuzzParseListing(f *testing.F) {
	f.Add([]byte("/w\x00D\x00./a\x00F\x00./a/b\x00L\x00./l\x00/w/a\x00d\x00"), "src", "**")
	f.Add([]byte("/w\x00L\x00./l\x00/w/l\x00d\x00"), ".", "l/**/x")
	f.Add([]byte("/\x00D\x00./..\x00F\x00./../x\x00"), ".", "*/*")
	f.Fuzz(func(t *testing.T, out []byte, base, pattern string) {
		if _, err := sandbox.Clean("/w", base); err != nil || strings.HasPrefix(base, "/") {
			return
		}
		fsys, err := parseListing(out, base)
		if err != nil {
			return
		}
		pat, dirs, err := sandbox.CleanPattern("/w", pattern)
		if err != nil {
			return
		}
		got, err := tierkit.GlobFS(context.Background(), fsys, pat, dirs)
		if err != nil {
			return
		}
		for _, p := range got {
			if c, err := sandbox.Clean("/w", p); err != nil || c != p || p == "." {
				t.Fatalf("match %q is not a clean path inside the root", p)
			}
		}
	})
}

// FuzzStreamHeader: however a wrapper's stream is cut into writes, the
// header is recognized the same way and the command's own output passes
// through intact; on stdout, a stream without a header passes whole (what
// could still be a header's start is held back, nothing else).
func FuzzStreamHeader(f *testing.F) {
	f.Add([]byte("hutch-exec 12 345\nout of the command\n"), uint8(3), false)
	f.Add([]byte("path escapes the sandbox root\n"), uint8(0), false)
	f.Add([]byte("hutch-exec 1 2"), uint8(7), true)
	f.Add([]byte("hutch-exec x 2\nmore"), uint8(2), true)
	f.Add([]byte("hutch-exec 1 2\nhutch-exec 3 4\n"), uint8(5), true)
	f.Fuzz(func(t *testing.T, data []byte, cut uint8, stdout bool) {
		whole := &headerWriter{hdr: newExecHeader(), rest: &bytes.Buffer{}, passBad: stdout}
		_, _ = whole.Write(data)
		var rest bytes.Buffer
		parts := &headerWriter{hdr: newExecHeader(), rest: &rest, passBad: stdout}
		step := int(cut)%16 + 1
		for i := 0; i < len(data); i += step {
			_, _ = parts.Write(data[i:min(len(data), i+step)])
		}
		if whole.hdr.started() != parts.hdr.started() {
			t.Fatalf("header seen in one write: %v, in pieces: %v", whole.hdr.started(), parts.hdr.started())
		}
		if parts.hdr.started() {
			pid, start := parts.hdr.id()
			line := "hutch-exec " + pid + " " + start + "\n"
			if !bytes.HasPrefix(data, []byte(line)) || !bytes.Equal(rest.Bytes(), data[len(line):]) {
				t.Fatalf("output after the header altered")
			}
			wp, ws := whole.hdr.id()
			if wp != pid || ws != start {
				t.Fatalf("ids differ: %s %s vs %s %s", wp, ws, pid, start)
			}
			return
		}
		if stdout {
			held := parts.early()
			if !bytes.Equal(append(rest.Bytes(), held...), data) || len(held) > 64 || bytes.IndexByte(held, '\n') >= 0 {
				t.Fatalf("stdout without a header: passed %q, held %q, of %q", rest.Bytes(), held, data)
			}
		}
	})
}

func TestParseStat(t *testing.T) {
	fi, err := parseStat("5 81a4 2026-11-30 13:29:59.144316301 +0000")
	if err != nil || fi.Size != 5 || fi.Kind != sandbox.KindFile || fi.Mode.Perm() != 0o644 || fi.ModTime.Nanosecond() != 144316301 {
		t.Errorf("file: %+v, %v", fi, err)
	}
	fi, err = parseStat("4096 41ed 2026-11-30 13:29:59 +0100")
	if err != nil || fi.Kind != sandbox.KindDir || fi.Size != 0 || !fi.Mode.IsDir() || fi.Mode.Perm() != 0o755 {
		t.Errorf("dir: %+v, %v", fi, err)
	}
	for _, bad := range []string{"", "x 81a4 2026-11-30 13:29:59 +0000", "5 zz 2026-11-30 13:29:59 +0000", "5 81a4 yesterday"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

func TestParseBind(t *testing.T) {
	for in, want := range map[string]Bind{
		"/src":          {Source: "/src", Target: "/src"},
		"/src:/dst":     {Source: "/src", Target: "/dst"},
		"/src:rw":       {Source: "/src", Target: "/src", Writable: true},
		"/src:/dst/:ro": {Source: "/src", Target: "/dst"},
		"/a/../b:/c:rw": {Source: "/b", Target: "/c", Writable: true},
	} {
		if got, err := ParseBind(in); err != nil || got != want {
			t.Errorf("ParseBind(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "rel", "/a:rel", "/a:/b:/c", "/a:/b:rx", "/a,b:/c", ":rw"} {
		if _, err := ParseBind(bad); !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("ParseBind(%q) = %v, want ErrConfig", bad, err)
		}
	}
}

// FuzzParseBind: a bind either fails with ErrConfig or yields clean
// absolute paths that the options accept and that reach the argv as one
// --mount value each.
func FuzzParseBind(f *testing.F) {
	for _, s := range []string{"/src:/dst:rw", "/a", "/a:ro", "::", "/a:/b:/c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBind(s)
		if err != nil {
			if !errors.Is(err, sandbox.ErrConfig) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q", err)
			}
			return
		}
		if !strings.HasPrefix(b.Source, "/") || !strings.HasPrefix(b.Target, "/") {
			t.Fatalf("relative paths from %q: %+v", s, b)
		}
		o, err := Options{Image: "i", Binds: []Bind{b}}.normalize()
		if err != nil {
			return // a target the container cannot take (/, hutch's own place)
		}
		argv := o.RunArgs("n", "", false)
		i := slices.Index(argv, "--mount")
		if i < 0 || strings.Count(argv[i+1], ",") > 3 || !strings.Contains(argv[i+1], "source="+b.Source+",target="+b.Target) {
			t.Fatalf("bind %+v became %q", b, argv)
		}
	})
}
