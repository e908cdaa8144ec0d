package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Write, Tool: "write_file", Detail: a.Path, Paths: ts.rulePaths(a.Path)}, a); !ok {
		return out, err
	}
	if err := ts.opts.Sandbox.Write(ctx, a.Path, []byte(*a.Content)); err != nil {
		return failf("%s", describeErr(err)), nil
	}
	ts.afterWrite(ctx, a.Path)
	return structured(WriteResult{OK: true, Path: a.Path, Bytes: len(*a.Content)}), nil
}

type globArgs struct {
	Pattern        string `json:"pattern"`
	IncludeIgnored bool   `json:"include_ignored,omitempty"`
}

// globBase is the directory part of a glob pattern: its elements before
// the first that holds a wildcard ("." when that is the first).
func globBase(pattern string) string {
	segs := strings.Split(pattern, "/")
	n := 0
	for n < len(segs)-1 && !strings.ContainsAny(segs[n], "*?[{\\") {
		n++
	}
	if base := strings.Join(segs[:n], "/"); base != "" || strings.HasPrefix(pattern, "/") {
		if base == "" {
			return "/"
		}
		return base
	}
	return "."
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
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Glob, Tool: "glob", Detail: a.Pattern, Paths: ts.rulePaths(globBase(a.Pattern))}, a); !ok {
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
	// Replacements counts the places changed, over all edits.
	Replacements int `json:"replacements"`
	// DryRun reports that nothing was written: the diff is what the
	// edits would do.
	DryRun bool `json:"dry_run,omitempty"`
	// Diff is the change as a unified diff (a/path to b/path), at most
	// MaxDiffBytes; LinesAdded and LinesDeleted count all of it, also
	// what a cut left out.
	Diff         string `json:"diff"`
	LinesAdded   int    `json:"lines_added"`
	LinesDeleted int    `json:"lines_deleted"`
	// DiffCut reports that Diff was cut at MaxDiffBytes.
	DiffCut bool `json:"diff_cut,omitempty"`
}

// MaxGlobBytes bounds the names one glob answer lists (see globFiles).
const MaxGlobBytes = 100_000

// previewBytes bounds how much of a write a question shows.
const previewBytes = 600

// Question is what a person is asked about req, one line of printable
// text: the capability and detail (a path, a command, a URL; past
// permission.MaxAuditText bytes, its start, length and digest), the tool,
// and for write_file, edit_file and apply_patch what the call writes, quoted and cut
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
	case "apply_patch":
		var a patchArgs
		if json.Unmarshal(req.Args, &a) == nil {
			q += fmt.Sprintf(": applies a patch of %d bytes: %s", len(a.Patch), preview(a.Patch))
		}
	case "edit_file":
		var a editArgs
		if json.Unmarshal(req.Args, &a) != nil {
			break
		}
		edits, err := a.list()
		if err != nil {
			break
		}
		// Every edit is shown; the more there are, the shorter each
		// preview (each still says how much it left out).
		room := max(previewBytes/len(edits), 40)
		for i, e := range edits {
			q += fmt.Sprintf(": %sreplaces %s with %s", editLabel(len(a.Edits), i), previewN(*e.OldString, room), previewN(*e.NewString, room))
			if e.ReplaceAll {
				q += " everywhere"
			}
		}
	}
	return q
}

// preview is s quoted, cut to previewBytes (on a character boundary) with
// what was left out.
func preview(s string) string { return previewN(s, previewBytes) }

// previewN is s quoted, cut to n bytes (on a character boundary) with
// what was left out.
func previewN(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d more bytes)", strconv.Quote(s[:cut]), len(s)-cut)
}
