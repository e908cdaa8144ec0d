// Package textdiff computes the line-based difference between two texts
// and renders it as a unified diff, the format of "git diff" and "diff -u".
//
// It is bounded: whatever the inputs (up to sandbox.MaxFileSize each),
// the work is linear in their size plus a fixed budget, the memory beyond
// the inputs and the output is at most a few tens of MiB, and the output
// is cut at a byte limit the caller gives. Where the bound on work is
// reached the diff stays correct (applying it to the old text gives the
// new one) but is no longer minimal: the differing middle is shown as one
// block replaced by another.
package textdiff

import (
	"strings"
)

// Context is how many unchanged lines a hunk shows around each change.
const Context = 3

// MinMaxBytes is the smallest output limit Unified honours: a smaller
// Options.MaxBytes (other than 0, no limit) is raised to it, so the
// header lines and the marker of a cut always fit.
const MinMaxBytes = 512

// MaxLines bounds the lines (of both texts together) compared one by one,
// after the common first and last lines are set aside; past it the
// differing middle is shown as one replaced block.
const MaxLines = 1 << 20

// MaxDistance bounds the edit distance (lines deleted plus lines
// inserted) searched for a minimal diff; past it the differing middle is
// shown as one replaced block. Searching costs (MaxDistance+1)² four-byte
// words at most.
const MaxDistance = 1024

// maxWork bounds the steps of the search for a minimal diff (each step
// compares two lines or moves to the next diagonal).
const maxWork = 1 << 24

// Options configure Unified.
type Options struct {
	// OldName and NewName are the names on the "---" and "+++" header
	// lines, as given ("a/x.go", "/dev/null"); empty means "a" and "b".
	// A name holding a control character, '"' or '\' is written quoted,
	// as git does, so a name never adds a line of its own.
	OldName, NewName string
	// MaxBytes is the most bytes Result.Text holds, the marker of a cut
	// included; 0 means no limit, and a limit under MinMaxBytes is
	// raised to it.
	MaxBytes int
}

// Result is a unified diff.
type Result struct {
	// Text is the diff: the two header lines and the hunks, each line
	// ending in "\n"; empty when the texts are equal. It is always well
	// formed: each hunk's header counts exactly the lines shown under
	// it, and a line without a final newline is followed by
	// "\ No newline at end of file".
	Text string
	// Added and Deleted count the lines the whole diff inserts and
	// removes, including any left out of Text by a cut.
	Added, Deleted int
	// Cut reports that Text was cut at Options.MaxBytes: it then ends in
	// a line "... diff cut at N bytes; M more lines changed", after whole
	// lines only, and the hunk cut short counts only the lines shown.
	Cut bool
	// Coarse reports that the bound on work was reached (see MaxLines
	// and MaxDistance): the diff is correct but not minimal.
	Coarse bool
}

// Unified returns the unified diff from a to b, with Context lines of
// context. Lines end at "\n"; a "\r" before it is part of the line, so
// CRLF texts diff line by line too and a change of line ending shows as a
// changed line.
func Unified(a, b string, o Options) Result {
	return unified(a, b, o, bounds{MaxLines, MaxDistance, maxWork})
}

// bounds are the limits on work of one diff: tests lower them to reach
// the coarse diff with small inputs.
type bounds struct{ lines, distance, work int }

func unified(a, b string, o Options, lim bounds) Result {
	if a == b {
		return Result{}
	}
	ops, base, coarse := diffOps(a, b, lim)
	res := Result{Coarse: coarse}
	for _, op := range ops {
		switch op.kind {
		case '-':
			res.Deleted += op.lines
		case '+':
			res.Added += op.lines
		}
	}
	res.Text, res.Cut = render(hunks(ops, base), o, res.Added+res.Deleted)
	return res
}

// An op is a run of whole lines, a substring of a (' ' unchanged, '-'
// deleted) or of b ('+' inserted).
type op struct {
	kind  byte
	text  string
	lines int
}

// countLines counts the lines of s: its newlines, and one more for a last
// line without one.
func countLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && s[len(s)-1] != '\n' {
		n++
	}
	return n
}

// diffOps returns the diff of a and b (which differ) as ops in order:
// unchanged, deleted and inserted runs, never two of one kind in a row, a
// deleted run before the inserted run it shares a place with. Only the
// middle, after the common first and last lines, is compared line by
// line, with Context of those lines on either side kept in it so that
// the ops hold the context the hunks need. The int is the number of
// (common) lines before the first op.
func diffOps(a, b string, lim bounds) ([]op, int, bool) {
	// The common prefix, in whole lines.
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	pre := strings.LastIndexByte(a[:i], '\n') + 1
	// The common suffix, in whole lines of both, not overlapping the
	// prefix.
	ra, rb := a[pre:], b[pre:]
	j := 0
	for j < len(ra) && j < len(rb) && ra[len(ra)-1-j] == rb[len(rb)-1-j] {
		j++
	}
	suf := ra[len(ra)-j:]
	if startsLine(ra, len(ra)-j) && startsLine(rb, len(rb)-j) {
		// suf starts a line in both.
	} else if k := strings.IndexByte(suf, '\n'); k >= 0 {
		suf = suf[k+1:]
	} else {
		suf = ""
	}
	// Keep Context lines of each in the middle.
	start := pre
	for n := 0; n < Context && start > 0; n++ {
		start = strings.LastIndexByte(a[:start-1], '\n') + 1
	}
	keep := 0
	for n := 0; n < Context && keep < len(suf); n++ {
		if k := strings.IndexByte(suf[keep:], '\n'); k >= 0 {
			keep += k + 1
		} else {
			keep = len(suf)
		}
	}
	cut := len(suf) - keep
	base := strings.Count(a[:start], "\n")
	ma, mb := a[start:len(a)-cut], b[start:len(b)-cut]
	if countLines(ma)+countLines(mb) <= lim.lines {
		if ops, ok := myers(ma, mb, lim); ok {
			return ops, base, false
		}
	}
	// Coarse: the context, the whole middle of a deleted, the whole
	// middle of b inserted, the context.
	var ops []op
	add := func(kind byte, s string) {
		if s != "" {
			ops = append(ops, op{kind, s, countLines(s)})
		}
	}
	add(' ', a[start:pre])
	add('-', ma[pre-start:len(ma)-keep])
	add('+', mb[pre-start:len(mb)-keep])
	add(' ', suf[:keep])
	return ops, base, true
}

// startsLine reports whether position i of s starts a line: it is 0 or
// follows a newline.
func startsLine(s string, i int) bool { return i == 0 || s[i-1] == '\n' }

// splitLines returns the start offset of each line of s, and len(s) last.
func splitLines(s string) []int32 {
	offs := make([]int32, 0, countLines(s)+1)
	for i := 0; i < len(s); {
		offs = append(offs, int32(i))
		k := strings.IndexByte(s[i:], '\n')
		if k < 0 {
			break
		}
		i += k + 1
	}
	return append(offs, int32(len(s)))
}

// myers is the minimal diff of a and b by Myers' O(ND) algorithm, or
// false once the distance passes lim.distance or the work lim.work.
func myers(a, b string, lim bounds) ([]op, bool) {
	oa, ob := splitLines(a), splitLines(b)
	n, m := len(oa)-1, len(ob)-1
	// Lines become numbers, equal lines the same number.
	ids := make(map[string]int32, n+m)
	number := func(s string, offs []int32) []int32 {
		out := make([]int32, len(offs)-1)
		for i := range out {
			line := s[offs[i]:offs[i+1]]
			id, ok := ids[line]
			if !ok {
				id = int32(len(ids))
				ids[line] = id
			}
			out[i] = id
		}
		return out
	}
	x, y := number(a, oa), number(b, ob)
	ids = nil

	maxD := min(n+m, lim.distance)
	// v[off+k] is the furthest x reached on diagonal k (x-y = k); trace
	// holds v[-d..d] after each step d, step d at d².
	off := maxD + 1
	v := make([]int32, 2*maxD+3)
	var trace []int32
	work := 0
	for d := 0; d <= maxD; d++ {
		for k := -d; k <= d; k += 2 {
			var px int32
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				px = v[off+k+1]
			} else {
				px = v[off+k-1] + 1
			}
			py := px - int32(k)
			for int(px) < n && int(py) < m && x[px] == y[py] {
				px++
				py++
				work++
			}
			v[off+k] = px
			if int(px) >= n && int(py) >= m {
				trace = append(trace, v[off-d:off+d+1]...)
				return backtrack(trace, d, n, m, a, b, oa, ob), true
			}
		}
		trace = append(trace, v[off-d:off+d+1]...)
		if work += d + 1; work > lim.work {
			return nil, false
		}
	}
	return nil, false
}

// backtrack walks the trace of myers back from (n, m) to (0, 0) and
// returns the ops of the path.
func backtrack(trace []int32, d, n, m int, a, b string, oa, ob []int32) []op {
	// The diagonal runs (snakes), last first: x, y and length.
	type snake struct{ x, y, n int }
	var snakes []snake
	x, y := n, m
	for ; d > 0; d-- {
		prev := trace[(d-1)*(d-1) : d*d] // v[-(d-1)..d-1]
		at := func(k int) int { return int(prev[k+d-1]) }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1 // came down: inserted b[py]
		} else {
			pk = k - 1 // came right: deleted a[px]
		}
		px := at(pk)
		py := px - pk
		mx, my := px, py+1
		if pk == k-1 {
			mx, my = px+1, py
		}
		snakes = append(snakes, snake{mx, my, x - mx})
		x, y = px, py
	}
	snakes = append(snakes, snake{0, 0, x})

	// Between two snakes of some length lie the lines deleted and
	// inserted there; a snake of length 0 splits nothing.
	var ops []op
	add := func(kind byte, s string, offs []int32, from, to int) {
		if to > from {
			ops = append(ops, op{kind, s[offs[from]:offs[to]], to - from})
		}
	}
	ca, cb := 0, 0
	for i := len(snakes) - 1; i >= 0; i-- {
		s := snakes[i]
		if s.n == 0 {
			continue
		}
		add('-', a, oa, ca, s.x)
		add('+', b, ob, cb, s.y)
		add(' ', a, oa, s.x, s.x+s.n)
		ca, cb = s.x+s.n, s.y+s.n
	}
	add('-', a, oa, ca, n)
	add('+', b, ob, cb, m)
	return ops
}
