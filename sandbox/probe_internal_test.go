package sandbox

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestOneLine(t *testing.T) {
	long := strings.Repeat("é", 400)
	tests := []struct{ in, want string }{
		{"", ""},
		{"   \n\n  ", ""},
		{"just this", "just this"},
		{"  padded  \n", "padded"},
		{"first\nsecond\nlast", "last"},
		{"first\nsecond\n\n", "second"},
		{"an error here\nmore context\nlast", "an error here"},
		{"ERROR: one\nError: two\nthe end", "Error: two"},
		{"step\nmount failed: EPERM\nsee docs", "mount failed: EPERM"},
		{"x\nCaused by: boom\ny", "Caused by: boom"},
		{"because\n  it FAILED badly  \nok", "it FAILED badly"},
		{long, strings.Repeat("é", 300)},
		{"x\n" + strings.Repeat("a", 300) + "b\ny", "y"},
	}
	for _, tt := range tests {
		got := oneLine(tt.in)
		if got != tt.want {
			t.Errorf("oneLine(%.40q) = %.40q, want %.40q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "\n") || utf8.RuneCountInString(got) > 300 || !utf8.ValidString(got) && utf8.ValidString(tt.in) {
			t.Errorf("oneLine(%.40q) = %.40q: not one short valid line", tt.in, got)
		}
	}
}

// TestProbeScriptRuns runs the real probe script with /bin/sh, including
// names that would do harm if the script interpolated them.
func TestProbeScriptRuns(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	names := []string{"sh", "hutch-no-such-command-xyz", "$(touch " + marker + ")", "; touch " + marker, "`touch " + marker + "`"}
	cmd := exec.Command("/bin/sh", append([]string{"-c", probeScript, "hutch-probe"}, names...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe script: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("a command name was executed as shell code")
	}
	var env Environment
	parseProbe(string(out), &env)
	if env.Locale != "C.UTF-8" {
		t.Errorf("Locale = %q from output %q", env.Locale, out)
	}
	if len(env.Commands) != 1 || !strings.HasSuffix(env.Commands["sh"].Path, "/sh") {
		t.Errorf("Commands = %v, want only sh, from output %q", env.Commands, out)
	}
}

func TestParseProbe(t *testing.T) {
	out := strings.Join([]string{
		"locale=C.UTF-8",
		"cmd=python3\t/usr/bin/python3\tPython 3.11.7",
		"cmd=node\t/usr/local/bin/node\tv20.1.0",
		"cmd=bash\t/bin/bash\tGNU bash, version 5.2.15(1)-release (x86_64-pc-linux-gnu)",
		"cmd=sh\t/bin/sh\t",                          // printed nothing
		"cmd=dash\t/bin/dash",                        // no version field at all
		"cmd=weird\t/opt/weird\tweird has no number", // no dotted number
		"cmd=tabs\t/t\tname\tv1.2\tmore",             // version field keeps its tabs
		"cmd=\t/nobody\t1.0",                         // empty name: ignored
		"cmd=python2",                                // no path: ignored
		"cmd=",                                       // ignored
		"garbage line",
		" locale=ignored", // not at line start
		"Cmd=x\t/x\t1.0",  // case matters
		"",
	}, "\n")
	var env Environment
	parseProbe(out, &env)
	want := map[string]CommandInfo{
		"python3": {Path: "/usr/bin/python3", Version: "3.11.7"},
		"node":    {Path: "/usr/local/bin/node", Version: "20.1.0"},
		"bash":    {Path: "/bin/bash", Version: "5.2.15"},
		"sh":      {Path: "/bin/sh", Version: ""},
		"dash":    {Path: "/bin/dash", Version: ""},
		"weird":   {Path: "/opt/weird", Version: ""},
		"tabs":    {Path: "/t", Version: "1.2"},
	}
	if !maps.Equal(env.Commands, want) {
		t.Errorf("Commands = %v\nwant       %v", env.Commands, want)
	}
	if env.Locale != "C.UTF-8" {
		t.Errorf("Locale = %q, want C.UTF-8", env.Locale)
	}
	if env.Error != "" {
		t.Errorf("Error = %q, want empty", env.Error)
	}
}

func TestParseProbeVersion(t *testing.T) {
	tests := []struct{ line, want string }{
		{"Python 3.11.7", "3.11.7"},
		{"v20.1.0", "20.1.0"},
		{"GNU bash, version 5.2.15(1)-release", "5.2.15"},
		{"ruby 3.2.2 (2023-03-30 revision e51014f9c0) [x86_64-linux]", "3.2.2"},
		{"go version go1.22.0 linux/amd64", "1.22.0"},
		{"BusyBox v1.36.1 (2023-11-07 18:53:09 UTC) multi-call binary.", "1.36.1"},
		{"tool 10.0", "10.0"},
		{"version 5", ""}, // not dotted
		{"1.", ""},
		{"no number here", ""},
		{"", ""},
		{"x 1.2.3.4.5 y 6.7", "1.2.3.4.5"},
	}
	for _, tt := range tests {
		var env Environment
		parseProbe("cmd=c\t/bin/c\t"+tt.line, &env)
		if got := env.Commands["c"]; got.Version != tt.want || got.Path != "/bin/c" {
			t.Errorf("version of %q = %+v, want %q", tt.line, got, tt.want)
		}
	}
}

func TestParseProbeMerges(t *testing.T) {
	env := Environment{
		Commands: map[string]CommandInfo{"old": {Path: "/old"}, "sh": {Path: "/stale"}},
		Locale:   "before",
	}
	parseProbe("cmd=sh\t/bin/sh\t\nlocale=\n", &env)
	if env.Commands["old"].Path != "/old" || env.Commands["sh"].Path != "/bin/sh" {
		t.Errorf("Commands = %v", env.Commands)
	}
	if env.Locale != "" {
		t.Errorf("Locale = %q, want the empty locale the probe printed", env.Locale)
	}
	// A later locale line wins; empty output leaves a usable map.
	var e2 Environment
	parseProbe("", &e2)
	if e2.Commands == nil || len(e2.Commands) != 0 || e2.Locale != "" {
		t.Errorf("parseProbe(\"\") = %+v", e2)
	}
	parseProbe("locale=a\nlocale=b", &e2)
	if e2.Locale != "b" {
		t.Errorf("Locale = %q, want b", e2.Locale)
	}
}
