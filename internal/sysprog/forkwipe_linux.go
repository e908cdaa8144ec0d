package sysprog

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The one-shot's PID 1 is a fork of this process, and lives as long as
// its command. A fork shares every page of the Go heap copy-on-write
// with this process, so each page this process writes while PID 1 lives
// (the runtime zeroing and marking spans, every allocation) first takes
// a fault, a copy and a flush of the other cores' TLBs: about 300 a run
// in a loop of one-shots, most of the host's extra time against
// bubblewrap's. PID 1 reads a few pages of the heap: its program, what
// the program's calls point to, the command's exec data and its stack.
//
// So, under syscall.ForkLock, the rest of the heap's mapping is marked
// MADV_WIPEONFORK for the fork and cleared at once after it: the child
// gets zero pages there, and neither side copies or faults on them.
// Which pages the child needs is found from the program and the exec
// data themselves (heapPlan), and the plan is checked word by word: a
// word in the heap that points outside what is kept makes the plan void,
// and the fork goes ahead as a plain one. A plan can only spare work,
// never change what the child sees of what it uses.

// A span is the memory [lo, hi).
type span struct{ lo, hi uintptr }

// wipePlan is a fork's plan: the pages of heap to wipe in the child,
// and the stack range the fork's caller must stay in for it to hold.
type wipePlan struct {
	heap  span   // the heap's mapping: cleared again after the fork
	gaps  []span // what of it the child gets as zero pages
	stack span   // kept: the child runs on the calling goroutine's stack
	// applied is set once a fork was made with the plan; stuck when its
	// mark could not be cleared.
	applied, stuck bool
}

// stackBelow and stackAbove are how much of the calling goroutine's
// stack around the plan's making is kept: the fork's nosplit chain, a few hundred bytes
// below the fork's frame, and the frames above it, to spare. forkChild
// checks it is still within this at the fork (a stack moved since voids
// the plan).
const (
	stackBelow = 128 << 10
	stackAbove = 16 << 10
	stackNeed  = 32 << 10 // below the fork's own frame
	minGap     = 64 << 10 // the least of the heap a plan wipes at once
)

// heapPlan plans the fork of the one-shot's PID 1 with program p and
// exec data x (see wipePlan). nil when there is no plan to make: the
// heap's mapping is not found or the memory the child uses cannot be
// told apart from the rest (a word that points into the heap outside
// everything kept, a kind of Go value the walk does not follow).
func heapPlan(p *program, x *oneShotExec) *wipePlan {
	heap, ok := heapMapping(uintptr(unsafe.Pointer(p)))
	if !ok {
		return nil
	}
	r := &reach{heap: heap, seen: map[seenKey]bool{}}
	// The program: the child reads its ops, slots and stat buffer, and
	// the kernel reads (or writes) what the ops point to, all of it in
	// keep. Its other fields (the ops' descriptions) the child never
	// reads: the struct is kept, not scanned.
	r.keepRaw(unsafe.Pointer(p), unsafe.Sizeof(*p))
	if len(p.ops) > 0 {
		ops := unsafe.Pointer(unsafe.SliceData(p.ops))
		r.keep(ops, uintptr(cap(p.ops))*unsafe.Sizeof(p.ops[0]))
		for i := range p.ops {
			if q := p.ops[i].patch; q != nil {
				r.keep(unsafe.Pointer(q), unsafe.Sizeof(*q))
			}
		}
	}
	for i := range p.keep {
		if b, ok := p.keep[i].([]byte); ok { // most of them: strings
			r.keep(unsafe.Pointer(unsafe.SliceData(b)), uintptr(cap(b)))
			continue
		}
		r.walk(reflect.ValueOf(&p.keep[i]).Elem())
	}
	r.walk(reflect.ValueOf(x))
	for _, g := range childGlobals {
		r.walk(reflect.ValueOf(*g))
	}
	if tp, ok := threadPointer(); ok {
		// The child reloads its goroutine register from here (a runtime
		// structure of this thread, in the heap), and never uses it.
		r.kept = append(r.kept, span{tp - 64, tp + 64})
	}
	if r.err != nil || stuck.Load() {
		return nil
	}
	// The stack as it is now, after the walk has grown it as deep as the
	// fork will go (a stack that moves later voids the plan at apply).
	sp := here()
	plan := &wipePlan{heap: heap, stack: span{sp - stackBelow, sp + stackAbove}}
	kept := merge(append(r.kept, plan.stack), 1)
	if !r.covered(kept) {
		return nil
	}
	// A gap too small to be worth a system call (and two splits of the
	// mapping) is left shared.
	plan.gaps = slices.DeleteFunc(gaps(heap, merge(kept, uintptr(os.Getpagesize()))), func(g span) bool { return g.hi-g.lo < minGap })
	if len(plan.gaps) == 0 {
		return nil
	}
	return plan
}

// seenKey is a walked Go value: its address and type.
type seenKey struct {
	at uintptr
	t  reflect.Type
}

// reach is the walk of what the child uses: the spans kept, and those of
// them the kernel or the child read pointers from (scanned).
type reach struct {
	heap    span
	kept    []span
	scanned []block // kept memory read for pointers
	seen    map[seenKey]bool
	err     error
}

// block is n bytes of memory at at.
type block struct {
	at unsafe.Pointer
	n  uintptr
}

// keepRaw keeps [at, at+n) without scanning it.
func (r *reach) keepRaw(at unsafe.Pointer, n uintptr) {
	if at == nil || n == 0 {
		return
	}
	s := span{uintptr(at), uintptr(at) + n}
	if k := len(r.kept); k > 0 && r.kept[k-1].hi >= s.lo && r.kept[k-1].lo <= s.hi {
		// Touching the last (objects allocated one after another): one
		// span, fewer to sort.
		r.kept[k-1] = span{min(r.kept[k-1].lo, s.lo), max(r.kept[k-1].hi, s.hi)}
		return
	}
	r.kept = append(r.kept, s)
}

// keep keeps [at, at+n) and scans it for pointers into the heap.
func (r *reach) keep(at unsafe.Pointer, n uintptr) {
	if at != nil && n > 0 {
		r.keepRaw(at, n)
		r.scanned = append(r.scanned, block{at, n})
	}
}

// walk keeps the memory v (addressable, or a pointer or slice) refers to,
// and walks on through every Go pointer in it.
func (r *reach) walk(v reflect.Value) {
	if r.err != nil {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		et := v.Type().Elem()
		r.keep(v.UnsafePointer(), et.Size())
		if !hasPointers(et) {
			return
		}
		k := seenKey{v.Pointer(), v.Type()}
		if r.seen[k] {
			return
		}
		r.seen[k] = true
		r.inside(v.Elem())
	case reflect.Slice:
		if v.Cap() == 0 {
			return
		}
		et := v.Type().Elem()
		r.keep(v.UnsafePointer(), uintptr(v.Cap())*et.Size())
		if hasPointers(et) {
			for i := range v.Len() {
				r.inside(v.Index(i))
			}
		}
	case reflect.String:
		if v.Len() > 0 {
			r.keep(unsafe.Pointer(unsafe.StringData(v.String())), uintptr(v.Len()))
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		e := v.Elem()
		switch e.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.String:
			r.walk(e)
		default:
			if !v.CanAddr() {
				r.err = fmt.Errorf("an interface holding %v out of reach", e.Type())
				return
			}
			// A boxed value: the interface's second word points to it.
			data := (*[2]unsafe.Pointer)(v.Addr().UnsafePointer())[1]
			if !hasPointers(e.Type()) || uintptr(data) == 0 {
				r.keep(data, e.Type().Size())
				return
			}
			r.walk(reflect.NewAt(e.Type(), data))
		}
	case reflect.Struct, reflect.Array:
		r.inside(v)
	case reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		if !v.IsZero() {
			r.err = fmt.Errorf("a %v the walk does not follow", v.Type())
		}
	}
}

// inside walks the Go pointers held in v's own memory, which is kept.
func (r *reach) inside(v reflect.Value) {
	if r.err != nil || !hasPointers(v.Type()) {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		r.extents(v)
		for i := range v.NumField() {
			r.inside(v.Field(i))
		}
	case reflect.Array:
		for i := range v.Len() {
			r.inside(v.Index(i))
		}
	default:
		r.walk(v)
	}
}

// extents keeps the whole of what a kernel struct's pointer fields point
// to, whose lengths are other fields: a typed pointer alone keeps one
// element.
func (r *reach) extents(v reflect.Value) {
	t := v.Type()
	if t != iovecType && t != msghdrType && t != sockFprogType {
		return
	}
	// (NewAt: v may be an unexported field, which Interface refuses.)
	switch q := reflect.NewAt(t, v.Addr().UnsafePointer()).Interface().(type) {
	case *unix.Iovec:
		r.keep(unsafe.Pointer(q.Base), uintptr(q.Len))
	case *unix.Msghdr:
		r.keep(unsafe.Pointer(q.Name), uintptr(q.Namelen))
		r.keep(unsafe.Pointer(q.Control), uintptr(q.Controllen))
		if q.Iov != nil {
			r.keep(unsafe.Pointer(q.Iov), uintptr(q.Iovlen)*unsafe.Sizeof(*q.Iov))
			for _, iov := range unsafe.Slice(q.Iov, q.Iovlen) {
				r.keep(unsafe.Pointer(iov.Base), uintptr(iov.Len))
			}
		}
	case *unix.SockFprog:
		if q.Filter != nil {
			r.keep(unsafe.Pointer(q.Filter), uintptr(q.Len)*unsafe.Sizeof(*q.Filter))
		}
	}
}

var (
	iovecType     = reflect.TypeFor[unix.Iovec]()
	msghdrType    = reflect.TypeFor[unix.Msghdr]()
	sockFprogType = reflect.TypeFor[unix.SockFprog]()
)

// pointerTypes caches, per type, what hasPointers reports.
var pointerTypes sync.Map // reflect.Type → bool

// hasPointers reports whether values of t hold Go pointers.
func hasPointers(t reflect.Type) bool {
	if v, ok := pointerTypes.Load(t); ok {
		return v.(bool)
	}
	v := holdsPointers(t)
	pointerTypes.Store(t, v)
	return v
}

// holdsPointers: a field the garbage collector follows.
func holdsPointers(t reflect.Type) bool {
	return anyPart(t, func(t reflect.Type) bool {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.String, reflect.Interface, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
			return true
		}
		return false
	})
}

// anyPart reports whether leaf holds for a part of t: t itself, or an
// element or field of any depth that is neither an array nor a struct.
func anyPart(t reflect.Type, leaf func(reflect.Type) bool) bool {
	switch t.Kind() {
	case reflect.Array:
		return t.Len() > 0 && anyPart(t.Elem(), leaf)
	case reflect.Struct:
		for i := range t.NumField() {
			if anyPart(t.Field(i).Type, leaf) {
				return true
			}
		}
		return false
	}
	return leaf(t)
}

// covered reports whether every aligned word of the scanned spans that
// points into the heap's mapping points into kept (sorted, merged).
func (r *reach) covered(kept []span) bool {
	const w = unsafe.Sizeof(uintptr(0))
	for _, b := range r.scanned {
		skip := (w - uintptr(b.at)%w) % w
		if b.n <= skip {
			continue
		}
		words := unsafe.Slice((*uintptr)(unsafe.Add(b.at, skip)), (b.n-skip)/w)
		for _, a := range words {
			if a >= r.heap.lo && a < r.heap.hi && !within(kept, a) {
				return false
			}
		}
	}
	return true
}

// within reports whether a is in one of spans (sorted, merged).
func within(spans []span, a uintptr) bool {
	lo, hi := 0, len(spans)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch {
		case spans[m].hi <= a:
			lo = m + 1
		case spans[m].lo > a:
			hi = m
		default:
			return true
		}
	}
	return false
}

// merge sorts spans, widens each to whole units of size unit (a power of
// two) and joins those that touch.
func merge(spans []span, unit uintptr) []span {
	out := make([]span, 0, len(spans))
	for _, s := range spans {
		out = append(out, span{s.lo &^ (unit - 1), (s.hi + unit - 1) &^ (unit - 1)})
	}
	slices.SortFunc(out, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	n := 0
	for _, s := range out {
		if n > 0 && s.lo <= out[n-1].hi {
			out[n-1].hi = max(out[n-1].hi, s.hi)
			continue
		}
		out[n] = s
		n++
	}
	return out[:n]
}

// gaps is what of within lies outside kept (sorted, merged).
func gaps(within span, kept []span) []span {
	var out []span
	at := within.lo
	for _, s := range kept {
		if s.hi <= at {
			continue
		}
		if s.lo >= within.hi {
			break
		}
		if s.lo > at {
			out = append(out, span{at, s.lo})
		}
		at = max(at, s.hi)
	}
	if at < within.hi {
		out = append(out, span{at, within.hi})
	}
	return out
}

// lastHeap is the heap's mapping as heapMapping last read it. The Go
// runtime never unmaps its heap: a range that was the heap's stays so.
var lastHeap struct {
	sync.Mutex
	span
}

// heapMapping is the mapping that holds a, a heap address: the one read
// last, or read again from /proc/self/maps when a is outside it or the
// memory next to it can be read (the heap may have grown).
func heapMapping(a uintptr) (span, bool) {
	lastHeap.Lock()
	defer lastHeap.Unlock()
	if a >= lastHeap.lo && a < lastHeap.hi && !readable(lastHeap.lo-1) && !readable(lastHeap.hi) {
		return lastHeap.span, true
	}
	m, ok := mappingOf(a)
	if ok {
		lastHeap.span = m
	}
	return m, ok
}

// readable reports whether address a can be read: the heap's reserve
// beyond its mapping is mapped too, but without access until the heap
// grows into it.
func readable(a uintptr) bool {
	var b [1]byte
	local := []unix.Iovec{{Base: &b[0], Len: 1}}
	remote := []unix.RemoteIovec{{Base: a, Len: 1}}
	n, err := unix.ProcessVMReadv(os.Getpid(), local, remote, 0)
	return err == nil && n == 1
}

// mappingOf is the mapping of this process that holds address a, when
// it is private, anonymous and writable (the Go heap's).
func mappingOf(a uintptr) (span, bool) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return span{}, false
	}
	return anonMapping(maps, a)
}

// anonMapping is the mapping of a /proc/pid/maps listing that holds a,
// when it is private, anonymous and writable: no file, and no name but
// one the kernel shows for a named anonymous mapping ("[anon:...]", as
// Go names its heap where the kernel lets it).
func anonMapping(maps []byte, a uintptr) (span, bool) {
	for line := range bytes.Lines(maps) {
		f := bytes.Fields(line)
		if len(f) < 5 {
			continue
		}
		m, ok := mapsRange(string(f[0]))
		if !ok || a < m.lo || a >= m.hi {
			continue
		}
		// perms, offset, device, inode, and a name, if any.
		name := bytes.TrimSpace(bytes.Join(f[5:], []byte{' '}))
		anon := string(f[4]) == "0" && (len(name) == 0 || bytes.HasPrefix(name, []byte("[anon:")))
		return m, anon && string(f[1]) == "rw-p"
	}
	return span{}, false
}

// mapsRange is the range of a mapping as /proc/pid/maps and smaps write
// it ("lo-hi", in hexadecimal).
func mapsRange(field string) (span, bool) {
	lo, hi, ok := strings.Cut(field, "-")
	l, err1 := strconv.ParseUint(lo, 16, 64)
	h, err2 := strconv.ParseUint(hi, 16, 64)
	return span{uintptr(l), uintptr(h)}, ok && err1 == nil && err2 == nil
}

// here is an address on the caller's stack, just below its frame.
//
//go:nosplit
//go:noinline
//go:norace
func here() uintptr {
	var b byte
	return uintptr(unsafe.Pointer(&b))
}

// forksWiped counts the one-shot forks made with a plan applied: a
// test sees that the one-shots it runs do not lose it.
var forksWiped atomic.Int64

// apply marks the plan's gaps wiped at a fork; it reports whether all
// are (a partial mark is cleared again). sp is the fork's caller's stack
// pointer: the plan holds only while the stack it kept is where sp is.
//
//go:nosplit
//go:norace
func (w *wipePlan) apply(sp uintptr) bool {
	if sp-stackNeed < w.stack.lo || sp+1024 > w.stack.hi {
		return false
	}
	for _, g := range w.gaps { // (range: no bounds check)
		if _, e := sys6(unix.SYS_MADVISE, g.lo, g.hi-g.lo, unix.MADV_WIPEONFORK, 0, 0, 0); e != 0 {
			w.stuck = !w.clear()
			return false
		}
	}
	return true
}

// clear undoes apply: the whole mapping forks whole again. It reports
// whether it could.
//
//go:nosplit
//go:norace
func (w *wipePlan) clear() bool {
	if _, e := sys6(unix.SYS_MADVISE, w.heap.lo, w.heap.hi-w.heap.lo, unix.MADV_KEEPONFORK, 0, 0, 0); e == 0 {
		return true
	}
	ok := true
	for _, g := range w.gaps { // (range: no bounds check)
		if _, e := sys6(unix.SYS_MADVISE, g.lo, g.hi-g.lo, unix.MADV_KEEPONFORK, 0, 0, 0); e != 0 {
			ok = false
		}
	}
	return ok
}

// stuck is set once a plan's mark could not be cleared: this process
// then makes no more plans, and a fork of its own (os/exec's) may find
// part of its heap zero in the child, which fails that child.
var stuck atomic.Bool
