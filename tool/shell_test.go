package tool_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/tool"
)

func TestShellTool(t *testing.T) {
	sb, _ := localSB(t)
	ts := toolset(t, sb, permission.Config{Mode: permission.Auto})
	var r tool.ShellResult
	out := call(t, ts, "shell", map[string]any{"command": `printf '\033[1;31mred\033[0m\n'; seq 1 300 >&2; exit 3`})
	must(t, json.Unmarshal([]byte(out.Text), &r))
	if out.IsError || r.ExitCode != 3 || r.Stdout != "red\n" || r.TimedOut {
		t.Errorf("shell: %+v", out)
	}
	if !strings.HasPrefix(r.Stderr, "[truncated 100 lines]\n101\n") || !strings.HasSuffix(r.Stderr, "\n300\n") {
		t.Errorf("stderr not truncated to the last 200 lines: %.60q...", r.Stderr)
	}
	out = call(t, ts, "shell", map[string]any{"command": "sleep 10", "timeout": 0.3})
	must(t, json.Unmarshal([]byte(out.Text), &r))
	if !r.TimedOut || !strings.Contains(r.Stderr, "timed out") {
		t.Errorf("timeout: %+v", out)
	}
	wantErrText(t, call(t, ts, "shell", map[string]any{"command": "true", "timeout": -1}), "timeout must be")
	wantErrText(t, call(t, ts, "shell", map[string]any{"command": " "}), "needs a command")
}

func TestTruncate(t *testing.T) {
	lines := func(n int) string {
		var b strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "%d\n", i)
		}
		return b.String()
	}
	cases := []struct {
		name, in, want string
		maxLines, max  int
	}{
		{"short", "a\nb\n", "a\nb\n", 200, 100},
		{"ansi", "\x1b[1;31mred\x1b[0m \x1b]0;title\x07x\x1b[2K", "red x", 200, 100},
		{"lines", lines(5), "[truncated 2 lines]\n3\n4\n5\n", 3, 100},
		{"no trailing newline", "1\n2\n3", "[truncated 1 lines]\n2\n3", 2, 100},
		{"chars keep the end", "abcdef", "def", 10, 3},
		{"chars never cut a rune", "ééééé", "ééé", 10, 3},
		{"exactly max lines", lines(3), lines(3), 3, 100},
		{"empty", "", "", 3, 100},
		{"one newline", "\n", "\n", 3, 100},
		{"empty lines", "\n\n\n\n", "[truncated 2 lines]\n\n\n", 2, 100},
		{"no lines kept", lines(2), "[truncated 2 lines]\n", 0, 100},
		{"no lines kept, no trailing newline", "1\n2", "[truncated 2 lines]", 0, 100},
		{"negative lines", "ab\n", "[truncated 1 lines]\n", -1, 100},
		{"no chars", "ab\n", "", 10, 0},
		{"bad UTF-8 counts as one", "ab\xff\xfecd", "\ufffd\ufffdcd", 10, 4},
		{"bad UTF-8 kept when nothing is cut", "a\xff", "a\xff", 10, 4},
		{"lines, then chars", lines(5), "4\n5\n", 2, 4},
	}
	for _, c := range cases {
		if got := tool.Truncate(c.in, c.maxLines, c.max); got != c.want {
			t.Errorf("%s: Truncate = %q, want %q", c.name, got, c.want)
		}
	}
}

// Truncate keeps the last MaxShellLines lines and MaxShellChars
// characters of a stream without splitting the whole stream into lines
// or runes: 1 MiB of newlines (the most the shell tool keeps per stream,
// sandbox.DefaultMaxOutput) costs at most a few MiB, not the ~18 MiB per
// stream per call that once took "hutch mcp --tier local" to 2.5 GB peak
// RSS under 100 concurrent "yes & yes >&2" shell calls.
// Origin: review 15c.
func TestTruncateAllocatesLittle(t *testing.T) {
	for _, in := range []string{
		strings.Repeat("\n", sandbox.DefaultMaxOutput),
		strings.Repeat("y\n", sandbox.DefaultMaxOutput/2),
		strings.Repeat("é", sandbox.DefaultMaxOutput/2),
	} {
		n := allocDuring(func() { _ = tool.Truncate(in, tool.MaxShellLines, tool.MaxShellChars) })
		if n > 4<<20 {
			t.Errorf("Truncate of %d bytes (%q...) allocated %.1f MiB to return at most %d characters",
				len(in), in[:4], float64(n)/(1<<20), tool.MaxShellChars)
		}
	}
}
