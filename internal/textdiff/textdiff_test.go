package textdiff

import (
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// A parsed unified diff.
type patch struct {
	oldName, newName string
	hunks            []parsedHunk
	cut              string // the marker line, when cut
}

type parsedHunk struct {
	a, b  int // lines before the hunk, in a and in b
	lines []pline
}

// A pline is one line of a hunk: its kind (' ', '-', '+') and its text
// with its newline, if it has one.
type pline struct {
	kind byte
	text string
}

var hunkRE = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$`)
var markerRE = regexp.MustCompile(`^\.\.\. diff cut at \d+ bytes; \d+ more lines changed$`)

// parse reads a diff Unified wrote, checking its structure: the header
// lines, hunks in order whose headers count exactly their lines, each
// hunk holding a change, the no-newline marker only after the last line
// of a side, and the cut marker only last.
func parse(text string) (patch, error) {
	var p patch
	if text == "" {
		return p, nil
	}
	if !strings.HasSuffix(text, "\n") {
		return p, fmt.Errorf("the diff does not end in a newline")
	}
	rows := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(rows) < 3 || !strings.HasPrefix(rows[0], "--- ") || !strings.HasPrefix(rows[1], "+++ ") {
		return p, fmt.Errorf("no header lines: %q", rows[:min(len(rows), 2)])
	}
	p.oldName, p.newName = rows[0][4:], rows[1][4:]
	rows = rows[2:]
	endA, endB := 0, 0             // lines of a and b covered so far
	aEnded, bEnded := false, false // a side's last line (without newline) was seen
	for len(rows) > 0 {
		r := rows[0]
		if markerRE.MatchString(r) {
			if len(rows) != 1 {
				return p, fmt.Errorf("the cut marker is not last")
			}
			p.cut = r
			break
		}
		m := hunkRE.FindStringSubmatch(r)
		if m == nil {
			return p, fmt.Errorf("want a hunk header, got %q", r)
		}
		num := func(s string, def int) int {
			if s == "" {
				return def
			}
			n, _ := strconv.Atoi(s)
			return n
		}
		na, nb := num(m[2], 1), num(m[4], 1)
		h := parsedHunk{a: num(m[1], 0), b: num(m[3], 0)}
		if na > 0 {
			h.a--
		}
		if nb > 0 {
			h.b--
		}
		if h.a < endA || h.b < endB || h.a-endA != h.b-endB {
			return p, fmt.Errorf("hunk %q overlaps or does not follow the previous one (at %d,%d)", r, endA, endB)
		}
		if endA > 0 && h.a-endA <= 0 {
			return p, fmt.Errorf("hunk %q touches the previous one: they should be one", r)
		}
		rows = rows[1:]
		ca, cb, changed := 0, 0, false
		for ca < na || cb < nb {
			if len(rows) == 0 || rows[0] == "" {
				return p, fmt.Errorf("hunk %q: lines missing", r)
			}
			l := pline{rows[0][0], rows[0][1:] + "\n"}
			rows = rows[1:]
			if len(rows) > 0 && rows[0] == strings.TrimSuffix(noNewline, "\n") {
				l.text = strings.TrimSuffix(l.text, "\n")
				rows = rows[1:]
			}
			ends := !strings.HasSuffix(l.text, "\n")
			switch l.kind {
			case ' ':
				ca++
				cb++
				if aEnded || bEnded {
					return p, fmt.Errorf("a line after the last line")
				}
				aEnded, bEnded = ends, ends
			case '-':
				ca++
				changed = true
				if aEnded {
					return p, fmt.Errorf("a line after a's last line")
				}
				aEnded = ends
			case '+':
				cb++
				changed = true
				if bEnded {
					return p, fmt.Errorf("a line after b's last line")
				}
				bEnded = ends
			default:
				return p, fmt.Errorf("hunk %q: a line starting with %q", r, l.kind)
			}
			h.lines = append(h.lines, l)
		}
		if ca != na || cb != nb {
			return p, fmt.Errorf("hunk %q holds %d,%d lines", r, ca, cb)
		}
		if !changed {
			return p, fmt.Errorf("hunk %q changes nothing", r)
		}
		endA, endB = h.a+na, h.b+nb
		p.hunks = append(p.hunks, h)
	}
	if len(p.hunks) == 0 && p.cut == "" {
		// Only a cut may leave no hunk: the first changed line alone
		// was over the limit.
		return p, fmt.Errorf("a diff without hunks")
	}
	return p, nil
}

// lines splits s into lines, each with its newline.
func lines(s string) []string {
	l := strings.SplitAfter(s, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

// apply applies p to a, checking every context and deleted line.
func apply(a string, p patch) (string, error) {
	src := lines(a)
	var out strings.Builder
	at := 0
	for _, h := range p.hunks {
		if h.a > len(src) {
			return "", fmt.Errorf("hunk at line %d past the end (%d lines)", h.a, len(src))
		}
		for ; at < h.a; at++ {
			out.WriteString(src[at])
		}
		for _, l := range h.lines {
			switch l.kind {
			case ' ', '-':
				if at >= len(src) || src[at] != l.text {
					return "", fmt.Errorf("line %d: want %q to %s", at+1, l.text, map[byte]string{' ': "keep", '-': "delete"}[l.kind])
				}
				if l.kind == ' ' {
					out.WriteString(l.text)
				}
				at++
			case '+':
				out.WriteString(l.text)
			}
		}
	}
	for ; at < len(src); at++ {
		out.WriteString(src[at])
	}
	return out.String(), nil
}

// check runs the guarantees every diff holds: it parses, it applies when
// not cut, it counts its lines, it keeps to its limit.
func check(t *testing.T, a, b string, o Options, lim bounds) Result {
	t.Helper()
	r := unified(a, b, o, lim)
	p, err := parse(r.Text)
	if err != nil {
		t.Fatalf("the diff does not parse: %v\n%s", err, r.Text)
	}
	if (a == b) != (r.Text == "") {
		t.Fatalf("equal %v, diff %q", a == b, r.Text)
	}
	if r.Cut != (p.cut != "") {
		t.Fatalf("Cut %v, marker %q", r.Cut, p.cut)
	}
	if limit := max(o.MaxBytes, MinMaxBytes); o.MaxBytes > 0 && len(r.Text) > limit { // the names are short
		t.Fatalf("a diff of %d bytes, over the limit %d", len(r.Text), limit)
	}
	if r.Cut {
		return r
	}
	got, err := apply(a, p)
	if err != nil {
		t.Fatalf("the diff does not apply: %v\n%s", err, r.Text)
	}
	if got != b {
		t.Fatalf("applying the diff gives %q, want %q\n%s", got, b, r.Text)
	}
	added, deleted := 0, 0
	for _, h := range p.hunks {
		for _, l := range h.lines {
			switch l.kind {
			case '+':
				added++
			case '-':
				deleted++
			}
		}
	}
	if added != r.Added || deleted != r.Deleted {
		t.Fatalf("the diff adds %d and deletes %d lines, the result says %d and %d", added, deleted, r.Added, r.Deleted)
	}
	return r
}

var defaults = bounds{MaxLines, MaxDistance, maxWork}

func numbered(n int, f func(i int) string) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(f(i))
	}
	return b.String()
}

func TestDiffIsUnifiedAndApplies(t *testing.T) {
	ten := numbered(10, func(i int) string { return fmt.Sprintf("%d\n", i+1) })
	for _, c := range []struct {
		name, a, b string
		want       string // the diff under the header lines, when given
	}{
		{name: "identical", a: "a\nb\n", b: "a\nb\n"},
		{name: "both empty", a: "", b: ""},
		{name: "from empty", a: "", b: "x\ny\n", want: "@@ -0,0 +1,2 @@\n+x\n+y\n"},
		{name: "to empty", a: "x\ny\n", b: "", want: "@@ -1,2 +0,0 @@\n-x\n-y\n"},
		{name: "final newline added", a: "a\nb", b: "a\nb\n", want: "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
		{name: "final newline removed", a: "a\nb\n", b: "a\nb", want: "@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n"},
		{name: "no final newline either side", a: "a\nb", b: "a\nc", want: "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
		{name: "context without final newline", a: "a\nb\nc", b: "A\nb\nc", want: "@@ -1,3 +1,3 @@\n-a\n+A\n b\n c\n\\ No newline at end of file\n"},
		{name: "CRLF", a: "a\r\nb\r\nc\r\n", b: "a\r\nB\r\nc\r\n", want: "@@ -1,3 +1,3 @@\n a\r\n-b\r\n+B\r\n c\r\n"},
		{name: "CRLF to LF", a: "a\r\nb\r\n", b: "a\nb\n", want: "@@ -1,2 +1,2 @@\n-a\r\n-b\r\n+a\n+b\n"},
		{name: "only additions", a: ten, b: strings.Replace(ten, "5\n", "5\nnew\n", 1), want: "@@ -3,6 +3,7 @@\n 3\n 4\n 5\n+new\n 6\n 7\n 8\n"},
		{name: "only deletions", a: ten, b: strings.Replace(ten, "5\n6\n", "", 1), want: "@@ -2,8 +2,6 @@\n 2\n 3\n 4\n-5\n-6\n 7\n 8\n 9\n"},
		{name: "two hunks", a: ten, b: strings.Replace(strings.Replace(ten, "1\n", "one\n", 1), "10\n", "ten\n", 1),
			want: "@@ -1,4 +1,4 @@\n-1\n+one\n 2\n 3\n 4\n@@ -7,4 +7,4 @@\n 7\n 8\n 9\n-10\n+ten\n"},
		{name: "one hunk for changes 6 lines apart", a: ten, b: strings.Replace(strings.Replace(ten, "2\n", "two\n", 1), "9\n", "nine\n", 1),
			want: "@@ -1,10 +1,10 @@\n 1\n-2\n+two\n 3\n 4\n 5\n 6\n 7\n 8\n-9\n+nine\n 10\n"},
		{name: "repeated lines", a: "x\nx\nx\n", b: "x\nx\n", want: "@@ -1,3 +1,2 @@\n x\n x\n-x\n"},
		{name: "no newline at all", a: "abc", b: "abd", want: "@@ -1 +1 @@\n-abc\n\\ No newline at end of file\n+abd\n\\ No newline at end of file\n"},
		{name: "empty lines", a: "\n\n\n", b: "\n\n", want: "@@ -1,3 +1,2 @@\n \n \n-\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := check(t, c.a, c.b, Options{OldName: "a/f.txt", NewName: "b/f.txt"}, defaults)
			if c.want != "" && r.Text != "--- a/f.txt\n+++ b/f.txt\n"+c.want {
				t.Errorf("diff:\n%s\nwant:\n--- a/f.txt\n+++ b/f.txt\n%s", r.Text, c.want)
			}
			if r.Coarse || r.Cut {
				t.Errorf("coarse %v, cut %v", r.Coarse, r.Cut)
			}
		})
	}
}

// A name that could break the header line is quoted; default names are a and b.
func TestDiffNamesCannotAddLines(t *testing.T) {
	r := Unified("x\n", "y\n", Options{OldName: "a/x\n+++ evil", NewName: ""})
	if !strings.HasPrefix(r.Text, "--- \"a/x\\n+++ evil\"\n+++ b\n") {
		t.Errorf("header lines: %q", r.Text)
	}
}

// A large input with a few changes gets a minimal diff, found quickly
// (the speed is measured in BenchmarkDiff).
func TestDiffOfLargeInputIsMinimal(t *testing.T) {
	a := numbered(100_000, func(i int) string { return fmt.Sprintf("line %d\n", i) })
	b := strings.Replace(a, "line 10\n", "line ten\n", 1)
	b = strings.Replace(b, "line 50000\n", "", 1)
	b = strings.Replace(b, "line 99998\n", "line 99998\nadded\n", 1)
	r := check(t, a, b, Options{}, defaults)
	if r.Coarse || r.Added != 2 || r.Deleted != 2 || strings.Count(r.Text, "@@ -") != 3 {
		t.Errorf("coarse %v, +%d -%d, diff:\n%s", r.Coarse, r.Added, r.Deleted, r.Text)
	}
}

// Two texts with nothing in common, too far apart to search, get the
// coarse diff: all of a deleted, all of b added.
func TestDiffOfUnrelatedInputsIsBounded(t *testing.T) {
	a := numbered(20_000, func(i int) string { return fmt.Sprintf("a %d\n", i) })
	b := numbered(20_000, func(i int) string { return fmt.Sprintf("b %d\n", i) })
	r := check(t, a, b, Options{}, defaults)
	if !r.Coarse || r.Added != 20_000 || r.Deleted != 20_000 {
		t.Errorf("coarse %v, +%d -%d", r.Coarse, r.Added, r.Deleted)
	}
	// Interleaved, so that the search finds matches everywhere and gives
	// up on work, not on distance.
	b = numbered(20_000, func(i int) string {
		if i%3 == 0 {
			return fmt.Sprintf("a %d\n", i)
		}
		return fmt.Sprintf("b %d\n", i)
	})
	r = check(t, a, b, Options{MaxBytes: 1 << 10}, defaults)
	if !r.Coarse || !r.Cut {
		t.Errorf("coarse %v, cut %v", r.Coarse, r.Cut)
	}
}

// A diff of two texts of sandbox.MaxFileSize-like size allocates what
// its output needs, not what the inputs hold: the middle past MaxLines
// lines is never split into lines.
func TestDiffOfHugeInputsAllocatesLittle(t *testing.T) {
	a := strings.Repeat("a\n", 16<<20)
	b := "b\n" + a[2:len(a)-2] + "b\n"
	var r Result
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r = Unified(a, b, Options{MaxBytes: 64 << 10})
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("a diff of two %d MiB texts allocated %d KiB", len(a)>>20, alloc>>10)
	}
	if !r.Coarse || !r.Cut || len(r.Text) > 64<<10 || r.Added != 16<<20 || r.Deleted != 16<<20 {
		t.Errorf("coarse %v, cut %v, %d bytes, +%d -%d", r.Coarse, r.Cut, len(r.Text), r.Added, r.Deleted)
	}
}

// The cut keeps to the limit, ends in whole lines and the marker, and
// says how many changed lines it left out.
func TestDiffIsCutAtTheLimit(t *testing.T) {
	a := numbered(1000, func(i int) string { return fmt.Sprintf("old line %d\n", i) })
	b := numbered(1000, func(i int) string { return fmt.Sprintf("new line %d\n", i) })
	for _, limit := range []int{1, MinMaxBytes, 1000, 4096, 20_000} {
		r := check(t, a, b, Options{MaxBytes: limit}, defaults)
		p, _ := parse(r.Text)
		shown := 0
		for _, h := range p.hunks {
			for _, l := range h.lines {
				if l.kind != ' ' {
					shown++
				}
			}
		}
		want := fmt.Sprintf("... diff cut at %d bytes; %d more lines changed\n", max(limit, MinMaxBytes), 2000-shown)
		if !r.Cut || len(r.Text) > max(limit, MinMaxBytes) || !strings.HasSuffix(r.Text, want) {
			t.Errorf("limit %d: cut %v, %d bytes, ends %q; want %q", limit, r.Cut, len(r.Text), r.Text[max(0, len(r.Text)-80):], want)
		}
	}
	if r := check(t, a, b, Options{MaxBytes: 1 << 20}, defaults); r.Cut {
		t.Errorf("cut under a limit it fits")
	}
}

// The coarse diff, reached early with low bounds, holds every guarantee.
func TestCoarseDiffApplies(t *testing.T) {
	ten := numbered(10, func(i int) string { return fmt.Sprintf("%d\n", i+1) })
	for _, lim := range []bounds{{lines: 0, distance: 1, work: 1}, {lines: 100, distance: 1, work: 100}, {lines: 100, distance: 100, work: 0}} {
		for _, c := range [][2]string{
			{ten, strings.Replace(strings.Replace(ten, "2\n", "two\n", 1), "9\n", "nine\n", 1)},
			{"a", "b"}, {"", "a\nb"}, {"a\nb", ""}, {"x\nx\nx\n", "x\nx\n"}, {"a\nb\n", "a\nb"},
		} {
			r := check(t, c[0], c[1], Options{}, lim)
			if !r.Coarse && lim.lines == 0 {
				t.Errorf("%q to %q under %+v: not coarse", c[0], c[1], lim)
			}
		}
	}
}

// For any two texts the diff parses as a unified diff, and when it was
// not cut, applying it to a gives b; the same holds of the coarse diff.
func FuzzDiff(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nc\n", uint16(0))
	f.Add("x", "x\n", uint16(600))
	f.Add("a\r\nb\r\n", "a\nb\n", uint16(0))
	f.Add("1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nX\n6\n7\n8\n9\n0\n", uint16(520))
	f.Fuzz(func(t *testing.T, a, b string, limit uint16) {
		o := Options{OldName: "a/f", NewName: "b/f", MaxBytes: int(limit)}
		check(t, a, b, o, defaults)
		check(t, a, b, o, bounds{lines: 64, distance: 4, work: 64})
	})
}

// BenchmarkDiff measures the diffs an edit makes: a few changes in a
// large file, and the bounded worst case of unrelated texts.
func BenchmarkDiff(b *testing.B) {
	big := numbered(100_000, func(i int) string { return fmt.Sprintf("line %d of a long file\n", i) })
	edited := strings.Replace(strings.Replace(big, "line 10 of", "line ten of", 1), "line 90000 of", "line 90 000 of", 1)
	x := numbered(20_000, func(i int) string { return fmt.Sprintf("a %d\n", i) })
	y := numbered(20_000, func(i int) string { return fmt.Sprintf("b %d\n", i) })
	z := numbered(20_000, func(i int) string {
		if i%3 == 0 {
			return fmt.Sprintf("a %d\n", i)
		}
		return fmt.Sprintf("b %d\n", i)
	})
	small := numbered(200, func(i int) string { return fmt.Sprintf("line %d\n", i) })
	for _, c := range []struct{ name, a, b string }{
		{"small-edit-200-lines", small, strings.Replace(small, "line 100\n", "line 100 changed\n", 1)},
		{"two-edits-100k-lines", big, edited},
		{"unrelated-20k-lines", x, y},
		{"interleaved-20k-lines", x, z},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.a) + len(c.b)))
			for b.Loop() {
				Unified(c.a, c.b, Options{MaxBytes: 64 << 10})
			}
		})
	}
}
