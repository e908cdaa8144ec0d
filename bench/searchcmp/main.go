// Command searchcmp times hutch's grep and glob tools against the same
// searches through hutch's shell tool (grep -rn, find), side by side in one
// run, driving `hutch mcp` over stdio with the Go MCP SDK's client as a user's
// agent would. bench/search.sh builds hutch and runs it.
//
// Usage: go run ./bench/searchcmp -hutch BIN [-base BIN] [-n N] [-warmup W] [-tiers local,isolated]
//
// The tree is generated once (like internal/search's BenchmarkSearch20k):
// 20,000 source-like files of about 4 KiB in 200 directories, 1% of them
// holding the literal, and a node_modules of 2,000 more that .gitignore
// names (hutch skips it; grep -rn and find do not know .gitignore). Every
// contender runs once per round, in turn, so drift on the machine hits all
// alike; each call's result is checked, so an error never counts as fast.
// With -base, a second hutch (an older build) runs the same tools too.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	files   = 20_000
	dirs    = 200
	ignored = 2_000
	literal = "needleXYZ"
	regexp  = `func\s+\w*Handler\b`
)

func main() {
	hutch := flag.String("hutch", "", "the hutch binary (required)")
	base := flag.String("base", "", "an older hutch binary to time as well")
	n := flag.Int("n", 30, "timed rounds")
	warmup := flag.Int("warmup", 3, "untimed rounds first")
	tiers := flag.String("tiers", "local,isolated", "tiers to run (comma-separated)")
	flag.Parse()
	if *hutch == "" || *n < 1 || *warmup < 0 {
		flag.Usage()
		os.Exit(2)
	}
	dir, err := makeTree()
	if dir != "" {
		defer os.RemoveAll(dir)
	}
	if err != nil {
		fail("tree: %v", err)
	}
	ctx := context.Background()
	type server struct {
		name string
		cs   *mcp.ClientSession
	}
	var servers []server
	bins := [][2]string{{"hutch", *hutch}}
	if *base != "" {
		bins = append(bins, [2]string{"base", *base})
	}
	for _, tier := range strings.Split(*tiers, ",") {
		for _, b := range bins {
			cmd := exec.Command(b[1], "mcp", "--tier", tier, "--root", dir, "--mode", "auto")
			cmd.Stderr = os.Stderr
			c := mcp.NewClient(&mcp.Implementation{Name: "searchcmp", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				fail("%s mcp --tier %s: %v", b[0], tier, err)
			}
			defer cs.Close()
			servers = append(servers, server{b[0] + "/" + tier, cs})
		}
	}
	type contender struct {
		name  string
		run   func() (string, error) // what was found, checked by want
		want  func(string) bool
		times []time.Duration
	}
	var cs []*contender
	hasLiteral := func(s string) bool { return strings.Contains(s, literal) }
	hasGo := func(s string) bool { return strings.Contains(s, "pkg000/f00000.go") }
	hasHandler := func(s string) bool { return strings.Contains(s, "Handler(") }
	for _, s := range servers {
		call := func(tool string, args map[string]any) func() (string, error) {
			return func() (string, error) {
				res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				if err != nil {
					return "", err
				}
				b, _ := json.Marshal(res)
				if res.IsError {
					return "", fmt.Errorf("%s: %.300s", tool, b)
				}
				return string(b), nil
			}
		}
		cs = append(cs,
			&contender{name: s.name + " grep tool, literal", run: call("grep", map[string]any{"pattern": literal, "literal": true}), want: hasLiteral},
			&contender{name: s.name + " shell: grep -rnF", run: call("shell", map[string]any{"command": "grep -rnF " + literal + " ."}), want: hasLiteral},
			&contender{name: s.name + " grep tool, regexp", run: call("grep", map[string]any{"pattern": regexp}), want: hasHandler},
			&contender{name: s.name + " shell: grep -rnE", run: call("shell", map[string]any{"command": "grep -rnE '" + regexp + "' ."}), want: hasHandler},
			&contender{name: s.name + " glob tool **/*.go", run: call("glob", map[string]any{"pattern": "**/*.go"}), want: hasGo},
			&contender{name: s.name + " shell: find -name", run: call("shell", map[string]any{"command": "find . -name '*.go'"}), want: func(s string) bool { return strings.Contains(s, ".go") }},
		)
	}
	host := func(name string, argv ...string) *contender {
		return &contender{name: "host " + name, run: func() (string, error) {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir = dir
			out, err := cmd.Output()
			return string(out), err
		}, want: func(string) bool { return true }}
	}
	cs = append(cs, host("grep -rnF", "grep", "-rnF", literal, "."), host("grep -rnE", "grep", "-rnE", regexp, "."), host("find -name", "find", ".", "-name", "*.go"))
	for round := -*warmup; round < *n; round++ {
		for _, c := range cs {
			t0 := time.Now()
			out, err := c.run()
			d := time.Since(t0)
			if err == nil && !c.want(out) {
				err = fmt.Errorf("unexpected result: %.300s", out)
			}
			if err != nil {
				fail("%s: %v", c.name, err)
			}
			if round >= 0 {
				c.times = append(c.times, d)
			}
		}
	}
	med := map[string]float64{}
	fmt.Printf("%d files in %d dirs + %d ignored; %d rounds after %d warm-up, medians (ms); %d CPUs, %s\n", files, dirs, ignored, *n, *warmup, runtime.NumCPU(), loadavg())
	for _, c := range cs {
		slices.Sort(c.times)
		m := float64(c.times[len(c.times)/2]) / 1e6
		med[c.name] = m
		fmt.Printf("  %-46s %8.1f   (min %.1f, max %.1f)\n", c.name, m, float64(c.times[0])/1e6, float64(c.times[len(c.times)-1])/1e6)
	}
	fmt.Println("ratios (tool / its peer: below 1 is faster than the peer):")
	for _, s := range servers {
		p := s.name
		fmt.Printf("  %-16s grep literal %.2fx  grep regexp %.2fx  glob vs find %.2fx  (glob vs host find %.2fx)\n", p,
			med[p+" grep tool, literal"]/med[p+" shell: grep -rnF"],
			med[p+" grep tool, regexp"]/med[p+" shell: grep -rnE"],
			med[p+" glob tool **/*.go"]/med[p+" shell: find -name"],
			med[p+" glob tool **/*.go"]/med["host find -name"])
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load unknown"
	}
	f := strings.Fields(string(b))
	return "load average " + strings.Join(f[:min(3, len(f))], " ")
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "searchcmp: "+format+"\n", args...)
	os.Exit(1)
}

// makeTree writes the tree internal/search's benchmark searches.
func makeTree() (string, error) {
	dir, err := os.MkdirTemp("", "hutch-searchcmp-")
	if err != nil {
		return "", err
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return "", err
	}
	return dir, testenv.SourceTree(dir, files, dirs, ignored, literal)
}
