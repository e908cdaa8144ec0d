package sandbox

import (
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
	ParseProbe(string(out), &env)
	if env.Locale != "C.UTF-8" {
		t.Errorf("Locale = %q from output %q", env.Locale, out)
	}
	if len(env.Commands) != 1 || !strings.HasSuffix(env.Commands["sh"].Path, "/sh") {
		t.Errorf("Commands = %v, want only sh, from output %q", env.Commands, out)
	}
}
