//go:build linux

package sysprog

import (
	"slices"
	"testing"
)

// hostOnlyProc lists the root-only entries this kernel has (every Linux
// has some: kmsg, slabinfo...), none of the per-process directories, and
// /proc/sys/net's only when asked.
func TestHostOnlyProcListsRootOnlyEntries(t *testing.T) {
	own, hostNet := hostOnlyProc(false), hostOnlyProc(true)
	if len(own) == 0 {
		t.Fatal("no root-only entry found in /proc")
	}
	for _, p := range own {
		if len(p) > 6 && p[6] >= '0' && p[6] <= '9' || len(p) >= 13 && p[:13] == "/proc/sys/net" {
			t.Errorf("listed %s", p)
		}
	}
	for _, p := range own {
		if !slices.Contains(hostNet, p) {
			t.Errorf("%s is listed without the host's network but not with it", p)
		}
	}
}

// The walk is paid at every sandbox's start.
func BenchmarkHostOnlyProc(b *testing.B) {
	for b.Loop() {
		hostOnlyProc(false)
	}
}
