package tierkit_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/tierkit"
)

// FuzzCandidates: whatever the program name and PATH, the candidates are
// absolute paths ending in the name (a name with a slash, or . or .., is
// itself).
func FuzzCandidates(f *testing.F) {
	f.Add("ls", "/usr/bin:/bin", "/w")
	f.Add("./x", "", "/w")
	f.Add("a/../../b", "rel:::/abs", "/w/d")
	f.Fuzz(func(t *testing.T, name, path, dir string) {
		if name == "" || !filepath.IsAbs(dir) {
			return
		}
		cands := tierkit.Candidates(name, path, dir)
		for _, c := range cands {
			if !filepath.IsAbs(c) {
				t.Fatalf("candidate %q is relative", c)
			}
			if !strings.Contains(name, "/") && name != "." && name != ".." && filepath.Base(c) != filepath.Base(name) {
				t.Fatalf("candidate %q is not %q", c, name)
			}
		}
		if (strings.Contains(name, "/") || name == "." || name == "..") && len(cands) != 1 {
			t.Fatalf("a path gave %d candidates", len(cands))
		}
	})
}
