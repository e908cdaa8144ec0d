package search

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox"
)

// The benchmark tree: benchFiles source-like files of about 4 KiB in
// benchDirs directories, 1% of them holding benchLiteral and some a
// Handler function, and a node_modules (benchIgnored more files, which
// .gitignore names) that Run prunes and grep -rn reads.
const (
	benchFiles   = 20_000
	benchDirs    = 200
	benchIgnored = 2_000
	benchLiteral = "needleXYZ"
	benchRegexp  = `func\s+\w*Handler\b`
)

var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

func benchTree(b *testing.B) string {
	benchOnce.Do(func() { benchDir, benchErr = makeBenchTree() })
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDir
}

func makeBenchTree() (string, error) {
	dir, err := os.MkdirTemp("", "search-bench-")
	if err != nil {
		return "", err
	}
	return dir, testenv.SourceTree(dir, benchFiles, benchDirs, benchIgnored, benchLiteral)
}

// BenchmarkSearch20k searches the tree with Run, over rootFS (os.Root, as
// hostfs lists and opens today) and over fastFS (openat2).
func BenchmarkSearch20k(b *testing.B) {
	dir := benchTree(b)
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	slow := &rootFS{root: root}
	fast, err := newFastFS(slow, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer fast.Close()
	for _, c := range []struct {
		name string
		req  sandbox.SearchRequest
		want int // matching files
	}{
		{"literal", sandbox.SearchRequest{Pattern: benchLiteral, Literal: true, Limit: sandbox.MaxSearchLimit}, benchFiles / 100},
		{"regexp", sandbox.SearchRequest{Pattern: benchRegexp, Limit: sandbox.MaxSearchLimit}, -1},
		{"regexp-no-literal", sandbox.SearchRequest{Pattern: `[A-Z][a-z]+[A-Z]\w+\(`, Limit: sandbox.MaxSearchLimit, Mode: sandbox.SearchCount}, -1},
		{"ignore-case", sandbox.SearchRequest{Pattern: "NEEDLExyz", IgnoreCase: true, Limit: sandbox.MaxSearchLimit}, benchFiles / 100},
		{"files-glob", sandbox.SearchRequest{Glob: "pkg1*/*.go", Limit: sandbox.MaxSearchLimit}, -1},
	} {
		for _, f := range []struct {
			name string
			fs   FS
		}{{"root", slow}, {"openat2", fast}} {
			b.Run(f.name+"/"+c.name, func(b *testing.B) {
				for b.Loop() {
					slow.listed = slow.listed[:0]
					res, err := Run(context.Background(), f.fs, c.req)
					if err != nil {
						b.Fatal(err)
					}
					if n := len(res.Matches); c.want >= 0 && n != c.want {
						b.Fatalf("%d matches, want %d", n, c.want)
					}
				}
			})
		}
	}
}

// BenchmarkGrepRN runs grep -rn over the same tree (it reads node_modules
// too: grep knows no .gitignore; the exclude variant is told to skip it).
func BenchmarkGrepRN(b *testing.B) {
	dir := benchTree(b)
	grep, err := exec.LookPath("grep")
	if err != nil {
		b.Skip("no grep")
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"literal", []string{"-rnF", benchLiteral}},
		{"literal-exclude", []string{"-rnF", "--exclude-dir=node_modules", benchLiteral}},
		{"regexp", []string{"-rnE", benchRegexp}},
		{"regexp-no-literal", []string{"-rcE", `[A-Z][a-z]+[A-Z]\w+\(`}},
		{"ignore-case", []string{"-rniF", "NEEDLExyz"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command(grep, append(c.args, ".")...)
				cmd.Dir = dir
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVsGrep alternates Run (over fastFS and over rootFS) with grep -rn
// on the same search, so that a loaded machine slows both alike, and
// reports each one's time per search and the ratios (Run's time / grep's:
// below 1 is faster than grep).
func BenchmarkVsGrep(b *testing.B) {
	dir := benchTree(b)
	grep, err := exec.LookPath("grep")
	if err != nil {
		b.Skip("no grep")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	slow := &rootFS{root: root}
	fast, err := newFastFS(slow, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer fast.Close()
	for _, c := range []struct {
		name string
		req  sandbox.SearchRequest
		args []string
	}{
		{"literal", sandbox.SearchRequest{Pattern: benchLiteral, Literal: true, Limit: sandbox.MaxSearchLimit}, []string{"-rnF", benchLiteral}},
		{"regexp", sandbox.SearchRequest{Pattern: benchRegexp, Limit: sandbox.MaxSearchLimit}, []string{"-rnE", benchRegexp}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var tFast, tSlow, tGrep time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := Run(context.Background(), fast, c.req); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := Run(context.Background(), slow, c.req); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				cmd := exec.Command(grep, append(c.args, ".")...)
				cmd.Dir = dir
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
				t3 := time.Now()
				tFast += t1.Sub(t0)
				tSlow += t2.Sub(t1)
				tGrep += t3.Sub(t2)
			}
			n := float64(b.N)
			b.ReportMetric(float64(tFast.Milliseconds())/n, "ms-openat2")
			b.ReportMetric(float64(tSlow.Milliseconds())/n, "ms-root")
			b.ReportMetric(float64(tGrep.Milliseconds())/n, "ms-grep")
			b.ReportMetric(float64(tFast)/float64(tGrep), "openat2/grep")
			b.ReportMetric(float64(tSlow)/float64(tGrep), "root/grep")
		})
	}
}
