//go:build linux

package sysprog

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
)

// hostOnlyProc lists the root-only entries this kernel has (every Linux
// has some: kmsg, slabinfo...), none of the per-process directories, and
// /proc/sys/net's only when asked.
func TestHostOnlyProcListsRootOnlyEntries(t *testing.T) {
	own, err := hostOnlyProc(false)
	if err != nil {
		t.Fatal(err)
	}
	hostNet, err := hostOnlyProc(true)
	if err != nil {
		t.Fatal(err)
	}
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

// A walk that cannot read an entry fails, whole: a list it left short
// would leave root-only entries readable in the sandbox. Here it runs out
// of descriptors partway down (a host holding many connections).
func TestHostOnlyProcFailsRatherThanListShort(t *testing.T) {
	if !testenv.InChild(t, "true") {
		return
	}
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	// Room for /proc and one directory below it, not for the walk down
	// /proc/sys/kernel/usermodehelper.
	lim := unix.Rlimit{Cur: uint64(len(open) + 1), Max: uint64(len(open) + 1)}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	list, err := hostOnlyProc(false)
	if err == nil || !strings.Contains(err.Error(), "walking /proc") || !errors.Is(err, unix.EMFILE) {
		t.Fatalf("a walk out of descriptors: %v (%d entries)", err, len(list))
	}
	w := &ProcWalk{done: make(chan struct{})}
	w.out, w.err = hostOnlyProc(false)
	close(w.done)
	if _, err := w.Result(policy.Policy{}); err == nil {
		t.Fatal("a walk's failure is not its result's")
	}
}

// The walk is paid at every sandbox's start.
func BenchmarkHostOnlyProc(b *testing.B) {
	for b.Loop() {
		_, _ = hostOnlyProc(false)
	}
}
