package sysprog

import (
	"fmt"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A program is a list of system calls, fixed in advance by ordinary Go
// code and then run by run, which only loops and calls the kernel: no
// allocation, no lock, no stack growth, nothing of the Go runtime. That
// makes it safe to run in a child made by a raw fork of a Go process,
// where the runtime's other threads do not exist (see oneShot), as well
// as in an ordinary Go process (the sandbox's init builds its root with
// the same program). So the sandbox is built by one piece of code on
// every path.
//
// Everything a call points to (paths, structs) is kept alive by the
// program itself and holds no Go pointer that run would follow. Results
// such as descriptors go to numbered slots, from which later calls take
// arguments.
type program struct {
	ops   []op
	what  []string // per op: what it does, for the error (never read by run)
	keep  []any    // memory the ops point to
	slots [slotCount]uintptr
	stat  unix.Stat_t // fstat buffer of opType
}

const slotCount = 256 // a uint8 indexes every slot

// The kinds of op. None is zero: memory a program does not own (a page
// a fork's child got as zeros, see heapPlan) is never a step that
// passes.
const (
	opCall   = 1 + iota // the system call nr with args
	opType              // fstat slot in[0]; its file type must be args[0]
	opJump              // skip `skip` ops
	opExpect            // slot in[0] must hold args[0]
	opEnd               // the program's last op, with args[0] endMark
)

// endMark is the end op's mark: run fails a program that does not end
// with it, so a list of ops cut short (or read as zeros) never passes.
const endMark = 0x6875746368_656e64 // "hutchend"

// An op is one step of a program.
type op struct {
	kind uint8
	nr   uintptr
	args [6]uintptr
	// in[i] > 0 replaces args[i] with slots[in[i]].
	in [6]uint8
	// out > 0 stores the call's result in slots[out].
	out uint8
	// patch, when set, is an int32 that receives slots[patchFrom] before
	// the call (a descriptor inside a struct).
	patch     *int32
	patchFrom uint8
	// okErrs is a set of errnos (bit n for errno n < 64) that do not fail
	// the program: on one of them, the next skip ops are skipped. For
	// opType, a type mismatch does the same when skip > 0.
	okErrs uint64
	skip   uint16
}

// errTypeChanged is run's errno when a path's file type is not the one
// the program was made for (it changed while the sandbox was built).
const errTypeChanged = uintptr(unix.ESTALE)

// run executes the program's ops in order. It returns the index of the
// op that failed and its errno, or -1.
//
//go:nosplit
//go:norace
func (p *program) run() (int, uintptr) {
	n := len(p.ops)
	for i := 0; i < n; i++ {
		o := &p.ops[i]
		switch o.kind {
		case opEnd:
			if o.args[0] != endMark || i != n-1 {
				return i, uintptr(unix.EINVAL)
			}
			return -1, 0
		case opJump:
			i += int(o.skip)
			continue
		case opExpect:
			if p.slots[o.in[0]] != o.args[0] {
				return i, uintptr(unix.EPIPE)
			}
			continue
		case opType:
			_, _, e := syscall.RawSyscall(unix.SYS_FSTAT, p.slots[o.in[0]], uintptr(unsafe.Pointer(&p.stat)), 0)
			if e != 0 {
				return i, uintptr(e)
			}
			if uintptr(p.stat.Mode&unix.S_IFMT) != o.args[0] {
				if o.skip == 0 {
					return i, errTypeChanged
				}
				i += int(o.skip)
			}
			continue
		case opCall:
		default:
			return i, uintptr(unix.EINVAL)
		}
		a := o.args
		for j := 0; j < 6; j++ {
			if k := o.in[j]; k != 0 {
				a[j] = p.slots[k]
			}
		}
		if o.patch != nil {
			*o.patch = int32(p.slots[o.patchFrom])
		}
		r, e := sys6(o.nr, a[0], a[1], a[2], a[3], a[4], a[5])
		if e != 0 {
			if e < 64 && o.okErrs&(1<<uint(e)) != 0 {
				i += int(o.skip)
				continue
			}
			return i, uintptr(e)
		}
		if o.out != 0 {
			p.slots[o.out] = r
		}
	}
	return n, uintptr(unix.EINVAL) // no end op: not a whole program
}

// exec runs the program in this process and describes a failure.
func (p *program) exec() error {
	i, errno := p.run()
	return p.failure(i, errno)
}

// failure describes what run returned: nil, or which step failed and why.
func (p *program) failure(i int, errno uintptr) error {
	if i < 0 {
		return nil
	}
	if i >= len(p.ops) || i >= len(p.what) {
		return fmt.Errorf("the program of system calls ran past its end: %w", syscall.Errno(errno))
	}
	if errno == errTypeChanged && p.ops[i].kind == opType {
		return fmt.Errorf("%s: the path changed type while the sandbox was built", p.what[i])
	}
	return fmt.Errorf("%s: %w", p.what[i], syscall.Errno(errno))
}

// builder appends ops to a program.
type builder struct {
	p        *program
	nextSlot int
	free     []uint8 // slots whose descriptor was closed
	overflow bool
	err      error // a string the kernel would read short: build fails
	// strictProtect: every protected path must be there (see protect).
	strictProtect bool
	// procAhead, when set, is the walk of /proc the root's build takes
	// its hidden entries from (see ProcWalk.result).
	procAhead *ProcWalk
}

func newBuilder() *builder {
	// A one-shot run's program has about 300 ops: sized once, not grown
	// by doubling (each op is about 100 bytes).
	const ops = 512
	return &builder{p: &program{ops: make([]op, 0, ops), what: make([]string, 0, ops)}, nextSlot: 1}
}

// slot reserves a result slot: a free one, or a new one.
func (b *builder) slot() uint8 {
	if n := len(b.free); n > 0 {
		s := b.free[n-1]
		b.free = b.free[:n-1]
		return s
	}
	return b.newSlot()
}

// preset reserves a slot that holds v when the program starts: a slot no
// earlier op writes to.
func (b *builder) preset(v uintptr) uint8 {
	s := b.newSlot()
	b.p.slots[s] = v
	return s
}

// newSlot reserves a slot never used before.
func (b *builder) newSlot() uint8 {
	if b.nextSlot >= slotCount {
		b.overflow = true // build fails
		return slotCount - 1
	}
	s := uint8(b.nextSlot)
	b.nextSlot++
	return s
}

// close appends closing the descriptor in slot s, which is free after.
func (b *builder) close(s uint8) {
	b.call("closing a descriptor", unix.SYS_CLOSE, 0).in[0] = s
	b.free = append(b.free, s)
}

// add appends an op and returns it for refinement.
func (b *builder) add(what string, o op) *op {
	b.p.ops = append(b.p.ops, o)
	b.p.what = append(b.p.what, what)
	return &b.p.ops[len(b.p.ops)-1]
}

// call appends a system call.
func (b *builder) call(what string, nr uintptr, args ...uintptr) *op {
	var o op
	o.kind, o.nr = opCall, nr
	copy(o.args[:], args)
	return b.add(what, o)
}

// isType appends failing unless the descriptor in slot fd is of file type
// kind (S_IFDIR...): it changed since the program was made.
func (b *builder) isType(what string, fd uint8, kind uint32) {
	b.add(what, op{kind: opType, in: [6]uint8{fd}, args: [6]uintptr{uintptr(kind)}})
}

// ifDir appends the ops dir appends, run when the descriptor in slot fd
// is a directory, and those other appends, run when it is not.
func (b *builder) ifDir(what string, fd uint8, dir, other func()) {
	test := b.mark()
	b.isType(what, fd, unix.S_IFDIR)
	dir()
	jump := b.mark()
	b.add(what, op{kind: opJump})
	b.skipTo(test) // a mismatch skips to other
	other()
	b.skipTo(jump)
}

// expect appends failing unless slot s holds v.
func (b *builder) expect(what string, s uint8, v uintptr) {
	b.add(what, op{kind: opExpect, in: [6]uint8{s}, args: [6]uintptr{v}})
}

// str keeps a NUL-terminated copy of s and returns its address. A NUL
// inside s (which the kernel would read as its end) fails the build.
func (b *builder) str(s string) uintptr {
	if strings.IndexByte(s, 0) >= 0 && b.err == nil {
		b.err = fmt.Errorf("%q contains a NUL byte", s)
	}
	buf := append([]byte(s), 0)
	b.p.keep = append(b.p.keep, buf)
	return uintptr(unsafe.Pointer(&buf[0]))
}

// ptr keeps v (a pointer to memory holding no Go pointers the kernel
// must not see moved) and returns its address.
func ptr[T any](b *builder, v *T) uintptr {
	b.p.keep = append(b.p.keep, v)
	return uintptr(unsafe.Pointer(v))
}

// mark returns the index the next op will have: with skipTo, a forward
// skip over the ops added in between.
func (b *builder) mark() int { return len(b.p.ops) }

// skipTo sets o (the op at index from) to skip to the current end.
func (b *builder) skipTo(from int, okErrs ...syscall.Errno) {
	o := &b.p.ops[from]
	o.skip = uint16(len(b.p.ops) - from - 1)
	for _, e := range okErrs {
		o.okErrs |= 1 << uint(e)
	}
}

// build returns the program, or an error when it outgrew its slots.
func (b *builder) build() (*program, error) {
	if b.err != nil {
		return nil, b.err
	}
	if b.overflow {
		return nil, fmt.Errorf("the sandbox needs more than %d descriptors to build: use fewer policy paths", slotCount-1)
	}
	if len(b.p.ops) > 1<<15 {
		return nil, fmt.Errorf("the sandbox takes too many steps to build: use fewer policy paths")
	}
	if n := len(b.p.ops); n == 0 || b.p.ops[n-1].kind != opEnd {
		b.add("the program's end", op{kind: opEnd, args: [6]uintptr{endMark}})
	}
	return b.p, nil
}

// cwd is AT_FDCWD as a system call argument.
const cwd = ^uintptr(99) // -100 in two's complement
