package prefault

import "unsafe"

const (
	madvPopulateRead  = 22 // MADV_POPULATE_READ, Linux 5.14
	madvPopulateWrite = 23 // MADV_POPULATE_WRITE, Linux 5.14

	// heapPrefix is how much of the heap is populated, from the frontier
	// on. 2 MiB covers what hutch version and an MCP session's start
	// allocate; 4 and 8 MiB measured no faster and cost more memory.
	heapPrefix = 2 << 20
	// maxText bounds the text populated (hutch's is ~5 MiB).
	maxText = 64 << 20
	// mapsSize is the buffer /proc/self/maps is read into: a static Go
	// program has a few dozen mappings, ~3 KiB. It is also the probe for
	// the heap's frontier: an object of this size class fills a span of
	// its own, so it lands on fresh pages above what is in use.
	mapsSize = 16 << 10
)

func init() {
	defer func() { _ = recover() }() // belt and braces: never fail a start
	if disabled() {
		return
	}
	populate()
}

// disabled reports whether HUTCH_NO_PREFAULT turns prefaulting off.
func disabled() bool {
	v, _ := getenv("HUTCH_NO_PREFAULT")
	return v != "" && v != "0"
}

// span is the address range [lo, hi).
type span struct{ lo, hi uintptr }

// report is what populate asked of the kernel and what it answered (for
// tests): a zero span was not found.
type report struct {
	heap, text       span
	heapErr, textErr errno
}

// mapsBuf makes populate's buffer escape, so that it is allocated on the
// heap, at the frontier, rather than on the stack.
var mapsBuf []byte

func populate() (r report) {
	mapsBuf = make([]byte, mapsSize)
	buf := mapsBuf
	mapsBuf = nil
	probe := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	n := sysReadFile("/proc/self/maps", buf)
	heap, text := find(buf[:n], probe, funcPC(populate))

	if heap.hi != 0 {
		lo := probe &^ (pageSize() - 1)
		r.heap = span{lo, min(heap.hi, lo+heapPrefix)}
		r.heapErr = madvise(r.heap, madvPopulateWrite)
	}
	if text.hi != 0 {
		r.text = span{text.lo, min(text.hi, text.lo+maxText)}
		r.textErr = madvise(r.text, madvPopulateRead)
	}
	return r
}

func madvise(s span, advice uintptr) errno {
	return sysMadvise(s.lo, s.hi-s.lo, advice)
}

// funcPC is the entry address of f: a func value points to a closure
// record whose first word is the code's address.
func funcPC(f func() report) uintptr {
	return **(**uintptr)(unsafe.Pointer(&f))
}

// find returns, from the text of /proc/self/maps, the writable mapping
// holding probe and the executable one holding pc; a zero span when there
// is none. A line reads "lo-hi perms offset dev inode [path]" with the
// addresses in hex. A line cut short by the end of maps is ignored.
func find(maps []byte, probe, pc uintptr) (heap, text span) {
	for {
		i := indexByte(maps, '\n')
		if i < 0 {
			return heap, text
		}
		line := maps[:i]
		maps = maps[i+1:]

		var s span
		var ok bool
		if s.lo, line, ok = hex(line); !ok || len(line) == 0 || line[0] != '-' {
			continue
		}
		if s.hi, line, ok = hex(line[1:]); !ok || len(line) < 5 || line[0] != ' ' || s.hi <= s.lo {
			continue
		}
		perms := line[1:5]
		switch {
		case s.lo <= probe && probe < s.hi && perms[0] == 'r' && perms[1] == 'w':
			heap = s
		case s.lo <= pc && pc < s.hi && perms[0] == 'r' && perms[2] == 'x':
			text = s
		}
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// hex parses the hexadecimal number b starts with (at most 16 digits).
func hex(b []byte) (n uintptr, rest []byte, ok bool) {
	i := 0
	for ; i < len(b) && i < 16; i++ {
		c := b[i]
		switch {
		case '0' <= c && c <= '9':
			n = n<<4 | uintptr(c-'0')
		case 'a' <= c && c <= 'f':
			n = n<<4 | uintptr(c-'a'+10)
		default:
			return n, b[i:], i > 0
		}
	}
	return n, b[i:], i > 0
}
