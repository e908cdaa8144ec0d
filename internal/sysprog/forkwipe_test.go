package sysprog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

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
		select {
		case r := <-done:
			t.Fatalf("the one-shot ended before its PID 1 was seen: %v, output %q", r.err, r.out)
		default:
		}
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

// rssOf is the resident size of process pid's mappings that overlap m,
// from its smaps (a fork made with a plan has m in pieces); ok is false
// when none does or smaps cannot be read.
func rssOf(pid int, m span) (total int64, ok bool) {
	err := smapsOf(pid, m, func(key, value string) {
		ok = true
		if key == "Rss" {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(value, "kB")), 10, 64)
			if err == nil {
				total += kb << 10
			}
		}
	})
	return total, ok && err == nil
}

// smapsOf calls each with every "key: value" line of process pid's
// smaps that describes a mapping overlapping m.
func smapsOf(pid int, m span, each func(key, value string)) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return err
	}
	in := false
	for line := range strings.Lines(string(b)) {
		first, _, _ := strings.Cut(line, " ")
		if r, ok := mapsRange(first); ok { // a mapping's own line
			in = r.lo < m.hi && r.hi > m.lo
			continue
		}
		if key, value, ok := strings.Cut(line, ":"); ok && in {
			each(key, strings.TrimSpace(value))
		}
	}
	return nil
}

// A plan keeps every page the child uses, and is void when a word it
// scans points into the heap outside what is kept: through an op's
// argument, a kept struct's field, a value boxed in an interface, an op's
// patch, a message header's buffers or the exec data.
func TestHeapPlanKeepsWhatTheChildUsesOrIsVoid(t *testing.T) {
	type pointsTo struct{ at uintptr }
	type boxed struct{ a, b uintptr }
	b := newBuilder()
	path := b.str("/some/path")
	target := &pointsTo{}
	b.call("a call", 0, path, ptr(b, target))
	boxIndex := len(b.p.keep)
	b.p.keep = append(b.p.keep, any(boxed{})) // a struct kept by value, boxed
	buf := make([]byte, 64)
	iov := &unix.Iovec{Base: &buf[0], Len: uint64(len(buf))}
	msg := &unix.Msghdr{Iov: iov, Iovlen: 1}
	b.call("a message", unix.SYS_GETPID, ptr(b, msg))
	patched := new(int32)
	b.call("a patch", unix.SYS_GETPID).patch = patched
	p, err := b.build()
	if err != nil {
		t.Fatal(err)
	}
	x := newCommandExec(b.str, wire.Job{Argv: []string{"true"}, Env: []string{"PATH=/bin"}}, []string{"/bin/true"})
	// A heap object away from everything kept, the stack's window
	// included (where the heap is laid out is the runtime's affair: try
	// a few).
	var pool [][]byte
	var elsewhere uintptr
	var plan *wipePlan
	for range 32 {
		e := make([]byte, 256<<10)
		pool = append(pool, e)
		plan = heapPlan(p, x)
		a := uintptr(unsafe.Pointer(&e[128<<10]))
		if plan != nil && a >= plan.heap.lo && a < plan.heap.hi && (a+(128<<10) < plan.stack.lo || a-(128<<10) >= plan.stack.hi) {
			elsewhere = a
			break
		}
	}
	if plan == nil {
		t.Fatal("no plan for a program that keeps all it points to")
	}
	if elsewhere == 0 {
		t.Fatal("no heap object found away from the stack kept")
	}
	used := []uintptr{path, uintptr(unsafe.Pointer(target)), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&p.ops[0])),
		uintptr(unsafe.Pointer(&p.ops[len(p.ops)-1])), uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(iov)),
		uintptr(unsafe.Pointer(patched)), x.argv[0], x.paths[0], uintptr(unsafe.Pointer(&x.errText[5][0])), uintptr(unsafe.Pointer(x)), here()}
	for _, a := range used {
		if within(plan.gaps, a) {
			t.Errorf("%#x, which the child uses, is wiped", a)
		}
	}
	if !within(plan.gaps, elsewhere) {
		t.Error("a heap object the child does not use is kept")
	}
	boxAt := (*[2]unsafe.Pointer)(unsafe.Pointer(&b.p.keep[boxIndex]))[1]
	for _, c := range []struct {
		name        string
		point, undo func()
	}{
		{"a kept struct's field", func() { target.at = elsewhere }, func() { target.at = 0 }},
		{"an op's argument", func() { p.ops[0].args[3] = elsewhere }, func() { p.ops[0].args[3] = 0 }},
		{"a boxed value", func() { (*boxed)(boxAt).b = elsewhere }, func() { (*boxed)(boxAt).b = 0 }},
		{"a message's buffer", func() { *(*uintptr)(unsafe.Pointer(&buf[8])) = elsewhere }, func() { clear(buf) }},
		{"the exec data", func() { x.dir = elsewhere }, func() { x.dir = 0 }},
	} {
		c.point()
		if heapPlan(p, x) != nil {
			t.Errorf("%s points into the heap outside what is kept, and a plan was made", c.name)
		}
		c.undo()
		if heapPlan(p, x) == nil {
			t.Errorf("%s points nowhere again, and no plan was made", c.name)
		}
	}
	runtime.KeepAlive(pool)
}

// A plan holds only at the stack it was made on, and leaves no mark
// behind either way.
func TestHeapPlanAppliesOnlyOnItsStack(t *testing.T) {
	b, p := getpidProgram(t)
	x := newCommandExec(b.str, wire.Job{Argv: []string{"true"}}, []string{"/bin/true"})
	plan := heapPlan(p, x)
	if plan == nil {
		t.Fatal("no plan")
	}
	if plan.apply(plan.stack.hi + 1<<20) {
		plan.clear()
		t.Error("a plan applied on a stack it was not made on")
	}
	if !plan.apply(here()) {
		t.Fatal("a plan did not apply on its own stack")
	}
	if n := marked(t, plan.heap); n == 0 {
		t.Error("an applied plan marked nothing")
	}
	if !plan.clear() {
		t.Fatal("clear failed")
	}
	if n := marked(t, plan.heap); n != 0 {
		t.Errorf("%d mappings still wiped on fork after clear", n)
	}
}

// marked counts this process's mappings in m wiped on fork ("wf"; the
// runtime keeps others so, for its random state).
func marked(t *testing.T, m span) int {
	n := 0
	err := smapsOf(os.Getpid(), m, func(key, value string) {
		if key == "VmFlags" && slices.Contains(strings.Fields(value), "wf") {
			n++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// getpidProgram is a built program of one harmless call, and its builder.
func getpidProgram(t *testing.T) (*builder, *program) {
	b := newBuilder()
	b.call("a call", unix.SYS_GETPID)
	p, err := b.build()
	if err != nil {
		t.Fatal(err)
	}
	return b, p
}

// A program that is not whole (its ops read as zeros, or cut short of
// its end) fails instead of passing, and so do exec data read as zeros.
func TestZeroedProgramOrExecDataFails(t *testing.T) {
	_, p := getpidProgram(t)
	if i, _ := p.run(); i >= 0 {
		t.Fatalf("a whole program failed at op %d", i)
	}
	for _, c := range []struct {
		name string
		p    *program
	}{
		{"no ops", &program{}},
		{"ops read as zeros", &program{ops: make([]op, len(p.ops))}},
		{"cut short", &program{ops: p.ops[:len(p.ops)-1]}},
		{"an end with another mark", &program{ops: append(slices.Clone(p.ops[:len(p.ops)-1]), op{kind: opEnd})}},
		{"an end before the last op", &program{ops: append(slices.Clone(p.ops), p.ops[0])}},
	} {
		if i, _ := c.p.run(); i < 0 {
			t.Errorf("%s: the program passed", c.name)
		}
	}
	if _, e, code := startCommand(&oneShotExec{}); e != unix.EINVAL || code != 126 {
		t.Errorf("exec data read as zeros: startCommand gave %v, %d; want EINVAL, 126", e, code)
	}
}

// The heap's mapping is found in a maps listing, named or not, and only
// when it is private, anonymous and writable.
func TestAnonMappingFindsTheHeap(t *testing.T) {
	maps := []byte(`00400000-00669000 r-xp 00000000 fe:00 10846674                           /tmp/oneshot
00918000-00970000 rw-p 00518000 fe:00 10846674                           /tmp/one shot
c000000000-c000400000 rw-p 00000000 00:00 0 
c000400000-c004000000 ---p 00000000 00:00 0 
7f0000000000-7f0000100000 rw-p 00000000 00:00 0                          [anon: Go: heap]
7f0000100000-7f0000200000 rw-s 00000000 00:01 1234                       /dev/zero (deleted)
7f0000200000-7f0000300000 rw-p 00000000 00:00 0                          [stack]
`)
	cases := []struct {
		a    uintptr
		want span
		ok   bool
	}{
		{0xc000001000, span{0xc000000000, 0xc000400000}, true},
		{0x7f0000000010, span{0x7f0000000000, 0x7f0000100000}, true},
		{0x00918000, span{0x00918000, 0x00970000}, false},
		{0xc000400000, span{0xc000400000, 0xc004000000}, false},
		{0x7f0000100000, span{0x7f0000100000, 0x7f0000200000}, false},
		{0x7f0000200000, span{0x7f0000200000, 0x7f0000300000}, false},
		{0x1000, span{}, false},
	}
	for _, c := range cases {
		got, ok := anonMapping(maps, c.a)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("anonMapping(%#x) = %v, %v; want %v, %v", c.a, got, ok, c.want, c.ok)
		}
	}
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

// Once a mark could not be cleared, the process makes no more plans.
func TestStuckMarkStopsPlans(t *testing.T) {
	b, p := getpidProgram(t)
	x := newCommandExec(b.str, wire.Job{Argv: []string{"true"}}, []string{"/bin/true"})
	if heapPlan(p, x) == nil {
		t.Fatal("no plan before any mark was stuck")
	}
	stuck.Store(true)
	defer stuck.Store(false)
	if heapPlan(p, x) != nil {
		t.Error("a plan was made after a mark could not be cleared")
	}
}
