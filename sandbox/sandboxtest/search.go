package sandboxtest

import (
	"context"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
)

// testSearch: a tier that searches where its files are (sandbox.Searcher)
// finds lines, files and counts, honours .gitignore unless asked, takes
// absolute paths inside the root, and never searches outside it.
func testSearch(t *testing.T, sb sandbox.Sandbox) {
	s, ok := sb.(sandbox.Searcher)
	if !ok {
		t.Fatalf("%T does not implement sandbox.Searcher: every tier must", sb)
	}
	if sb.Supports(sandbox.FeatureShell) && !sb.Supports(sandbox.FeatureManage) {
		_, err := s.Search(bg, sandbox.SearchRequest{Pattern: "x"})
		wantErr(t, "Search without the helper", err, sandbox.ErrUnsupported)
		return
	}
	mustWrite(t, sb, "src/a.go", "package a\nfunc Needle() {}\n")
	mustWrite(t, sb, "src/b.go", "package b\n// needle in a comment\nvar needle = 1\n")
	mustWrite(t, sb, "src/c.txt", "needle in text\n")
	mustWrite(t, sb, ".gitignore", "build/\n")
	mustWrite(t, sb, "build/gen.go", "needle generated\n")
	mustWrite(t, sb, "bin.dat", "needle\x00binary")
	paths := func(res sandbox.SearchResult) []string {
		var out []string
		for _, m := range res.Matches {
			out = append(out, m.Path+":"+strings.TrimSpace(m.Text))
		}
		for _, f := range res.Files {
			out = append(out, f.Path)
		}
		return out
	}
	cases := []struct {
		name string
		req  sandbox.SearchRequest
		want []string
	}{
		{"content", sandbox.SearchRequest{Pattern: "needle", Glob: "*.go"}, []string{"src/b.go:// needle in a comment", "src/b.go:var needle = 1"}},
		{"ignore case", sandbox.SearchRequest{Pattern: "needle", Glob: "*.go", IgnoreCase: true, Mode: sandbox.SearchFiles}, []string{"src/a.go", "src/b.go"}},
		{"ignored included", sandbox.SearchRequest{Pattern: "needle", Glob: "*.go", IncludeIgnored: true, Mode: sandbox.SearchFiles}, []string{"build/gen.go", "src/b.go"}},
		{"files without pattern", sandbox.SearchRequest{Dir: "src", Mode: sandbox.SearchFiles}, []string{"src/a.go", "src/b.go", "src/c.txt"}},
		{"absolute dir and glob", sandbox.SearchRequest{Dir: path.Join(sb.Root(), "src"), Glob: path.Join(sb.Root(), "src/*.txt"), Pattern: "needle"}, []string{"src/c.txt:needle in text"}},
		{"binary skipped", sandbox.SearchRequest{Pattern: "binary"}, nil},
	}
	for _, c := range cases {
		res, err := s.Search(bg, c.req)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := paths(res); !slices.Equal(got, c.want) {
			t.Errorf("%s: found %q, want %q", c.name, got, c.want)
		}
	}
	count, err := s.Search(bg, sandbox.SearchRequest{Pattern: "needle", Mode: sandbox.SearchCount})
	if err != nil || len(count.Files) != 2 || count.Files[0] != (sandbox.SearchFile{Path: "src/b.go", Count: 2}) {
		t.Errorf("count: %+v, %v", count, err)
	}
	for _, dir := range []string{"..", "../x", "src/../../x"} {
		_, err := s.Search(bg, sandbox.SearchRequest{Dir: dir, Pattern: "x"})
		wantErr(t, "Search(Dir "+dir+")", err, sandbox.ErrEscape)
	}
	_, err = s.Search(bg, sandbox.SearchRequest{Pattern: "("})
	if err == nil {
		t.Error("a pattern that does not compile was searched")
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := s.Search(ctx, sandbox.SearchRequest{Pattern: "x"}); err == nil {
		t.Error("a cancelled search succeeded")
	}
}
