//go:build linux

package sysprog

import (
	"errors"
	"os"
	"slices"
	"strconv"
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
	own, err := hostOnlyProc(false, procWalkers)
	if err != nil {
		t.Fatal(err)
	}
	hostNet, err := hostOnlyProc(true, procWalkers)
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

// The walk lists the same entries however it is spread over goroutines.
func TestHostOnlyProcSameOnOneGoroutine(t *testing.T) {
	spread, err := hostOnlyProc(true, 3)
	if err != nil {
		t.Fatal(err)
	}
	one, err := hostOnlyProc(true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spread, one) {
		t.Errorf("the walk on several goroutines listed %q, on one %q", spread, one)
	}
}

// A walk that cannot read an entry fails, whole: a list it left short
// would leave root-only entries readable in the sandbox. Here it runs out
// of descriptors partway down (a host holding many connections).
func TestHostOnlyProcFailsRatherThanListShort(t *testing.T) {
	if !testenv.InChild(t, "true") {
		return
	}
	// The runtime takes two descriptors (epoll, eventfd) for its poller at
	// the first pollable open or timer, which a runtime goroutine may or
	// may not have made by now: a pipe makes it happen here.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr.Close()
	pw.Close()
	// The limit bounds descriptor numbers, not their count, and the
	// inherited ones may leave gaps: fill every free number under a limit
	// above the highest, then free two. That is room for /proc and one
	// directory below it, not for the walk down /proc/sys/kernel/....
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	high := 0
	for _, e := range open {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > high {
			high = n
		}
	}
	lim := unix.Rlimit{Cur: uint64(high + 4), Max: uint64(high + 4)}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var fill []int
	for {
		fd, err := unix.Dup(0)
		if err != nil {
			if !errors.Is(err, unix.EMFILE) {
				t.Fatal(err)
			}
			break
		}
		fill = append(fill, fd)
	}
	if len(fill) < 2 {
		t.Fatalf("only %d descriptors free under a limit of %d", len(fill), lim.Cur)
	}
	unix.Close(fill[len(fill)-1])
	unix.Close(fill[len(fill)-2])
	list, err := hostOnlyProc(false, procWalkers)
	if err == nil || !strings.Contains(err.Error(), "walking /proc") || !errors.Is(err, unix.EMFILE) {
		t.Fatalf("a walk out of descriptors: %v (%d entries)", err, len(list))
	}
	w := &ProcWalk{done: make(chan struct{})}
	w.out, w.err = hostOnlyProc(false, procWalkers)
	close(w.done)
	if _, err := w.Result(policy.Policy{}); err == nil {
		t.Fatal("a walk's failure is not its result's")
	}
}

// The walk is paid at every sandbox's start.
func BenchmarkHostOnlyProc(b *testing.B) {
	for b.Loop() {
		_, _ = hostOnlyProc(false, procWalkers)
	}
}
