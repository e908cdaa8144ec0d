package sandbox_test

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/hutchsandbox/hutch/sandbox"
)

func TestClean(t *testing.T) {
	long := strings.Repeat("a", sandbox.MaxPathLen)
	tests := []struct {
		root, p string
		want    string
		err     error
	}{
		// Relative paths under "/".
		{"/", "a", "a", nil},
		{"/", "a/b", "a/b", nil},
		{"/", ".", ".", nil},
		{"/", "./", ".", nil},
		{"/", "./a", "a", nil},
		{"/", "a/./b/.", "a/b", nil},
		{"/", "a/", "a", nil},
		{"/", "a///", "a", nil},
		{"/", "a//b", "a/b", nil},
		{"/", "a/b/../c", "a/c", nil},
		{"/", "a/..", ".", nil},
		{"/", "a/b/../../c", "c", nil},
		{"/", "...", "...", nil},
		{"/", "..a", "..a", nil},
		{"/", "a..", "a..", nil},
		{"/", "a/../..b", "..b", nil},
		{"/", `..\x`, `..\x`, nil}, // backslash is not a separator
		{"/", "\xff\xfe/x", "\xff\xfe/x", nil},
		{"/", "\xc0\xaf", "\xc0\xaf", nil}, // overlong "/" encoding is just bytes
		{"/", "é/ü", "é/ü", nil},
		{"/", " ", " ", nil},
		{"/", long, long, nil},

		// ".." variants.
		{"/", "..", "", sandbox.ErrEscape},
		{"/", "../", "", sandbox.ErrEscape},
		{"/", "../x", "", sandbox.ErrEscape},
		{"/", "./..", "", sandbox.ErrEscape},
		{"/", "a/../..", "", sandbox.ErrEscape},
		{"/", "a/../../b", "", sandbox.ErrEscape},
		{"/", "a/b/../../../c", "", sandbox.ErrEscape},
		{"/", "..//..", "", sandbox.ErrEscape},
		{"/r", "../r/a", "", sandbox.ErrEscape}, // relative ".." never comes back in

		// Absolute paths with root "/": "/.." is "/" in POSIX.
		{"/", "/", ".", nil},
		{"/", "//", ".", nil},
		{"/", "/a", "a", nil},
		{"/", "//a//b/", "a/b", nil},
		{"/", "/..", ".", nil},
		{"/", "/../etc/passwd", "etc/passwd", nil},
		{"/", "/a/../..", ".", nil},

		// Absolute paths with a non-"/" root.
		{"/r", "/r", ".", nil},
		{"/r", "/r/", ".", nil},
		{"/r", "//r", ".", nil},
		{"/r", "/r/.", ".", nil},
		{"/r", "/r/a", "a", nil},
		{"/r", "/r//a/", "a", nil},
		{"/r", "//r//a//b//", "a/b", nil},
		{"/r", "/r/./a", "a", nil},
		{"/r", "/r/a/..", ".", nil},
		{"/r", "/r/../r/x", "x", nil},
		{"/r", "/r/..", "", sandbox.ErrEscape},
		{"/r", "/r/../x", "", sandbox.ErrEscape},
		{"/r", "/r/../rr/x", "", sandbox.ErrEscape},
		{"/r", "/", "", sandbox.ErrEscape},
		{"/r", "/x", "", sandbox.ErrEscape},
		{"/r", "/rr", "", sandbox.ErrEscape},
		{"/r", "/rr/x", "", sandbox.ErrEscape},
		{"/r", "/r-x/a", "", sandbox.ErrEscape},
		{"/r", "/R/a", "", sandbox.ErrEscape}, // case-sensitive
		{"/r", "a", "a", nil},
		{"/r", "r/a", "r/a", nil}, // relative: "r" is a child of the root
		{"/a/b", "/a/b/c", "c", nil},
		{"/a/b", "/a", "", sandbox.ErrEscape},
		{"/a/b", "/a/bc", "", sandbox.ErrEscape},
		{"/a/b", "/a/b/../c", "", sandbox.ErrEscape},
		{"/a/b", "/a/b/c/../../b/d", "d", nil},

		// Root spellings are normalized.
		{"/r/", "/r/a", "a", nil},
		{"//r//", "/r/a", "a", nil},
		{"r", "/r/a", "a", nil},
		{"", "/a", "a", nil},
		{"/a/../r", "/r/x", "x", nil},

		// Malformed paths.
		{"/", "", "", sandbox.ErrInvalidPath},
		{"/r", "", "", sandbox.ErrInvalidPath},
		{"/", "\x00", "", sandbox.ErrInvalidPath},
		{"/", "a\x00b", "", sandbox.ErrInvalidPath},
		{"/", "a/\x00", "", sandbox.ErrInvalidPath},
		{"/r", "/r/a\x00", "", sandbox.ErrInvalidPath},
		{"/", "..\x00", "", sandbox.ErrInvalidPath},
		{"/", long + "a", "", sandbox.ErrInvalidPath},
		{"/", "/" + long, "", sandbox.ErrInvalidPath},
		// The length limit applies to what the caller wrote, before cleaning.
		{"/", strings.Repeat("./", sandbox.MaxPathLen/2) + "a", "", sandbox.ErrInvalidPath},
	}
	for _, tt := range tests {
		got, err := sandbox.Clean(tt.root, tt.p)
		name := short(tt.p)
		if tt.err != nil {
			if !errors.Is(err, tt.err) || got != "" {
				t.Errorf("Clean(%q, %s) = %q, %v; want error %v", tt.root, name, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Clean(%q, %s) = %q, %v; want %q", tt.root, name, got, err, tt.want)
		}
	}
}

func short(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%q...(%d bytes)", s[:20], len(s))
	}
	return fmt.Sprintf("%q", s)
}

func TestCleanPattern(t *testing.T) {
	tests := []struct {
		root, pattern string
		want          string
		dirsOnly      bool
		err           error
	}{
		{"/", "*.go", "*.go", false, nil},
		{"/", "**/*.go", "**/*.go", false, nil},
		{"/", "**/", "**", true, nil},
		{"/", "src/", "src", true, nil},
		{"/", "src//", "src", true, nil},
		{"/", "./src/", "src", true, nil},
		{"/", "a/*/", "a/*", true, nil},
		{"/", "./", ".", true, nil},
		{"/", "/", ".", false, nil}, // the root alone is not "directories only"
		{"/", ".", ".", false, nil},
		{"/", "a/./b", "a/b", false, nil},
		{"/", "a/x/../*.go", "a/*.go", false, nil},
		{"/", "/src/**/*.go", "src/**/*.go", false, nil},
		{"/", "{a,b}/*.go", "{a,b}/*.go", false, nil},
		{"/", "[abc].go", "[abc].go", false, nil},
		{"/", `\*`, `\*`, false, nil},
		{"/r", "/r/**/", "**", true, nil},
		{"/r", "/r/", ".", true, nil},
		{"/r", "/r/*.txt", "*.txt", false, nil},
		// Runs of ** are one (they match the same; each more multiplies
		// the work).
		{"/", "**/**/**/*.go", "**/*.go", false, nil},
		{"/", "t/**/**/x/**/**", "t/**/x/**", false, nil},
		{"/", "**/**/", "**", true, nil},
		{"/", "a**/**/b", "a**/**/b", false, nil},

		// Bad syntax.
		{"/", "[", "", false, sandbox.ErrInvalidPath},
		{"/", "a/[b", "", false, sandbox.ErrInvalidPath},
		{"/", "[]", "", false, sandbox.ErrInvalidPath},
		{"/", "{a", "", false, sandbox.ErrInvalidPath},
		{"/", "{a,b", "", false, sandbox.ErrInvalidPath},
		{"/", "}", "", false, sandbox.ErrInvalidPath},
		{"/", `a\`, "", false, sandbox.ErrInvalidPath},
		{"/", "", "", false, sandbox.ErrInvalidPath},
		{"/", "*\x00", "", false, sandbox.ErrInvalidPath},
		{"/", strings.Repeat("*", sandbox.MaxPathLen+1), "", false, sandbox.ErrInvalidPath},

		// Escapes.
		{"/", "../*", "", false, sandbox.ErrEscape},
		{"/", "..", "", false, sandbox.ErrEscape},
		{"/", "../", "", false, sandbox.ErrEscape},
		{"/", "**/../../*", "", false, sandbox.ErrEscape},
		{"/", "a/../../**/", "", false, sandbox.ErrEscape},
		{"/r", "/etc/*", "", false, sandbox.ErrEscape},
		{"/r", "/rr/*", "", false, sandbox.ErrEscape},
		{"/r", "/*", "", false, sandbox.ErrEscape},
		{"/r", "/r/../*", "", false, sandbox.ErrEscape},
	}
	for _, tt := range tests {
		got, dirs, err := sandbox.CleanPattern(tt.root, tt.pattern)
		name := short(tt.pattern)
		if tt.err != nil {
			if !errors.Is(err, tt.err) || got != "" || dirs {
				t.Errorf("CleanPattern(%q, %s) = %q, %v, %v; want error %v", tt.root, name, got, dirs, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want || dirs != tt.dirsOnly {
			t.Errorf("CleanPattern(%q, %s) = %q, %v, %v; want %q, %v", tt.root, name, got, dirs, err, tt.want, tt.dirsOnly)
		}
	}
}

// cleanSeeds are nasty inputs shared by the fuzzers' corpora.
var cleanSeeds = []string{
	"**/**", "a/**/**/b/", "/**/**/**", "**/x/**/**",
	"", ".", "..", "...", "/", "//", "/..", "/../..", "./..", "../", "a/../..",
	"a/b/../../..", "a//b", "a/./b/", "/a/b", "/a/b/", "/a/b/../c", "/a/bc",
	"/a/b/../../a/b/x", "/a", "/ab", "//a//b//c", "a\x00b", "\x00", "/a/b\x00",
	"\xff\xfe", "\xc0\xae\xc0\xae/x", "%2e%2e/x", `..\..\x`, "..;/x",
	"a/b/c/../../../..", strings.Repeat("../", 10), strings.Repeat("a/", 2049),
	strings.Repeat("x", sandbox.MaxPathLen), strings.Repeat("x", sandbox.MaxPathLen+1),
	"**/../*", "{..,a}/*", "[", "{a", "a/", "**/", "\u202e..", "..\u2215x",
}

var fuzzRoots = []string{"/", "/a/b"}

// checkCleanResult verifies the guarantees Clean makes for a successful
// result.
func checkCleanResult(t *testing.T, root, p, got string) {
	t.Helper()
	switch {
	case got == "":
		t.Fatalf("Clean(%q, %q) = empty result without error", root, p)
	case path.IsAbs(got):
		t.Fatalf("Clean(%q, %q) = %q: absolute", root, p, got)
	case got == ".." || strings.HasPrefix(got, "../"):
		t.Fatalf("Clean(%q, %q) = %q: escapes", root, p, got)
	case strings.IndexByte(got, 0) >= 0:
		t.Fatalf("Clean(%q, %q) = %q: contains NUL", root, p, got)
	case path.Clean(got) != got:
		t.Fatalf("Clean(%q, %q) = %q: not path.Clean-stable (%q)", root, p, got, path.Clean(got))
	case len(got) > max(len(p), 1):
		t.Fatalf("Clean(%q, %q) = %q: longer than the input", root, p, got)
	}
	joined := path.Join(root, got)
	if root == "/" {
		if !strings.HasPrefix(joined, "/") {
			t.Fatalf("Clean(%q, %q) = %q: joined %q not under root", root, p, got, joined)
		}
	} else if joined != root && !strings.HasPrefix(joined, root+"/") {
		t.Fatalf("Clean(%q, %q) = %q: joined %q not under root", root, p, got, joined)
	}
	// Relative input is only cleaned.
	if !path.IsAbs(p) && got != path.Clean(p) {
		t.Fatalf("Clean(%q, %q) = %q, want path.Clean = %q", root, p, got, path.Clean(p))
	}
	// Idempotent, and stable through the absolute spelling.
	if again, err := sandbox.Clean(root, got); err != nil || again != got {
		t.Fatalf("Clean(%q, Clean(%q) = %q) = %q, %v; want it unchanged", root, p, got, again, err)
	}
	if len(joined) <= sandbox.MaxPathLen {
		if abs, err := sandbox.Clean(root, joined); err != nil || abs != got {
			t.Fatalf("Clean(%q, %q) = %q, %v; want %q", root, joined, abs, err, got)
		}
	}
}

// checkCleanErr verifies an error is one Clean documents, for the right
// reason.
func checkCleanErr(t *testing.T, root, p string, err error) {
	t.Helper()
	invalid := p == "" || len(p) > sandbox.MaxPathLen || strings.IndexByte(p, 0) >= 0
	switch {
	case errors.Is(err, sandbox.ErrInvalidPath):
		if !invalid {
			t.Fatalf("Clean(%q, %q): %v for a well-formed path", root, p, err)
		}
	case errors.Is(err, sandbox.ErrEscape):
		if invalid {
			t.Fatalf("Clean(%q, %q): %v, want ErrInvalidPath", root, p, err)
		}
		// An escape must really leave the root lexically.
		var abs string
		if path.IsAbs(p) {
			abs = path.Clean(p)
		} else {
			abs = path.Clean(p)
			if abs != ".." && !strings.HasPrefix(abs, "../") {
				t.Fatalf("Clean(%q, %q): %v but the path stays inside", root, p, err)
			}
			return
		}
		if abs == root || strings.HasPrefix(abs, root+"/") || root == "/" {
			t.Fatalf("Clean(%q, %q): %v but %q is inside the root", root, p, err, abs)
		}
	default:
		t.Fatalf("Clean(%q, %q): error %v matches neither ErrInvalidPath nor ErrEscape", root, p, err)
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range cleanSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		for _, root := range fuzzRoots {
			got, err := sandbox.Clean(root, p)
			if err != nil {
				if got != "" {
					t.Fatalf("Clean(%q, %q) = %q with error %v", root, p, got, err)
				}
				checkCleanErr(t, root, p, err)
				continue
			}
			checkCleanResult(t, root, p, got)
		}
	})
}

func FuzzCleanPattern(f *testing.F) {
	for _, s := range cleanSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		for _, root := range fuzzRoots {
			got, dirs, err := sandbox.CleanPattern(root, p)
			if err != nil {
				if !errors.Is(err, sandbox.ErrInvalidPath) && !errors.Is(err, sandbox.ErrEscape) {
					t.Fatalf("CleanPattern(%q, %q): unexpected error %v", root, p, err)
				}
				if got != "" || dirs {
					t.Fatalf("CleanPattern(%q, %q) = %q, %v with error %v", root, p, got, dirs, err)
				}
				// Errors other than bad syntax are exactly Clean's.
				if _, cerr := sandbox.Clean(root, p); cerr == nil && !errors.Is(err, sandbox.ErrInvalidPath) {
					t.Fatalf("CleanPattern(%q, %q): %v, but Clean accepts it", root, p, err)
				}
				continue
			}
			// Clean's result, with each run of "**" segments made one.
			clean, cerr := sandbox.Clean(root, p)
			var segs []string
			for _, s := range strings.Split(clean, "/") {
				if s != "**" || len(segs) == 0 || segs[len(segs)-1] != "**" {
					segs = append(segs, s)
				}
			}
			if want := strings.Join(segs, "/"); cerr != nil || want != got {
				t.Fatalf("CleanPattern(%q, %q) = %q; Clean = %q, %v, so want %q", root, p, got, clean, cerr, want)
			}
			checkCleanResult(t, root, p, clean) // the pattern as Clean made it
			if !doublestar.ValidatePattern(got) {
				t.Fatalf("CleanPattern(%q, %q) = %q: not a valid pattern", root, p, got)
			}
			if wantDirs := len(p) > 1 && strings.HasSuffix(p, "/"); dirs != wantDirs {
				t.Fatalf("CleanPattern(%q, %q): dirsOnly = %v, want %v", root, p, dirs, wantDirs)
			}
			if strings.HasSuffix(got, "/") {
				t.Fatalf("CleanPattern(%q, %q) = %q: trailing slash", root, p, got)
			}
		}
	})
}
