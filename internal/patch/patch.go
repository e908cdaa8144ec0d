// Package patch parses unified diffs — as git diff, git format-patch and
// diff -u print them — and applies them to file contents.
//
// Parse takes a whole patch and checks it before anything acts on it: its
// size (MaxSize), every path (relative, no "..", no NUL), every hunk's
// counts against its lines, and that no file is patched twice; binary
// patches and copies are refused. Apply then applies one file's hunks to
// its content: each hunk where its header says, or else at the nearest
// place its old lines match exactly (an offset, never fuzz).
package patch

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/sandbox"
)

// MaxSize is the largest patch Parse takes, in bytes.
const MaxSize = 8 << 20

// Op is what a patch does to one file.
type Op string

// The operations of a file's patch.
const (
	Add    Op = "add"
	Modify Op = "modify"
	Delete Op = "delete"
	Rename Op = "rename"
)

// File is one file's part of a patch.
type File struct {
	Op Op
	// OldPath is the file's path before the patch ("" for Add); NewPath
	// after it ("" for Delete). They are equal for Modify.
	OldPath, NewPath string
	// Hunks are the file's changes in patch order; none for a pure
	// rename, a mode change or an empty file added or deleted.
	Hunks []Hunk
	// Line is the patch line (from 1) where the file's header starts.
	Line int
}

// Path is the path the file has after the patch, or for Delete the one it
// had before.
func (f *File) Path() string {
	if f.Op == Delete {
		return f.OldPath
	}
	return f.NewPath
}

// Stats counts the lines the file's hunks add and remove.
func (f *File) Stats() (added, removed int) {
	for _, h := range f.Hunks {
		for _, l := range h.Lines {
			switch l.Kind {
			case '+':
				added++
			case '-':
				removed++
			}
		}
	}
	return added, removed
}

// Hunk is one "@@ -l,n +l,n @@" section of a file's patch.
type Hunk struct {
	// OldStart and NewStart are the first line of the hunk in the old
	// and the new file, from 1 (with a count of 0, the line after which
	// it applies); OldCount and NewCount how many lines each side has.
	OldStart, OldCount, NewStart, NewCount int
	// Section is the text after the closing "@@" (a function name).
	Section string
	Lines   []Line
	// Line is the patch line of the "@@" header.
	Line int
}

// Line is one line of a hunk.
type Line struct {
	// Kind is ' ' (context), '-' (removed) or '+' (added).
	Kind byte
	// Text is the line without its line break.
	Text string
	// NoEOL: the line has no line break ("\ No newline at end of file"
	// follows it in the patch).
	NoEOL bool
}

// Error is a patch that cannot be parsed or applied, with where.
type Error struct {
	// Line is the patch line the problem is on (0 when none).
	Line int
	// Path names the file, when the problem is one file's.
	Path string
	// Hunk numbers the hunk within the file's patch, from 1 (0 when the
	// problem is not one hunk's).
	Hunk int
	Msg  string
}

func (e *Error) Error() string {
	switch {
	case e.Hunk > 0:
		return fmt.Sprintf("%s: hunk %d (patch line %d) %s", pathText(e.Path), e.Hunk, e.Line, e.Msg)
	case e.Path != "":
		return fmt.Sprintf("patch line %d: %s: %s", e.Line, pathText(e.Path), e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("patch line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// Parse reads a patch: the file sections of a unified diff, with or
// without git's "diff --git" headers, after any leading text (a commit
// message, a diffstat). It fails on anything it cannot apply exactly
// (see the package documentation); errors are *Error.
func Parse(data []byte) ([]*File, error) {
	if len(data) > MaxSize {
		return nil, &Error{Msg: fmt.Sprintf("the patch is %d bytes, over the %d byte limit: split it into smaller patches", len(data), MaxSize)}
	}
	p := &parser{lines: splitPatch(data)}
	var files []*File
	for p.i < len(p.lines) {
		l := p.header(p.i)
		var f *File
		var err error
		switch {
		case strings.HasPrefix(l, "diff --git "):
			f, err = p.gitFile()
		case strings.HasPrefix(l, "--- ") && p.i+1 < len(p.lines) && strings.HasPrefix(p.header(p.i+1), "+++ "):
			f, err = p.plainFile()
		case strings.HasPrefix(l, "diff --cc ") || strings.HasPrefix(l, "diff --combined ") || strings.HasPrefix(l, "@@@ "):
			err = p.errorf("combined diffs (of merges) cannot be applied: give a diff against one parent")
		case isBinaryLine(l):
			err = p.errorf("binary patches cannot be applied (%s): give the file's new content another way (write_file)", cut(l, 80))
		case strings.HasPrefix(l, "@@ "):
			err = p.errorf("a hunk without a file header before it: start each file with --- a/path and +++ b/path lines")
		default:
			p.i++ // leading or trailing text
			continue
		}
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, &Error{Msg: "no file changes found in the patch: give a unified diff (--- a/path, +++ b/path, then @@ hunks)"}
	}
	if err := checkFiles(files); err != nil {
		return nil, err
	}
	return files, nil
}

type parser struct {
	lines []string
	i     int // the next line
}

// splitPatch cuts data into lines without their "\n".
func splitPatch(data []byte) []string {
	s := string(data)
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// header is line i as a header: without the carriage returns a patch
// with CRLF line breaks ends it with.
func (p *parser) header(i int) string { return strings.TrimRight(p.lines[i], "\r") }

func (p *parser) errorf(format string, args ...any) error {
	return &Error{Line: p.i + 1, Msg: fmt.Sprintf(format, args...)}
}

func isBinaryLine(l string) bool {
	return l == "GIT binary patch" || (strings.HasPrefix(l, "Binary files ") && strings.HasSuffix(l, " differ"))
}

const devNull = "/dev/null"

// gitFile reads a file's patch that starts with "diff --git".
func (p *parser) gitFile() (*File, error) {
	start := p.i
	f := &File{Line: start + 1}
	a, b := splitGitHeader(strings.TrimPrefix(p.header(start), "diff --git "))
	if a != "" && b != "" {
		a, b = stripPrefixes(a, b)
	}
	var isNew, isDeleted bool
	var renameFrom, renameTo string
	var oldName, newName string
	haveNames := false
	p.i++
headers:
	for p.i < len(p.lines) {
		l := p.header(p.i)
		switch {
		case strings.HasPrefix(l, "old mode "), strings.HasPrefix(l, "new mode "),
			strings.HasPrefix(l, "similarity index "), strings.HasPrefix(l, "dissimilarity index "),
			strings.HasPrefix(l, "index "):
		case strings.HasPrefix(l, "new file mode "):
			isNew = true
		case strings.HasPrefix(l, "deleted file mode "):
			isDeleted = true
		case strings.HasPrefix(l, "rename from "):
			var err error
			if renameFrom, err = p.name(strings.TrimPrefix(l, "rename from "), p.i); err != nil {
				return nil, err
			}
		case strings.HasPrefix(l, "rename to "):
			var err error
			if renameTo, err = p.name(strings.TrimPrefix(l, "rename to "), p.i); err != nil {
				return nil, err
			}
		case strings.HasPrefix(l, "copy from "), strings.HasPrefix(l, "copy to "):
			return nil, p.errorf("copies cannot be applied: give the copy as a new file (--- /dev/null)")
		case isBinaryLine(l):
			return nil, p.fileErr(p.i, firstNonEmpty(b, a), "binary patches cannot be applied (%s): give the file's new content another way (write_file)", cut(l, 80))
		case strings.HasPrefix(l, "--- "):
			if p.i+1 >= len(p.lines) || !strings.HasPrefix(p.header(p.i+1), "+++ ") {
				return nil, p.errorf("a --- line without a +++ line after it")
			}
			var err error
			if oldName, newName, err = p.names(); err != nil {
				return nil, err
			}
			haveNames = true
			break headers
		default:
			break headers
		}
		p.i++
	}
	switch {
	case renameFrom != "" || renameTo != "":
		switch {
		case renameFrom == "" || renameTo == "":
			return nil, p.fileErr(start, firstNonEmpty(renameFrom, renameTo), "a rename needs both rename from and rename to lines")
		case isNew || isDeleted:
			return nil, p.fileErr(start, renameFrom, "a rename cannot also be a new or deleted file: give the rename and the new or deleted file as two patches")
		case path.Clean(renameFrom) == path.Clean(renameTo):
			return nil, p.fileErr(start, renameFrom, "the file is renamed to its own name: leave out the rename lines")
		case haveNames && (oldName != renameFrom || newName != renameTo):
			return nil, p.fileErr(start, renameFrom, "the --- and +++ names (%s, %s) are not the rename's (%s, %s): make them agree", show(oldName), show(newName), show(renameFrom), show(renameTo))
		}
		f.Op, f.OldPath, f.NewPath = Rename, renameFrom, renameTo
	case isNew || (haveNames && oldName == devNull):
		f.Op, f.NewPath = Add, firstNonEmpty(newName, b)
	case isDeleted || (haveNames && newName == devNull):
		f.Op, f.OldPath = Delete, firstNonEmpty(oldName, a)
	case haveNames:
		if oldName != newName {
			return nil, p.fileErr(start, newName, "the old and new names differ (%s, %s) without rename from and rename to lines: add them, or give one name", show(oldName), show(newName))
		}
		f.Op, f.OldPath, f.NewPath = Modify, oldName, newName
	default:
		if a == "" || a != b {
			return nil, p.fileErr(start, "", "cannot tell the file's name from the diff --git line: add --- a/path and +++ b/path lines")
		}
		f.Op, f.OldPath, f.NewPath = Modify, a, b
	}
	if f.Path() == devNull || f.Path() == "" {
		return nil, p.fileErr(start, "", "the file's path is empty: give it in the --- a/path and +++ b/path lines")
	}
	if haveNames {
		p.i += 2
		if err := p.hunks(f); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// plainFile reads a file's patch that starts with "--- " (diff -u).
func (p *parser) plainFile() (*File, error) {
	start := p.i
	f := &File{Line: start + 1}
	oldName, newName, err := p.names()
	if err != nil {
		return nil, err
	}
	switch {
	case oldName == devNull && newName == devNull:
		return nil, p.fileErr(start, "", "both names are /dev/null")
	case oldName == devNull:
		f.Op, f.NewPath = Add, newName
	case newName == devNull:
		f.Op, f.OldPath = Delete, oldName
	default:
		// diff -u a.txt.orig a.txt: the shorter name is the file, the
		// old one when they are as long (the rule of patch(1) when
		// both could be).
		name := oldName
		if len(newName) < len(oldName) {
			name = newName
		}
		f.Op, f.OldPath, f.NewPath = Modify, name, name
	}
	p.i += 2
	return f, p.hunks(f)
}

// names reads the "--- " and "+++ " lines at p.i, stripping git's a/ and
// b/ prefixes when both carry them (-p1), else keeping the names as they
// are.
func (p *parser) names() (string, string, error) {
	oldName, err := p.name(strings.TrimPrefix(p.header(p.i), "--- "), p.i)
	if err != nil {
		return "", "", err
	}
	newName, err := p.name(strings.TrimPrefix(p.header(p.i+1), "+++ "), p.i+1)
	if err != nil {
		return "", "", err
	}
	oldName, newName = stripPrefixes(oldName, newName)
	return oldName, newName, nil
}

// name reads a file name of a header line: C-quoted as git quotes names
// with unusual characters, or else up to a tab (diff -u puts the time
// after one; git, after names with spaces).
func (p *parser) name(s string, line int) (string, error) {
	if strings.HasPrefix(s, `"`) {
		name, _, err := unquote(s)
		if err != nil {
			return "", &Error{Line: line + 1, Msg: err.Error()}
		}
		return name, nil
	}
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	return s, nil
}

// stripPrefixes drops git's a/ and b/ when both names carry them (or one
// is /dev/null and the other does).
func stripPrefixes(a, b string) (string, string) {
	if a == devNull && b == devNull {
		return a, b
	}
	okA := a == devNull || strings.HasPrefix(a, "a/")
	okB := b == devNull || strings.HasPrefix(b, "b/")
	if !okA || !okB {
		return a, b
	}
	if a != devNull {
		a = a[2:]
	}
	if b != devNull {
		b = b[2:]
	}
	return a, b
}

// splitGitHeader finds the two names of "diff --git a/x b/y" (after its
// "diff --git "), quoted or not; unquoted names with spaces are found
// when they are the same (a/NAME b/NAME) or " b/" occurs once. It
// returns "", "" when it cannot tell.
func splitGitHeader(s string) (string, string) {
	if strings.HasPrefix(s, `"`) {
		a, rest, err := unquote(s)
		if err != nil || !strings.HasPrefix(rest, " ") {
			return "", ""
		}
		rest = rest[1:]
		if strings.HasPrefix(rest, `"`) {
			b, tail, err := unquote(rest)
			if err != nil || tail != "" {
				return "", ""
			}
			return a, b
		}
		return a, rest
	}
	if i := strings.Index(s, ` "`); i >= 0 {
		if b, tail, err := unquote(s[i+1:]); err == nil && tail == "" {
			return s[:i], b
		}
	}
	if n := len(s); n >= 5 && (n-1)%2 == 0 {
		half := (n - 1) / 2
		if a, b := s[:half], s[half+1:]; s[half] == ' ' && strings.HasPrefix(a, "a/") && strings.HasPrefix(b, "b/") && a[2:] == b[2:] {
			return a, b
		}
	}
	if strings.Count(s, " b/") == 1 {
		i := strings.Index(s, " b/")
		return s[:i], s[i+1:]
	}
	return "", ""
}

// hunks reads the hunks of f at p.i. A file with a ---/+++ header needs
// at least one.
func (p *parser) hunks(f *File) error {
	for p.i < len(p.lines) && strings.HasPrefix(p.header(p.i), "@@") {
		if strings.HasPrefix(p.header(p.i), "@@@") {
			return p.errorf("combined diffs (of merges) cannot be applied: give a diff against one parent")
		}
		h, err := p.hunk(f, len(f.Hunks)+1)
		if err != nil {
			return err
		}
		f.Hunks = append(f.Hunks, h)
	}
	if len(f.Hunks) == 0 {
		if p.i < len(p.lines) && isBinaryLine(p.header(p.i)) {
			return p.fileErr(p.i, f.Path(), "binary patches cannot be applied (%s): give the file's new content another way (write_file)", cut(p.header(p.i), 80))
		}
		return p.fileErr(f.Line-1, f.Path(), "the file's --- and +++ lines have no @@ hunk after them")
	}
	return nil
}

// maxLineNumber bounds the numbers of a hunk header: no file a sandbox
// reads has more lines.
const maxLineNumber = sandbox.MaxFileSize

// hunk reads one hunk at p.i, the n-th of f.
func (p *parser) hunk(f *File, n int) (Hunk, error) {
	head := p.header(p.i)
	h := Hunk{Line: p.i + 1}
	bad := func(format string, args ...any) (Hunk, error) {
		return Hunk{}, &Error{Line: h.Line, Path: f.Path(), Msg: fmt.Sprintf("hunk %d: ", n) + fmt.Sprintf(format, args...)}
	}
	var ok bool
	if h.OldStart, h.OldCount, h.NewStart, h.NewCount, h.Section, ok = parseHunkHeader(head); !ok {
		return bad("bad hunk header %q: want @@ -start,count +start,count @@", cut(head, 80))
	}
	if (h.OldStart == 0 && h.OldCount > 0) || (h.NewStart == 0 && h.NewCount > 0) {
		return bad("a hunk with lines cannot start at line 0 (%s)", cut(head, 80))
	}
	p.i++
	oldLeft, newLeft := h.OldCount, h.NewCount
	counts := func() string {
		return fmt.Sprintf("its header @@ -%d,%d +%d,%d @@ counts %d old and %d new lines", h.OldStart, h.OldCount, h.NewStart, h.NewCount, h.OldCount, h.NewCount)
	}
	for oldLeft > 0 || newLeft > 0 {
		if p.i >= len(p.lines) {
			return bad("the patch ends inside the hunk: %s, %d old and %d new are missing; fix the counts", counts(), oldLeft, newLeft)
		}
		l := p.lines[p.i]
		kind := byte(' ')
		text := ""
		if l != "" && l != "\r" {
			kind, text = l[0], l[1:]
		}
		switch kind {
		case ' ':
			oldLeft--
			newLeft--
		case '-':
			oldLeft--
		case '+':
			newLeft--
		case '\\':
			if len(h.Lines) == 0 {
				return bad("a \"\\ No newline\" line before any line of the hunk")
			}
			h.Lines[len(h.Lines)-1].NoEOL = true
			p.i++
			continue
		default:
			return bad("line %d is not part of the hunk (it does not start with ' ', '-' or '+'), but %s: fix the counts", p.i+1, counts())
		}
		if oldLeft < 0 || newLeft < 0 {
			return bad("line %d is one more than %s: fix the counts", p.i+1, counts())
		}
		h.Lines = append(h.Lines, Line{Kind: kind, Text: text})
		p.i++
	}
	if p.i < len(p.lines) && strings.HasPrefix(p.lines[p.i], `\`) && len(h.Lines) > 0 {
		h.Lines[len(h.Lines)-1].NoEOL = true
		p.i++
	}
	if p.i < len(p.lines) {
		if l := p.header(p.i); len(l) > 0 && strings.IndexByte(" +-", l[0]) >= 0 && !endsHunks(l) {
			return bad("line %d looks like a hunk line, but %s: fix the counts", p.i+1, counts())
		}
	}
	if err := checkNoEOL(h); err != "" {
		return bad("%s", err)
	}
	switch {
	case f.Op == Add && h.OldCount > 0:
		return bad("the file is new, but the hunk has old lines (context or removed)")
	case f.Op == Delete && h.NewCount > 0:
		return bad("the file is deleted, but the hunk has new lines (context or added)")
	}
	return h, nil
}

// endsHunks reports whether l, right after a hunk, is not one of its
// lines: the next file's header, or an email signature's "-- ".
func endsHunks(l string) bool {
	return l == "-- " || l == "--" || l == "---" || strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "+++ ")
}

// checkNoEOL: a line without a line break can only be the last of its
// side of the hunk.
func checkNoEOL(h Hunk) string {
	lastOld, lastNew := -1, -1
	for i, l := range h.Lines {
		if l.Kind != '+' {
			lastOld = i
		}
		if l.Kind != '-' {
			lastNew = i
		}
	}
	for i, l := range h.Lines {
		if l.NoEOL && i != lastOld && i != lastNew {
			return fmt.Sprintf("\"\\ No newline at end of file\" follows a line that is not the last of its side of the hunk (%q)", cut(l.Text, 40))
		}
	}
	return ""
}

// parseHunkHeader reads "@@ -l[,n] +l[,n] @@[ section]"; a count left
// out is 1.
func parseHunkHeader(s string) (oldStart, oldCount, newStart, newCount int, section string, ok bool) {
	rest, found := strings.CutPrefix(s, "@@ -")
	if !found {
		return
	}
	if oldStart, oldCount, rest, ok = parseRange(rest); !ok {
		return
	}
	if rest, found = strings.CutPrefix(rest, " +"); !found {
		return 0, 0, 0, 0, "", false
	}
	if newStart, newCount, rest, ok = parseRange(rest); !ok {
		return
	}
	if rest, found = strings.CutPrefix(rest, " @@"); !found {
		return 0, 0, 0, 0, "", false
	}
	if rest != "" && rest[0] != ' ' {
		return 0, 0, 0, 0, "", false
	}
	return oldStart, oldCount, newStart, newCount, strings.TrimPrefix(rest, " "), true
}

func parseRange(s string) (start, count int, rest string, ok bool) {
	start, s, ok = parseNumber(s)
	if !ok {
		return
	}
	count = 1
	if after, found := strings.CutPrefix(s, ","); found {
		if count, s, ok = parseNumber(after); !ok {
			return
		}
	}
	return start, count, s, true
}

func parseNumber(s string) (int, string, bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i > 10 {
		return 0, s, false
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil || n > maxLineNumber {
		return 0, s, false
	}
	return n, s[i:], true
}

func (p *parser) fileErr(line int, name, format string, args ...any) error {
	return &Error{Line: line + 1, Path: name, Msg: fmt.Sprintf(format, args...)}
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// checkFiles checks every path of files (checkPath) and that no file is
// patched twice.
func checkFiles(files []*File) error {
	seen := map[string]int{}
	for _, f := range files {
		var names []string
		switch f.Op {
		case Add, Modify:
			names = []string{f.NewPath}
		case Delete:
			names = []string{f.OldPath}
		default:
			names = []string{f.OldPath, f.NewPath}
		}
		for _, name := range names {
			if msg := checkPath(name); msg != "" {
				return &Error{Line: f.Line, Msg: msg}
			}
			key := path.Clean(name)
			if first, dup := seen[key]; dup {
				return &Error{Line: f.Line, Path: name, Msg: fmt.Sprintf("the file is patched a second time (first at patch line %d): give each file's changes once", first)}
			}
			seen[key] = f.Line
		}
	}
	return nil
}

// checkPath says what is wrong with a patch's path, or "": it must be
// relative, inside the root as written (no ".." component), name a file
// (not end in "/"), hold no NUL and be at most sandbox.MaxPathLen bytes.
// A path that is too long is not quoted.
func checkPath(name string) string {
	switch {
	case name == "":
		return "a file's path is empty: give it in the --- a/path and +++ b/path lines"
	case len(name) > sandbox.MaxPathLen:
		return fmt.Sprintf("a path of %d bytes, longer than the %d any sandbox takes", len(name), sandbox.MaxPathLen)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Sprintf("the path %s holds a NUL byte, which no file name can", show(name))
	case strings.HasPrefix(name, "/"):
		return fmt.Sprintf("the path %s is absolute: use paths relative to the sandbox root (a/path, b/path)", show(name))
	case strings.HasSuffix(name, "/") || path.Clean(name) == ".":
		return fmt.Sprintf("the path %s names a directory, not a file", show(name))
	}
	for c := range strings.SplitSeq(name, "/") {
		if c == ".." {
			return fmt.Sprintf("the path %s has a \"..\" component, which could escape the sandbox root: use paths inside it", show(name))
		}
	}
	return ""
}

// pathText is a path for a message: as it is when it is short and
// printable, else quoted and cut, so an error stays one short line.
func pathText(name string) string {
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError || r == '"' {
			return show(name)
		}
	}
	return cut(name, 200)
}

// show is name quoted and cut for a message.
func show(name string) string { return strconv.Quote(cut(name, 100)) }

// cut shortens s to at most n bytes for a message.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// unquote reads a C-quoted name as git writes it ("a/tab\there",
// octal escapes for other bytes) at the start of s, and returns it and
// what follows the closing quote.
func unquote(s string) (string, string, error) {
	var b bytes.Buffer
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			i++
			if i >= len(s) {
				break
			}
			switch e := s[i]; e {
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'v':
				b.WriteByte('\v')
			case '\\', '"':
				b.WriteByte(e)
			case '0', '1', '2', '3':
				if i+2 >= len(s) || !isOctal(s[i+1]) || !isOctal(s[i+2]) {
					return "", "", fmt.Errorf("bad octal escape in the quoted name %s", cut(s, 80))
				}
				b.WriteByte((e-'0')<<6 | (s[i+1]-'0')<<3 | (s[i+2] - '0'))
				i += 2
			default:
				return "", "", fmt.Errorf("unknown escape \\%c in the quoted name %s", e, cut(s, 80))
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("the quoted name %s has no closing quote", cut(s, 80))
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
