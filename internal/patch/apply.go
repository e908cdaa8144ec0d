package patch

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"strings"

	"github.com/hutchsandbox/hutch/sandbox"
)

// Apply returns the content f's hunks make of old, the file's content
// before the patch (nil or empty for Add). Each hunk applies where its
// header says, moved by the offset the hunk before it applied at; when
// its old lines (context and removed) are not there exactly, at the
// nearest line where they are, after the hunk before it. Two places
// equally near, or none, fail: nothing is ever applied by similarity.
// The result is checked against sandbox.MaxFileSize before it is built.
// A Delete must leave nothing. Errors are *Error.
func Apply(f *File, old []byte) ([]byte, error) {
	if f.Op == Add && len(old) > 0 {
		return nil, &Error{Line: f.Line, Path: f.Path(), Msg: "the patch adds the file, but it exists: patch it as a change (--- a/path), or delete it first"}
	}
	size := int64(len(old))
	hunks := make([]hunkText, len(f.Hunks))
	patchBytes := 0
	for i := range f.Hunks {
		hunks[i] = sides(&f.Hunks[i])
		size += int64(len(hunks[i].new)) - int64(len(hunks[i].old))
		patchBytes += len(hunks[i].old)
	}
	if size > sandbox.MaxFileSize {
		return nil, &Error{Line: f.Line, Path: f.Path(), Msg: fmt.Sprintf("the patched file would be %d bytes, over the %d byte limit", size, sandbox.MaxFileSize)}
	}
	s := &searcher{
		text: old,
		seed: maphash.MakeSeed(),
		// Hunks near where they say cost a few lines' bytes each; this
		// bounds, in bytes looked at, patches whose line numbers send
		// every hunk across the file.
		budget: 16*(len(old)+patchBytes) + 1<<24,
	}
	out := make([]byte, 0, size)
	pos, line := 0, 0 // where the previous hunk ended, in bytes and lines
	offset := 0       // how far from its header the previous hunk applied
	for i := range f.Hunks {
		h := &f.Hunks[i]
		ht := hunks[i]
		fail := func(format string, args ...any) ([]byte, error) {
			return nil, &Error{Line: h.Line, Path: f.Path(), Hunk: i + 1, Msg: fmt.Sprintf(format, args...)}
		}
		want := h.OldStart - 1 // the 0-based line its old lines start at
		if h.OldCount == 0 {
			want = h.OldStart // the line it inserts before
		}
		want = max(want+offset, line)
		start, startLine, err := s.find(pos, line, want, ht)
		if err != "" {
			return fail("%s", err)
		}
		end := start + len(ht.old)
		if ht.newNoEOL && end != len(old) {
			return fail("does not apply: its last line has no line break, but it applies at line %d, before the end of the file", startLine+1)
		}
		out = append(out, old[pos:start]...)
		out = append(out, ht.new...)
		pos, line = end, startLine+ht.oldLines
		offset = startLine - (h.OldStart - 1)
		if h.OldCount == 0 {
			offset = startLine - h.OldStart
		}
	}
	out = append(out, old[pos:]...)
	if f.Op == Delete && len(out) > 0 {
		return nil, &Error{Line: f.Line, Path: f.Path(), Msg: fmt.Sprintf("the patch deletes the file, but %d bytes of it are not in the patch (it changed since the diff was made)", len(out))}
	}
	return out, nil
}

// hunkText is a hunk's old and new side as the bytes they are.
type hunkText struct {
	old, new []byte
	oldLines int
	newNoEOL bool
}

func sides(h *Hunk) hunkText {
	var t hunkText
	var old, nw bytes.Buffer
	for _, l := range h.Lines {
		if l.Kind != '+' {
			old.WriteString(l.Text)
			if !l.NoEOL {
				old.WriteByte('\n')
			}
			t.oldLines++
		}
		if l.Kind != '-' {
			nw.WriteString(l.Text)
			if !l.NoEOL {
				nw.WriteByte('\n')
			}
			t.newNoEOL = l.NoEOL
		}
	}
	t.old, t.new = old.Bytes(), nw.Bytes()
	return t
}

// searcher finds where a hunk's old side is in text: a rolling hash of
// its lines over windows of as many lines, moving out from the line the
// hunk names, one line each way at a time; a window whose hash matches is
// compared byte for byte. It holds no index of the text's lines, so a
// file of many short lines costs no more memory than its bytes.
type searcher struct {
	text   []byte
	seed   maphash.Seed
	budget int // steps left
}

// base of the rolling hash (odd, so it has an inverse mod 2^64).
const base uint64 = 0x100000001b3

// inverse is base's multiplicative inverse mod 2^64.
var inverse = func() uint64 {
	x := base // Newton's iteration: each step doubles the correct bits
	for range 6 {
		x *= 2 - base*x
	}
	return x
}()

// next is the start of the line after the one starting at off.
func (s *searcher) next(off int) int {
	if i := bytes.IndexByte(s.text[off:], '\n'); i >= 0 {
		return off + i + 1
	}
	return len(s.text)
}

// prev is the start of the line that ends at off (off > 0).
func (s *searcher) prev(off int) int {
	return bytes.LastIndexByte(s.text[:off-1], '\n') + 1
}

func (s *searcher) lineHash(b []byte) uint64 {
	s.budget -= len(b) + 1
	return maphash.Bytes(s.seed, b)
}

// window is m lines of text: [start, end), from line startLine.
type window struct {
	start, end, startLine int
	hash                  uint64
}

// find returns where ht's old side is at or after byte lo (line loLine),
// nearest line want; or why not.
func (s *searcher) find(lo, loLine, want int, ht hunkText) (int, int, string) {
	m := ht.oldLines
	// Walk to the line it names, or to the end.
	p, pLine := lo, loLine
	for pLine < want && p < len(s.text) {
		n := s.next(p)
		s.budget -= n - p
		p = n
		pLine++
	}
	if s.budget < 0 {
		return 0, 0, s.gaveUp(want)
	}
	if m == 0 {
		if pLine < want {
			return 0, 0, fmt.Sprintf("does not apply: it inserts after line %d, but the file has %d lines", want, pLine)
		}
		return p, pLine, ""
	}
	// The window of m lines at p, moved up until it fits before the end.
	w := window{start: p, end: p, startLine: pLine}
	for range m {
		switch {
		case w.end < len(s.text):
			w.end = s.next(w.end)
		case w.start > lo:
			w.start = s.prev(w.start)
			w.startLine--
		default:
			return 0, 0, s.notFound(ht, want)
		}
		s.budget--
	}
	var pow uint64 = 1 // base^(m-1)
	for range m - 1 {
		pow *= base
	}
	for off := w.start; off < w.end; off = s.next(off) {
		w.hash = w.hash*base + s.lineHash(s.text[off:s.next(off)])
	}
	var want64 uint64
	for l := range strings.Lines(string(ht.old)) {
		want64 = want64*base + s.lineHash([]byte(l))
	}
	matches := func(w window) bool {
		return w.hash == want64 && bytes.Equal(s.text[w.start:w.end], ht.old)
	}
	if matches(w) {
		return w.start, w.startLine, ""
	}
	down, up := w, w
	downOK, upOK := w.end < len(s.text), w.start > lo
	if downOK {
		down = s.down(w, pow)
	}
	if upOK {
		up = s.up(w, pow)
	}
	for downOK || upOK {
		if s.budget < 0 {
			return 0, 0, s.gaveUp(want)
		}
		d, u := downOK && matches(down), upOK && matches(up)
		switch {
		case d && u:
			return 0, 0, fmt.Sprintf("does not apply at line %d, and its lines match at lines %d and %d, equally near: add context lines to tell which", want+1, up.startLine+1, down.startLine+1)
		case d:
			return down.start, down.startLine, ""
		case u:
			return up.start, up.startLine, ""
		}
		if downOK {
			if downOK = down.end < len(s.text); downOK {
				down = s.down(down, pow)
			}
		}
		if upOK {
			if upOK = up.start > lo; upOK {
				up = s.up(up, pow)
			}
		}
	}
	return 0, 0, s.notFound(ht, want)
}

// down moves w one line down (w.end < len(text)).
func (s *searcher) down(w window, pow uint64) window {
	first := s.lineHash(s.text[w.start:s.next(w.start)])
	ne := s.next(w.end)
	w.hash = (w.hash-first*pow)*base + s.lineHash(s.text[w.end:ne])
	w.start, w.end = s.next(w.start), ne
	w.startLine++
	s.budget--
	return w
}

// up moves w one line up (w.start > 0).
func (s *searcher) up(w window, pow uint64) window {
	last := s.prev(w.end)
	ns := s.prev(w.start)
	w.hash = (w.hash-s.lineHash(s.text[last:w.end]))*inverse + s.lineHash(s.text[ns:w.start])*pow
	w.start, w.end = ns, last
	w.startLine--
	s.budget--
	return w
}

// gaveUp says the search ran out of budget.
func (s *searcher) gaveUp(want int) string {
	return fmt.Sprintf("does not apply: gave up searching the file for its lines (the patch's line numbers are far off, near line %d): give line numbers close to where it applies", want+1)
}

// notFound says a hunk's old lines are nowhere, with the first of them.
func (s *searcher) notFound(ht hunkText, want int) string {
	excerpt := string(ht.old)
	lines := strings.SplitAfter(excerpt, "\n")
	if len(lines) > 3 {
		excerpt = strings.Join(lines[:3], "") + "..."
	}
	return fmt.Sprintf("does not apply: its %d old lines (context and removed) are not at line %d nor anywhere after the hunk before it; expected %s: read the file again and make the patch against what it holds",
		ht.oldLines, want+1, quoteCut(excerpt, 160))
}

// quoteCut is s quoted, cut to about n bytes.
func quoteCut(s string, n int) string {
	if len(s) > n {
		return fmt.Sprintf("%q...", s[:n])
	}
	return fmt.Sprintf("%q", s)
}
