package tierkit

import (
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/sandbox"
)

// TailBuffer is an io.Writer that keeps only the last Max bytes written to it
// while counting them all. Its memory never exceeds Max bytes however much
// is written. The zero value keeps sandbox.DefaultMaxOutput bytes. It is not safe
// for concurrent use.
type TailBuffer struct {
	Max   int
	buf   []byte // grows up to Max, then used as a ring
	start int    // index of the oldest byte once the ring is full
	total int64
}

// Write keeps the tail of p; it never fails.
func (b *TailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	b.total += int64(n)
	limit := b.limit()
	if n >= limit {
		b.buf = append(b.buf[:0], p[n-limit:]...)
		b.start = 0
		return n, nil
	}
	if room := limit - len(b.buf); room > 0 {
		k := min(room, len(p))
		b.buf = append(b.buf, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // ring is full: overwrite the oldest bytes
		k := copy(b.buf[b.start:], p)
		p = p[k:]
		b.start = (b.start + k) % len(b.buf)
	}
	return n, nil
}

func (b *TailBuffer) limit() int {
	if b.Max <= 0 {
		return sandbox.DefaultMaxOutput
	}
	return b.Max
}

// Total is the number of bytes ever written.
func (b *TailBuffer) Total() int64 { return b.total }

// Truncated reports whether bytes were dropped.
func (b *TailBuffer) Truncated() bool { return b.total > int64(len(b.buf)) }

// Bytes returns the kept tail, oldest byte first. When bytes were dropped,
// a partial UTF-8 sequence at the start is dropped too, so text output does
// not begin with a broken character.
func (b *TailBuffer) Bytes() []byte {
	out := make([]byte, 0, len(b.buf))
	out = append(out, b.buf[b.start:]...)
	out = append(out, b.buf[:b.start]...)
	if b.Truncated() {
		for i := 0; i < utf8.UTFMax-1 && len(out) > 0 && !utf8.RuneStart(out[0]); i++ {
			out = out[1:]
		}
	}
	return out
}
