package main

import (
	"strings"
	"testing"
)

// The policy's count flags are decimal: pflag's int flags would read 010
// as 8 and take 0x20. hutch mcp shares the flags.
func TestCountFlagsAreDecimal(t *testing.T) {
	for _, flag := range []string{"--pids", "--open-files", "--nice"} {
		for _, v := range []string{"010", "0x20", "1_0", "+5"} {
			code, _, errOut := hutch(t, "", "run", flag, v, "--", "true")
			if code != 125 || !strings.Contains(errOut, `"`+v+`" is not a decimal whole number`) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("run %s %s: exit %d, stderr %q; want 125 and one line naming it", flag, v, code, errOut)
			}
		}
	}
	// --cpus likewise: pflag's float flag took NaN (no CPU bound at all),
	// Inf, 1e3 and hex.
	for _, v := range []string{"NaN", "Inf", "+Inf", "0x1p1", "1e3", ".5", "1.", "-1"} {
		code, _, errOut := hutch(t, "", "run", "--tier", "container", "--image", "busybox", "--cpus", v, "--", "true")
		if code != 125 || !strings.Contains(errOut, `"`+v+`" is not a decimal number`) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("run --cpus %s: exit %d, stderr %q; want 125 and one line naming it", v, code, errOut)
		}
	}
	code, _, errOut := hutch(t, "", "mcp", "--tier", "isolated", "--pids", "010")
	if code == 0 || !strings.Contains(errOut, `"010" is not a decimal whole number`) {
		t.Errorf("mcp --pids 010: exit %d, stderr %q", code, errOut)
	}
}
