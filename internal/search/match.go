package search

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/sandbox"
)

// matcher finds the lines matching one pattern.
//
// re is the pattern with line semantics: "^" and "$" (and \A, \z, which
// the line-by-line reading makes the same) are rewritten to match at line
// ends, so it can run over a whole file buffer and each match it finds
// starts in a line that matches, unless the match runs on past that line's
// newline; then the line alone is tried again. lit, when set, is a literal
// every match contains (ASCII-lowered when fold: then the buffer is
// searched lowered too), found with bytes.Index; litOnly says that finding
// it is the whole match.
type matcher struct {
	re      *regexp.Regexp
	lit     []byte
	fold    bool
	litOnly bool
	never   bool // no line can match (the pattern needs a newline)
}

// compile prepares pattern (plain text when literal).
func compile(pattern string, literal, ignoreCase bool) (*matcher, error) {
	src := pattern
	if literal {
		src = regexp.QuoteMeta(pattern)
	}
	flags := syntax.Perl
	if ignoreCase {
		flags |= syntax.FoldCase
	}
	tree, err := syntax.Parse(src, flags)
	if err != nil {
		msg := err.Error()
		if se, ok := err.(*syntax.Error); ok {
			msg = se.Code.String()
			if se.Expr != "" && se.Expr != src {
				msg += " in `" + shorten(se.Expr) + "`"
			}
		}
		return nil, fail(sandbox.ErrConfig, "pattern `%s` does not compile: %s: fix the expression, or set literal to search for the text as it is", shorten(pattern), msg)
	}
	lineAnchors(tree)
	re, err := regexp.Compile(tree.String())
	if err != nil { // the rewritten tree should always compile
		return nil, fail(sandbox.ErrConfig, "pattern `%s` does not compile: %v: fix the expression, or set literal", shorten(pattern), err)
	}
	m := &matcher{re: re}
	lit, fold := required(tree)
	if bytes.IndexByte(lit, '\n') >= 0 {
		m.never = true
		return m, nil
	}
	t := tree
	for t.Op == syntax.OpCapture {
		t = t.Sub[0]
	}
	whole := t.Op == syntax.OpLiteral
	if len(lit) >= 3 || (whole && len(lit) > 0) {
		m.lit, m.fold, m.litOnly = lit, fold, whole
	}
	return m, nil
}

func shorten(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// lineAnchors rewrites the text anchors of t to line anchors.
func lineAnchors(t *syntax.Regexp) {
	switch t.Op {
	case syntax.OpBeginText:
		t.Op = syntax.OpBeginLine
	case syntax.OpEndText:
		t.Op = syntax.OpEndLine
		t.Flags &^= syntax.WasDollar
	}
	for _, s := range t.Sub {
		lineAnchors(s)
	}
}

// required returns a literal that every match of t contains, or nil;
// fold says it is ASCII-lowered and must be looked for in a lowered text.
// A case-folded literal is only offered when folding it is plain ASCII
// lowering (no "k" or "s", which fold with non-ASCII letters too).
func required(t *syntax.Regexp) (lit []byte, fold bool) {
	switch t.Op {
	case syntax.OpLiteral:
		if t.Flags&syntax.FoldCase == 0 {
			return []byte(string(t.Rune)), false
		}
		if !asciiFold(t.Rune) {
			return nil, false
		}
		return []byte(strings.ToLower(string(t.Rune))), true
	case syntax.OpCapture, syntax.OpPlus:
		return required(t.Sub[0])
	case syntax.OpRepeat:
		if t.Min >= 1 {
			return required(t.Sub[0])
		}
	case syntax.OpConcat:
		// The parser joins adjacent literals of the same case rule; the
		// longest sub-expression's literal is the best filter.
		for _, s := range t.Sub {
			if l, f := required(s); len(l) > len(lit) {
				lit, fold = l, f
			}
		}
		return lit, fold
	}
	return nil, false
}

// asciiFold reports whether every rune of rs is ASCII and folds only with
// ASCII runes.
func asciiFold(rs []rune) bool {
	for _, r := range rs {
		if r >= utf8.RuneSelf {
			return false
		}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f >= utf8.RuneSelf {
				return false
			}
		}
	}
	return true
}

// lowerASCII writes src lowered (ASCII only) into dst, reusing it.
func lowerASCII(dst, src []byte) []byte {
	dst = append(dst[:0], src...)
	for i, c := range dst {
		if 'A' <= c && c <= 'Z' {
			dst[i] = c + 'a' - 'A'
		}
	}
	return dst
}

// window is how much of a buffer the regexp scans between checks of the
// context (more when a line is longer). Go's regexp can take about 40 ms
// a MiB on a pattern without a literal, so a window is kept small enough
// that a cancelled search stops within a few milliseconds.
const window = 64 << 10

// scan calls fn with the start and end (before the newline) of each
// matching line of buf, in order, until fn returns false. low is buf
// lowered when m.fold.
func (m *matcher) scan(ctx context.Context, buf, low []byte, fn func(start, end int) bool) error {
	if m.never || len(buf) == 0 {
		return nil
	}
	hay := buf
	if m.fold {
		hay = low
	}
	n, checked := 0, 0
	for pos := 0; pos < len(buf); {
		// The context is checked every 256 matching lines and every
		// window of bytes, whichever comes first.
		if n++; n%256 == 0 || pos-checked >= window {
			checked = pos
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		var hit int
		within := false // the regexp's match lies in its line
		if m.lit != nil {
			i := bytes.Index(hay[pos:], m.lit)
			if i < 0 {
				return nil
			}
			hit = pos + i
		} else {
			end := len(buf)
			if end-pos > window {
				end = pos + window
				if i := bytes.IndexByte(buf[end:], '\n'); i >= 0 {
					end += i
				} else {
					end = len(buf)
				}
			}
			loc := m.re.FindIndex(buf[pos:end])
			if loc == nil {
				if end == len(buf) {
					return nil
				}
				pos, checked = end+1, end+1
				if err := ctx.Err(); err != nil {
					return err
				}
				continue
			}
			hit = pos + loc[0]
			within = bytes.IndexByte(buf[hit:pos+loc[1]], '\n') < 0
			if hit == len(buf) && buf[len(buf)-1] == '\n' {
				return nil // no line after the last newline
			}
		}
		start := pos + bytes.LastIndexByte(buf[pos:hit], '\n') + 1
		end := len(buf)
		if i := bytes.IndexByte(buf[hit:], '\n'); i >= 0 {
			end = hit + i
		}
		if m.litOnly || within || m.re.Match(buf[start:end]) {
			if !fn(start, end) {
				return nil
			}
		}
		pos = end + 1
	}
	return nil
}

// cutAt is where a long matching line is best cut from to show its first
// match: with the match's end, and as much of the match as fits.
func (m *matcher) cutAt(line []byte) int {
	loc := m.re.FindIndex(line)
	if loc == nil {
		return 0
	}
	const w = sandbox.MaxSearchLine
	return max(0, loc[0]-w/4, loc[1]-w+w/4)
}

// show is a line as a result gives it: without a trailing "\r", invalid
// UTF-8 as U+FFFD, cut to about sandbox.MaxSearchLine bytes from about
// start.
func show(line []byte, start int) string {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) <= sandbox.MaxSearchLine {
		return valid(line)
	}
	start = min(start, len(line)-sandbox.MaxSearchLine)
	for start > 0 && start < len(line) && !utf8.RuneStart(line[start]) {
		start++
	}
	end := min(start+sandbox.MaxSearchLine, len(line))
	for end < len(line) && end > start && !utf8.RuneStart(line[end]) {
		end--
	}
	var b strings.Builder
	if start > 0 {
		b.WriteString("… ")
	}
	b.WriteString(valid(line[start:end]))
	fmt.Fprintf(&b, " … [line cut, %d bytes]", len(line))
	return b.String()
}

func valid(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
