package textdiff

import (
	"fmt"
	"strconv"
	"strings"
)

// A hunk is the ops one "@@" header covers: changes and the unchanged
// lines around and between them.
type hunk struct {
	a, b int // lines of a and of b before the hunk
	ops  []op
}

// hunks groups ops, which start after base common lines, into hunks: Context unchanged lines before and after
// each change, and changes at most 2*Context unchanged lines apart in one
// hunk.
func hunks(ops []op, base int) []hunk {
	var out []hunk
	open := false
	var before op // the unchanged run before the next change, when no hunk is open
	la, lb := base, base
	for i, o := range ops {
		switch o.kind {
		case ' ':
			if open {
				h := &out[len(out)-1]
				if i < len(ops)-1 && o.lines <= 2*Context {
					h.ops = append(h.ops, o)
				} else {
					h.ops = append(h.ops, firstLines(o, Context))
					open = false
				}
			}
			before = o
			la += o.lines
			lb += o.lines
			continue
		case '-':
			la += o.lines
		case '+':
			lb += o.lines
		}
		if !open {
			h := hunk{a: la, b: lb}
			if o.kind == '-' {
				h.a -= o.lines
			} else {
				h.b -= o.lines
			}
			if before.lines > 0 {
				c := lastLines(before, Context)
				h.a -= c.lines
				h.b -= c.lines
				h.ops = append(h.ops, c)
			}
			out = append(out, h)
			open = true
		}
		out[len(out)-1].ops = append(out[len(out)-1].ops, o)
		before = op{}
	}
	return out
}

// firstLines is the first k lines of o (all of it if it has fewer).
func firstLines(o op, k int) op {
	if o.lines <= k {
		return o
	}
	end := 0
	for range k {
		end += strings.IndexByte(o.text[end:], '\n') + 1
	}
	return op{o.kind, o.text[:end], k}
}

// lastLines is the last k lines of o (all of it if it has fewer).
func lastLines(o op, k int) op {
	if o.lines <= k {
		return o
	}
	start := len(o.text)
	for range k {
		start = strings.LastIndexByte(o.text[:start-1], '\n') + 1
	}
	return op{o.kind, o.text[start:], k}
}

const noNewline = "\\ No newline at end of file\n"

// markerRoom is room enough for the marker of a cut, whatever its numbers.
const markerRoom = len("... diff cut at  bytes;  more lines changed\n") + 2*20

// render writes the hunks as a unified diff under o's names, cut at
// o.MaxBytes; changed is how many lines the hunks add and delete.
func render(hs []hunk, o Options, changed int) (string, bool) {
	header := "--- " + name(o.OldName, "a") + "\n+++ " + name(o.NewName, "b") + "\n"
	limit := o.MaxBytes
	if limit > 0 {
		limit = max(limit, MinMaxBytes, len(header)+markerRoom)
	}
	var out, body strings.Builder
	out.WriteString(header)
	shown := 0
	for _, h := range hs {
		// The header of the whole hunk is at least as long as that of a
		// part of it.
		room := len(hunkHeader(h.a, h.b, h.ops)) + markerRoom
		body.Reset()
		var part []op
		cut := false
		for _, o := range h.ops {
			text, lines := o.text, 0
			for text != "" && !cut {
				line := text
				if k := strings.IndexByte(text, '\n'); k >= 0 {
					line = text[:k+1]
				}
				size := 1 + len(line)
				if line[len(line)-1] != '\n' {
					size += 1 + len(noNewline)
				}
				if limit > 0 && out.Len()+room+body.Len()+size > limit {
					cut = true
					break
				}
				body.WriteByte(o.kind)
				body.WriteString(line)
				if line[len(line)-1] != '\n' {
					body.WriteString("\n" + noNewline)
				}
				text = text[len(line):]
				lines++
			}
			if lines > 0 {
				part = append(part, op{o.kind, "", lines})
				if o.kind != ' ' {
					shown += lines
				}
			}
			if cut {
				break
			}
		}
		if body.Len() > 0 && changedIn(part) {
			out.WriteString(hunkHeader(h.a, h.b, part))
			out.WriteString(body.String())
		}
		if cut {
			fmt.Fprintf(&out, "... diff cut at %d bytes; %d more lines changed\n", limit, changed-shown)
			return out.String(), true
		}
	}
	return out.String(), false
}

// changedIn reports whether ops change anything: a hunk cut before its
// first change is not shown.
func changedIn(ops []op) bool {
	for _, o := range ops {
		if o.kind != ' ' {
			return true
		}
	}
	return false
}

// hunkHeader is the "@@ -a,n +b,m @@" line of ops after a lines of a and
// b of b.
func hunkHeader(a, b int, ops []op) string {
	na, nb := 0, 0
	for _, o := range ops {
		if o.kind != '+' {
			na += o.lines
		}
		if o.kind != '-' {
			nb += o.lines
		}
	}
	return "@@ -" + span(a, na) + " +" + span(b, nb) + " @@\n"
}

// span is one side of a hunk header: the first line and the count, the
// count left out when 1; an empty side names the line before it.
func span(before, n int) string {
	switch n {
	case 0:
		return strconv.Itoa(before) + ",0"
	case 1:
		return strconv.Itoa(before + 1)
	}
	return strconv.Itoa(before+1) + "," + strconv.Itoa(n)
}

// name is a header name, def when empty, quoted when it holds a byte that
// could end the line or be read as quoting.
func name(s, def string) string {
	if s == "" {
		return def
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c == '"' || c == '\\' {
			return strconv.Quote(s)
		}
	}
	return s
}
