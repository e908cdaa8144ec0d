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
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

type readArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

func readFile(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a readArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if a.Path == "" {
		return failf("read_file needs a path"), nil
	}
	if out, bad := badPath("read_file", a.Path); bad {
		return out, nil
	}
	if a.Offset < 0 || a.Limit < 0 {
		return failf("offset and limit must not be negative"), nil
	}
	if out, ok, err := ts.gate(ctx, permission.Read, "read_file", a.Path, a); !ok {
		return out, err
	}
	// The stamp describes the file no later than its content: if it changes
	// in between, a later write is refused as stale, never let through.
	var (
		fi     sandbox.FileInfo
		err    error
		text   string
		binary bool
	)
	if a.Offset > 1 || a.Limit > 0 {
		// A line window streams the file: it holds no more than the
		// window shown, however large the file (a window of a 100 MB log
		// used to read all of it into memory).
		fi, err = sandbox.ReadStream(ctx, ts.opts.Sandbox, a.Path, func(r io.Reader) error {
			var werr error
			text, binary, werr = lineWindow(r, a.Offset, a.Limit)
			return werr
		})
	} else {
		// Without one only the start of the file is needed: read just
		// that much, however large the file is.
		var data []byte
		data, fi, err = sandbox.ReadStat(ctx, ts.opts.Sandbox, a.Path, MaxReadBytes+utf8.UTFMax)
		text, binary = capText(data, fi.Size), isBinary(data)
	}
	if err != nil {
		return failf("%s", describeErr(asOp("read", err))), nil
	}
	ts.seen.remember(fi.Path, fi)
	if binary {
		return Output{
			Text: fmt.Sprintf("%s is a binary file (%d bytes); not shown", a.Path, fi.Size),
			Data: map[string]any{"path": fi.Path, "binary": true, "size": fi.Size},
		}, nil
	}
	return Output{Text: text}, nil
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
// the text capped; binary reports a file that is (see isBinary). It holds
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
	if isBinary(head) {
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
