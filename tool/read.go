package tool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

type readArgs struct {
	Path  string   `json:"path,omitempty"`
	Paths []string `json:"paths,omitempty"`
	// Offset is the first line (1-based); negative, how many lines from
	// the end ("-20": the last 20).
	Offset      int  `json:"offset,omitempty"`
	Limit       int  `json:"limit,omitempty"`
	LineNumbers bool `json:"line_numbers,omitempty"`
}

// Bounds of read_file.
const (
	// MaxReadPaths is the most files one call reads.
	MaxReadPaths = 20
	// MaxImageBytes is the largest image read_file returns as an image.
	MaxImageBytes = 5 << 20
)

func readFile(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a readArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	paths := a.Paths
	switch {
	case a.Path != "" && len(a.Paths) > 0:
		return failf("read_file takes path or paths, not both"), nil
	case a.Path != "":
		paths = []string{a.Path}
	case len(paths) == 0:
		return failf("read_file needs a path"), nil
	case len(paths) > MaxReadPaths:
		return failf("read_file reads at most %d files in one call, not %d", MaxReadPaths, len(paths)), nil
	}
	for _, p := range paths {
		if p == "" {
			return failf("read_file: an empty path in paths"), nil
		}
		if out, bad := badPath("read_file", p); bad {
			return out, nil
		}
	}
	if a.Limit < 0 {
		return failf("limit must not be negative"), nil
	}
	detail := strings.Join(paths, ", ")
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Read, Tool: "read_file", Detail: detail, Paths: ts.rulePaths(paths...)}, a); !ok {
		return out, err
	}
	if len(paths) == 1 {
		return ts.readOne(ctx, paths[0], a), nil
	}
	// Several files: each under a header, within one answer's bound.
	var b strings.Builder
	var files []CodeFile
	failed := 0
	for i, p := range paths {
		if b.Len() >= MaxReadBytes {
			fmt.Fprintf(&b, "\n[%d more files not shown: the answer is over %d bytes; read them in another call]", len(paths)-i, MaxReadBytes)
			break
		}
		out := ts.readOne(ctx, p, a)
		if out.IsError {
			failed++
		}
		fmt.Fprintf(&b, "==> %s <==\n%s\n", p, out.Text)
		files = append(files, out.Files...)
	}
	return Output{Text: strings.TrimSuffix(b.String(), "\n"), Files: files, IsError: failed == len(paths)}, nil
}

// readOne reads one file for read_file (see its description).
func (ts *Toolset) readOne(ctx context.Context, path string, a readArgs) Output {
	// The stamp describes the file no later than its content: if it changes
	// in between, a later write is refused as stale, never let through.
	var (
		fi     sandbox.FileInfo
		err    error
		text   string
		first  = 1 // the number of the first line shown
		binary bool
		head   []byte
	)
	if a.Offset > 1 || a.Offset < 0 || a.Limit > 0 {
		// A line window streams the file: it holds no more than the
		// window shown, however large the file (a window of a 100 MB log
		// used to read all of it into memory).
		fi, err = sandbox.ReadStream(ctx, ts.opts.Sandbox, path, func(r io.Reader) error {
			var werr error
			if a.Offset < 0 {
				text, first, binary, werr = tailWindow(r, -a.Offset, a.Limit)
			} else {
				text, binary, werr = lineWindow(r, a.Offset, a.Limit)
				first = max(a.Offset, 1)
			}
			return werr
		})
	} else {
		// Without one only the start of the file is needed: read just
		// that much, however large the file is.
		head, fi, err = sandbox.ReadStat(ctx, ts.opts.Sandbox, path, MaxReadBytes+utf8.UTFMax)
		text, binary = capText(head, fi.Size), hasNUL(head)
	}
	if err != nil {
		return failf("%s", describeErr(asOp("read", err)))
	}
	ts.seen.remember(fi.Path, fi)
	if binary || head != nil && isImage(head) {
		return ts.describeBinary(ctx, path, fi, head)
	}
	var notes []string
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
		notes = append(notes, "[not UTF-8: bytes that are not UTF-8 are shown as \uFFFD; the file itself is unchanged]")
	}
	if a.LineNumbers {
		text = numberLines(text, first)
	}
	for _, n := range notes {
		text += "\n" + n
	}
	return Output{Text: text}
}

// describeBinary answers for a file that is not text: an image (PNG,
// JPEG, GIF, WebP) of at most MaxImageBytes as an image, anything else by
// its size and type.
func (ts *Toolset) describeBinary(ctx context.Context, path string, fi sandbox.FileInfo, head []byte) Output {
	if head == nil { // a window was asked for: sniff the start
		var err error
		if head, _, err = sandbox.ReadStat(ctx, ts.opts.Sandbox, path, 512); err != nil {
			return failf("%s", describeErr(asOp("read", err)))
		}
	}
	mt := http.DetectContentType(head)
	if isImage(head) {
		if fi.Size > MaxImageBytes {
			return Output{Text: fmt.Sprintf("%s is an image (%s, %d bytes), larger than the %d bytes read_file returns; not shown", path, mt, fi.Size, MaxImageBytes)}
		}
		data, ifi, err := sandbox.ReadStat(ctx, ts.opts.Sandbox, path, MaxImageBytes+1)
		if err != nil {
			return failf("%s", describeErr(asOp("read", err)))
		}
		if int64(len(data)) > MaxImageBytes {
			return Output{Text: fmt.Sprintf("%s is an image (%s), larger than the %d bytes read_file returns; not shown", path, mt, MaxImageBytes)}
		}
		ts.seen.remember(ifi.Path, ifi)
		return Output{
			Text:  fmt.Sprintf("%s is an image (%s, %d bytes), shown as an image", path, mt, len(data)),
			Files: []CodeFile{{Name: path, Size: int64(len(data)), MediaType: mt, Data: data}},
		}
	}
	return Output{Text: fmt.Sprintf("%s is a binary file (%s, %d bytes); not shown", path, mt, fi.Size)}
}

// isImage reports content that is a PNG, JPEG, GIF or WebP image.
func isImage(head []byte) bool {
	switch http.DetectContentType(head[:min(len(head), 512)]) {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// isMarker reports a line that is one of read_file's own notes.
func isMarker(line string) bool {
	if !strings.HasPrefix(line, "[") || !strings.HasSuffix(line, "]") {
		return false
	}
	for _, p := range []string{"[lines ", "[truncated: ", "[the last ", "[the file "} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// numberLines prefixes each line of text with its number, counting from
// first, as cat -n does; read_file's own notes (isMarker) are not
// numbered.
func numberLines(text string, first int) string {
	if text == "" {
		return text
	}
	var b strings.Builder
	n := first
	body, trailing := strings.CutSuffix(text, "\n")
	for line := range strings.SplitSeq(body, "\n") {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		if isMarker(line) {
			b.WriteString(line) // hutch's own marker
			continue
		}
		fmt.Fprintf(&b, "%6d\t%s", n, line)
		n++
	}
	if trailing {
		b.WriteByte('\n')
	}
	return b.String()
}

// asOp renames the operation of a path error, so the model reads "read x:
// ..." for a read_file call (or "edit x: ...") even when the first step
// was a stat.
func asOp(op string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: op, Path: pe.Path, Err: pe.Err}
	}
	return err
}

// hasNUL reports a NUL byte in the first binaryHead bytes: git's and
// grep's rule for a binary file. Text that is not UTF-8 (Latin-1, say) is
// still text.
func hasNUL(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), binaryHead)], 0) >= 0
}

// binaryHead is how much of a file isBinary looks at.
const binaryHead = 8192

// isBinary: a NUL byte, or invalid UTF-8, in the first binaryHead bytes.
func isBinary(b []byte) bool {
	head := b[:min(len(b), binaryHead)]
	if bytes.IndexByte(head, 0) >= 0 {
		return true
	}
	if len(head) < len(b) { // a character may straddle the cut
		head = trimPartialRune(head)
	}
	return !utf8.Valid(head)
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b (what
// cutting text at a byte count leaves behind).
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// lineWindow reads r to its end and returns lines offset (1-based) to
// offset+limit-1 (to the end when limit is 0), saying what was left, with
// the text capped; binary reports a file that is (a NUL byte near the
// start, or an image). It holds
// the file's first 8 KiB and the shown part of the window, never more.
func lineWindow(r io.Reader, offset, limit int) (text string, binary bool, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	start := max(offset, 1) - 1
	var (
		head, shown []byte // the file's start (for isBinary), the window's
		window      int64  // the window's size
		line        int    // the line the next byte is on (0-based)
		last        byte   // the last byte read
		read        int64
	)
	for {
		piece, rerr := br.ReadSlice('\n')
		if len(piece) > 0 {
			read += int64(len(piece))
			last = piece[len(piece)-1]
			if n := binaryHead + 1 - len(head); n > 0 {
				head = append(head, piece[:min(n, len(piece))]...)
			}
			if line >= start && (limit == 0 || line-start < limit) {
				window += int64(len(piece))
				if n := MaxReadBytes + utf8.UTFMax - len(shown); n > 0 {
					shown = append(shown, piece[:min(n, len(piece))]...)
				}
			}
			if last == '\n' {
				line++
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil && rerr != bufio.ErrBufferFull {
			return "", false, rerr
		}
	}
	if hasNUL(head) || isImage(head) {
		return "", true, nil
	}
	lines := line
	if read > 0 && last != '\n' {
		lines++
	}
	if start >= lines {
		return fmt.Sprintf("[the file has %d lines; offset %d is past the end]", lines, offset), false, nil
	}
	end := lines
	if limit > 0 && limit < lines-start { // compared, not added: no overflow
		end = start + limit
	}
	text = capText(shown, window)
	if end < lines {
		text += fmt.Sprintf("\n[lines %d-%d of %d; use offset %d to read on]", start+1, end, lines, end+1)
	}
	return text, false, nil
}

// capText returns text, cut at MaxReadBytes without splitting a character
// and followed by a marker saying how much of total was shown.
func capText(text []byte, total int64) string {
	if len(text) <= MaxReadBytes && int64(len(text)) >= total {
		return string(text)
	}
	cut := min(len(text), MaxReadBytes)
	for cut > 0 && cut < len(text) && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return string(text[:cut]) + fmt.Sprintf("\n[truncated: showing %d of %d bytes; use offset and limit to read the rest]", cut, total)
}

// tailWindow reads r to its end and returns the last n lines (the first
// limit of them when limit > 0), with the number of the first line shown.
// It holds at most n lines and about MaxReadBytes of them: when the last n
// lines are longer, the earliest of them are left out, and a marker says
// so. binary is as for lineWindow.
func tailWindow(r io.Reader, n, limit int) (text string, first int, binary bool, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		head  []byte
		ring  [][]byte // the last lines read, oldest first
		kept  int      // bytes in ring
		lines int      // lines read (a last line without "\n" included)
		cur   []byte   // the line being read
		cut   bool     // a line was cut to its end to fit
	)
	push := func() {
		ring = append(ring, cur)
		kept += len(cur)
		lines++
		cur = nil
		for len(ring) > n || (kept > MaxReadBytes && len(ring) > 1) {
			kept -= len(ring[0])
			ring = ring[1:]
		}
		if kept > MaxReadBytes { // one line alone is too long: keep its end
			l := ring[0]
			i := len(l) - MaxReadBytes
			for i < len(l) && !utf8.RuneStart(l[i]) {
				i++
			}
			ring[0], kept, cut = l[i:], len(l)-i, true
		}
	}
	for {
		piece, rerr := br.ReadSlice('\n')
		if len(piece) > 0 {
			if k := binaryHead + 1 - len(head); k > 0 {
				head = append(head, piece[:min(k, len(piece))]...)
			}
			cur = append(cur, piece...)
			if len(cur) > 2*MaxReadBytes { // bound a line with no end
				i := len(cur) - MaxReadBytes
				cur, cut = append([]byte(nil), cur[i:]...), true
			}
			if piece[len(piece)-1] == '\n' {
				push()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil && rerr != bufio.ErrBufferFull {
			return "", 0, false, rerr
		}
	}
	if len(cur) > 0 {
		push()
	}
	if hasNUL(head) || isImage(head) {
		return "", 0, true, nil
	}
	if lines == 0 {
		return "[the file is empty]", 1, false, nil
	}
	want := min(n, lines)          // the window: lines lines-want+1 .. lines
	start := lines - want          // 0-based first line of the window
	have := lines - len(ring)      // 0-based first line kept
	end := lines                   // 0-based end of what is shown
	if limit > 0 && limit < want { // compared, not added: no overflow
		end = start + limit
	}
	from := max(start, have)
	var b bytes.Buffer
	for _, l := range ring[from-have : max(end-have, from-have)] {
		b.Write(l)
	}
	text = b.String()
	if from > start || cut {
		text = fmt.Sprintf("[the last %d lines are over %d bytes: showing from line %d]\n", want, MaxReadBytes, from+1) + text
	}
	if end < lines {
		text += fmt.Sprintf("\n[lines %d-%d of %d; use offset %d to read on]", from+1, end, lines, end+1)
	}
	return text, from + 1, false, nil
}
