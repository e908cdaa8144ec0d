package sysprog

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/policy"
)

// The one-shot's PID 1 holds only the pages of this process's heap it
// uses: with a heap of tens of megabytes here, the child's share of the
// heap's mapping is a small part of it, and the run is counted as made
// with the plan (so the fast path is not lost without a test failing).
func TestOneShotChildHoldsOnlyTheHeapItUses(t *testing.T) {
	ballast := make([][]byte, 4096) // 16 MiB, touched
	for i := range ballast {
		ballast[i] = bytes.Repeat([]byte{1}, 4096)
	}
	heap, ok := mappingOf(uintptr(unsafe.Pointer(&ballast[len(ballast)/2][0])))
	if !ok {
		t.Fatal("the heap's mapping is not found in /proc/self/maps")
	}
	before := forksWiped.Load()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, _, err := runOneShot(t, nil, "sleep 2; echo ran")
		done <- result{out, err}
	}()
	var child, parent int64
	for deadline := time.Now().Add(10 * time.Second); child == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no one-shot PID 1 among this process's children within 10 s")
		}
		for _, pid := range children(t) {
			if rss, ok := rssOf(pid, heap); ok {
				child = max(rss, 1)
			}
		}
	}
	parent, _ = rssOf(os.Getpid(), heap)
	r := <-done
	runtime.KeepAlive(ballast)
	if r.err != nil || strings.TrimSpace(r.out) != "ran" {
		t.Fatalf("the one-shot: %v, output %q", r.err, r.out)
	}
	if parent < 16<<20 {
		t.Fatalf("this process's heap mapping holds %d KiB, want 16 MiB or more for the test to mean anything", parent>>10)
	}
	if child > parent/8 {
		t.Errorf("the one-shot's PID 1 holds %d KiB of the heap's mapping, this process %d KiB: want a small part of it", child>>10, parent>>10)
	}
	if forksWiped.Load() <= before {
		t.Error("the one-shot was forked without its heap plan")
	}
}

// children is this process's children's pids, from every thread.
func children(t *testing.T) []int {
	tasks, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(s); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// rssOf is the resident size of process pid's mappings within m, from
// its smaps (a fork made with a plan has m in pieces).
func rssOf(pid int, m span) (int64, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var total int64
	in, found := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if r, _, ok := strings.Cut(line, " "); ok && strings.Contains(r, "-") && !strings.HasSuffix(r, ":") {
			lo, hi, _ := strings.Cut(r, "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uintptr(l) >= m.lo && uintptr(h) <= m.hi
			found = found || in
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); ok && in {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, false
			}
			total += kb << 10
		}
	}
	return total, found
}

// A plan keeps every page a word it scans points to, and is void when a
// word points into the heap outside what is kept.
func TestHeapPlanKeepsWhatTheChildUsesOrIsVoid(t *testing.T) {
	type pointsTo struct{ at uintptr }
	elsewhere := make([]byte, 64<<10) // a heap object the program does not keep
	b := newBuilder()
	path := b.str("/some/path")
	target := &pointsTo{}
	b.call("a call", 0, path, ptr(b, target))
	p, err := b.build()
	if err != nil {
		t.Fatal(err)
	}
	x := newCommandExec(b.str, wire.Job{Argv: []string{"true"}, Env: []string{"PATH=/bin"}}, []string{"/bin/true"})
	plan := heapPlan(p, x)
	if plan == nil {
		t.Fatal("no plan for a program that keeps all it points to")
	}
	for _, a := range []uintptr{path, uintptr(unsafe.Pointer(target)), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&p.ops[0])), x.argv[0], x.paths[0], uintptr(unsafe.Pointer(&x.errText[5][0])), here()} {
		if within(plan.gaps, a) {
			t.Errorf("%#x, which the child uses, is wiped", a)
		}
	}
	if !within(plan.gaps, uintptr(unsafe.Pointer(&elsewhere[32<<10]))) {
		t.Error("a heap object the child does not use is kept")
	}
	target.at = uintptr(unsafe.Pointer(&elsewhere[32<<10])) // as a kernel struct's pointer field would be
	if heapPlan(p, x) != nil {
		t.Error("a plan was made though a kept struct points into the heap outside what is kept")
	}
	runtime.KeepAlive(elsewhere)
}

func TestGapsAreWhatIsNotKept(t *testing.T) {
	const pg = 4096
	cases := []struct {
		name string
		kept []span
		want []span
	}{
		{"nothing kept", nil, []span{{0, 10 * pg}}},
		{"one page inside", []span{{3*pg + 5, 3*pg + 6}}, []span{{0, 3 * pg}, {4 * pg, 10 * pg}}},
		{"touching and overlapping", []span{{pg, 2 * pg}, {2*pg + 1, 3 * pg}, {5 * pg, 6 * pg}, {5*pg + 7, 7 * pg}}, []span{{0, pg}, {3 * pg, 5 * pg}, {7 * pg, 10 * pg}}},
		{"the ends, and beyond", []span{{0, 1}, {9*pg + 1, 12 * pg}, {20 * pg, 21 * pg}}, []span{{pg, 9 * pg}}},
		{"all of it", []span{{0, 10 * pg}}, nil},
	}
	if os.Getpagesize() != pg {
		t.Skipf("the cases are for %d-byte pages, this machine's are %d", pg, os.Getpagesize())
	}
	for _, c := range cases {
		got := gaps(span{0, 10 * pg}, merge(c.kept, pg))
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: gaps = %v, want %v", c.name, got, c.want)
		}
	}
}

// BenchmarkHeapPlan is the cost of planning a one-shot's fork, and with
// marking and clearing the plan, for a program of the default policy.
func BenchmarkHeapPlan(b *testing.B) {
	dir := b.TempDir()
	pol, err := policy.Default().Extend(policy.Policy{Dir: dir, Read: []string{dir}}).Normalize(dir)
	if err != nil {
		b.Fatal(err)
	}
	bl := newBuilder()
	if err := bl.root(pol, wire.Quotas{}); err != nil {
		b.Fatal(err)
	}
	job := wire.Job{Policy: pol, Argv: []string{"/bin/true"}, Env: []string{"PATH=/bin"}}
	if err := confineOps(bl, job); err != nil {
		b.Fatal(err)
	}
	p, err := bl.build()
	if err != nil {
		b.Fatal(err)
	}
	x := newOneShotExec(bl, job, 1)
	b.Run("plan", func(b *testing.B) {
		for b.Loop() {
			if heapPlan(p, x) == nil {
				b.Fatal("no plan")
			}
		}
	})
	b.Run("plan+mark", func(b *testing.B) {
		for b.Loop() {
			plan := heapPlan(p, x)
			if plan == nil || !plan.apply(here()) {
				b.Fatal("no plan, or not applied")
			}
			plan.clear()
		}
	})
}
