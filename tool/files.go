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
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

// MaxReadBytes is the most read_file returns in one call.
const MaxReadBytes = 200_000

// readTracker remembers, per resolved path, what the file looked like when
// the session last read (or wrote) it.
type readTracker struct {
	mu   sync.Mutex
	seen map[string]fileStamp
}

// fileStamp is what tells one version of a file from another (see
// sandbox.FileInfo).
type fileStamp struct {
	mtime, changed time.Time
	size           int64
	inode          uint64
}

func stampOf(fi sandbox.FileInfo) fileStamp {
	return fileStamp{mtime: fi.ModTime, changed: fi.Changed, size: fi.Size, inode: fi.Inode}
}

// same reports whether s and o describe one version of a file.
func (s fileStamp) same(o fileStamp) bool {
	return s.mtime.Equal(o.mtime) && s.changed.Equal(o.changed) && s.size == o.size && s.inode == o.inode
}

func (r *readTracker) remember(path string, fi sandbox.FileInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]fileStamp{}
	}
	r.seen[path] = stampOf(fi)
}

func (r *readTracker) lookup(path string) (fileStamp, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.seen[path]
	return s, ok
}

// checkOverwrite enforces read-before-write for an existing file: it must
// have been read in this session and be unchanged since (same size and
// modification time, and where the tier knows them the same inode and
// status change time). A missing file passes. It returns the file's resolved key.
func (ts *Toolset) checkOverwrite(ctx context.Context, path string) (string, *Output) {
	fi, err := ts.opts.Sandbox.Stat(ctx, path)
	if errors.Is(err, sandbox.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		o := failf("%s", describeErr(asOp("write", err)))
		return "", &o
	}
	if fi.Kind == sandbox.KindDir {
		o := failf("%s is a directory", path)
		return "", &o
	}
	if !ts.guard {
		return fi.Path, nil
	}
	stamp, ok := ts.seen.lookup(fi.Path)
	switch {
	case !ok:
		o := failf("read %s before overwriting it", path)
		return "", &o
	case !stamp.same(stampOf(fi)):
		o := failf("stale: %s changed since you read it; read it again first", path)
		return "", &o
	}
	return fi.Path, nil
}

// afterWrite records the new state so the session may write again.
func (ts *Toolset) afterWrite(ctx context.Context, path string) {
	if fi, err := ts.opts.Sandbox.Stat(ctx, path); err == nil {
		ts.seen.remember(fi.Path, fi)
	}
}

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

type writeArgs struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

func writeFile(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a writeArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if a.Path == "" || a.Content == nil {
		return failf("write_file needs a path and content"), nil
	}
	if out, bad := badPath("write_file", a.Path); bad {
		return out, nil
	}
	// The guard first: a call it would refuse must not use up a person's
	// answer or approval.
	if _, refuse := ts.checkOverwrite(ctx, a.Path); refuse != nil {
		return *refuse, nil
	}
	if out, ok, err := ts.gate(ctx, permission.Write, "write_file", a.Path, a); !ok {
		return out, err
	}
	if err := ts.opts.Sandbox.Write(ctx, a.Path, []byte(*a.Content)); err != nil {
		return failf("%s", describeErr(err)), nil
	}
	ts.afterWrite(ctx, a.Path)
	return structured(WriteResult{OK: true, Path: a.Path, Bytes: len(*a.Content)}), nil
}

type editArgs struct {
	Path       string  `json:"path"`
	OldString  *string `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll bool    `json:"replace_all,omitempty"`
}

func editFile(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a editArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	switch {
	case a.Path == "" || a.OldString == nil || a.NewString == nil:
		return failf("edit_file needs path, old_string and new_string"), nil
	case *a.OldString == "":
		return failf("old_string is empty: give the exact text to replace (use write_file to create a file)"), nil
	case *a.OldString == *a.NewString:
		return failf("old_string and new_string are the same: nothing to change"), nil
	}
	if out, bad := badPath("edit_file", a.Path); bad {
		return out, nil
	}
	sb := ts.opts.Sandbox
	if _, err := sb.Stat(ctx, a.Path); err != nil {
		return failf("%s", describeErr(asOp("edit", err))), nil
	}
	if _, refuse := ts.checkOverwrite(ctx, a.Path); refuse != nil {
		return *refuse, nil
	}
	// An edit that cannot apply is refused before the gate, so it never
	// uses up a person's answer or approval; where a person may have
	// decided, the file is read again after (it may have changed since).
	text, n, refuse := planEdit(ctx, sb, a)
	if refuse != nil {
		return *refuse, nil
	}
	if out, ok, err := ts.gate(ctx, permission.Write, "edit_file", a.Path, a); !ok {
		return out, err
	}
	if ts.personDecides() {
		if text, n, refuse = planEdit(ctx, sb, a); refuse != nil {
			return *refuse, nil
		}
	}
	text = strings.Replace(text, *a.OldString, *a.NewString, n)
	if err := sb.Write(ctx, a.Path, []byte(text)); err != nil {
		return failf("%s", describeErr(err)), nil
	}
	ts.afterWrite(ctx, a.Path)
	return structured(EditResult{OK: true, Path: a.Path, Replacements: n}), nil
}

// planEdit reads the file an edit applies to and checks the edit: the
// text, how many replacements, or why it cannot apply.
func planEdit(ctx context.Context, sb sandbox.Sandbox, a editArgs) (string, int, *Output) {
	refuse := func(format string, args ...any) (string, int, *Output) {
		out := failf(format, args...)
		return "", 0, &out
	}
	data, err := sb.Read(ctx, a.Path)
	if err != nil {
		return refuse("%s", describeErr(err))
	}
	text := string(data)
	n := strings.Count(text, *a.OldString)
	switch {
	case n == 0:
		return refuse("old_string not found in %s: it must match the file exactly, including spaces and line breaks", a.Path)
	case n > 1 && !a.ReplaceAll:
		return refuse("old_string appears %d times in %s: include more surrounding text to make it unique, or set replace_all", n, a.Path)
	}
	if !a.ReplaceAll {
		n = 1
	}
	// Size the result before building it: a short file and a long
	// new_string must not allocate terabytes only to be refused.
	if size := int64(len(text)) + int64(n)*(int64(len(*a.NewString))-int64(len(*a.OldString))); size > sandbox.MaxFileSize {
		return refuse("the edited %s would be %d bytes, over the %d byte limit", a.Path, size, sandbox.MaxFileSize)
	}
	return text, n, nil
}

type globArgs struct {
	Pattern        string `json:"pattern"`
	IncludeIgnored bool   `json:"include_ignored,omitempty"`
}

func globFiles(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a globArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if a.Pattern == "" {
		return failf("glob needs a pattern, for example \"**/*.go\""), nil
	}
	if out, bad := badPath("glob", a.Pattern); bad {
		return out, nil
	}
	if out, ok, err := ts.gate(ctx, permission.Glob, "glob", a.Pattern, a); !ok {
		return out, err
	}
	files, more, err := ts.glob(ctx, a)
	if err != nil {
		if ctx.Err() != nil {
			return Output{}, ctx.Err()
		}
		return failf("%s", describeErr(err)), nil
	}
	if more > 0 {
		return structured(GlobResult{Files: files, More: more,
			Note: fmt.Sprintf("%d more matches not shown: narrow the pattern", more)}), nil
	}
	// An answer is bounded like a read: the first matches up to
	// MaxGlobBytes of names, and how many more there are. A whole
	// node_modules (90000 names) made one MCP message over the client's
	// line limit, which ended the session.
	size := 0
	for i, f := range files {
		if size += len(f) + 4; size > MaxGlobBytes { // the quotes and comma around it, roughly
			return structured(GlobResult{Files: files[:i], More: len(files) - i,
				Note: fmt.Sprintf("%d more matches not shown: narrow the pattern", len(files)-i)}), nil
		}
	}
	return structured(GlobResult{Files: files}), nil
}

// glob finds the files a glob call asks for: through the sandbox's
// search, which leaves out what .gitignore files name without walking it,
// unless the call includes ignored paths, asks for directories or the
// sandbox cannot search; then through Glob. more counts matches past
// sandbox.MaxSearchLimit that a search did not return.
func (ts *Toolset) glob(ctx context.Context, a globArgs) (files []string, more int, err error) {
	s, ok := ts.opts.Sandbox.(sandbox.Searcher)
	if a.IncludeIgnored || !ok || !ts.opts.Sandbox.Supports(sandbox.FeatureManage) || strings.HasSuffix(a.Pattern, "/") {
		files, err = ts.opts.Sandbox.Glob(ctx, a.Pattern)
		return files, 0, err
	}
	pat, err := sandbox.CleanSearchGlob(ts.opts.Sandbox.Root(), a.Pattern)
	if err != nil {
		return nil, 0, err
	}
	if _, _, err := sandbox.CleanPattern("/", pat); err != nil {
		return nil, 0, &fs.PathError{Op: "glob", Path: a.Pattern, Err: err}
	}
	res, err := s.Search(ctx, sandbox.SearchRequest{Glob: pat, Mode: sandbox.SearchFiles, Limit: sandbox.MaxSearchLimit})
	if err != nil {
		return nil, 0, err
	}
	// A search takes a pattern without "/" at any depth; glob, at the
	// root only: keep what the pattern itself matches.
	files = make([]string, 0, len(res.Files))
	for _, f := range res.Files {
		if ok, _ := doublestar.Match(pat, f.Path); ok {
			files = append(files, f.Path)
		}
	}
	return files, res.More, nil
}

// GlobResult is the glob tool's structured result.
type GlobResult struct {
	// Files are the matches shown, sorted.
	Files []string `json:"files"`
	// More counts the matches left out to bound the answer.
	More int    `json:"more,omitempty"`
	Note string `json:"note,omitempty"`
}

// WriteResult is write_file's structured result.
type WriteResult struct {
	OK    bool   `json:"ok"`
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

// EditResult is edit_file's structured result.
type EditResult struct {
	OK   bool   `json:"ok"`
	Path string `json:"path"`
	// Replacements counts the places changed.
	Replacements int `json:"replacements"`
}

// MaxGlobBytes bounds the names one glob answer lists (see globFiles).
const MaxGlobBytes = 100_000

// previewBytes bounds how much of a write a question shows.
const previewBytes = 600

// Question is what a person is asked about req, one line of printable
// text: the capability and detail (a path, a command, a URL; past
// permission.MaxAuditText bytes, its start, length and digest), the tool,
// and for write_file and edit_file what the call writes, quoted and cut
// to a preview with its size, so a yes never covers content nobody saw.
// Text from the agent cannot hide in it (see permission.Printable).
func Question(req permission.Request) string {
	q := fmt.Sprintf("allow %s? %s (tool %s)", req.Capability, permission.Printable(permission.Shorten(req.Detail, permission.MaxAuditText)), permission.Printable(req.Tool))
	switch req.Tool {
	case "write_file":
		var a writeArgs
		if json.Unmarshal(req.Args, &a) == nil && a.Content != nil {
			q += fmt.Sprintf(": writes %d bytes: %s", len(*a.Content), preview(*a.Content))
		}
	case "edit_file":
		var a editArgs
		if json.Unmarshal(req.Args, &a) == nil && a.OldString != nil && a.NewString != nil {
			q += fmt.Sprintf(": replaces %s with %s", preview(*a.OldString), preview(*a.NewString))
			if a.ReplaceAll {
				q += " everywhere"
			}
		}
	}
	return q
}

// preview is s quoted, cut to previewBytes (on a character boundary) with
// what was left out.
func preview(s string) string {
	if len(s) <= previewBytes {
		return strconv.Quote(s)
	}
	cut := previewBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d more bytes)", strconv.Quote(s[:cut]), len(s)-cut)
}
