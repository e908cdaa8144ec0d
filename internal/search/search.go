// Package search is the search engine behind hutch's grep and glob: one
// walk of a tree, honouring .gitignore, that selects files by a glob and
// finds the lines matching a regular expression in them. Every tier runs
// the same engine over its own [FS], so a search means the same everywhere.
//
// # The walk
//
// The walk starts at the request's Dir; a Dir naming a file searches that
// file alone (its Glob and the ignore rules do not apply: naming it is
// asking for it). Dir itself may be a symbolic link inside the root; below
// it, links to directories are never followed, and entries named ".git"
// (directories, or the files of worktrees and submodules) are never entered
// or searched. An explicit Dir inside an ignored directory, or inside .git,
// is still walked; the rules apply below it. Entries that are not regular
// files or links (FIFOs, sockets, devices) are never opened. A link to a
// file is searched when [FS.Open] succeeds and yields a regular file; one
// that dangles, leads out of the root or names a directory is left out
// silently.
//
// Directories are walked in an order that visits paths in byte order, so
// results come sorted by path (then line) and a Limit keeps the first ones
// by path: the result is deterministic.
//
// # Ignored paths
//
// Unless IncludeIgnored, paths named by .gitignore files (and by
// .git/info/exclude at the root) are left out, with git's full rules (see
// gitignore.go); an ignored directory is not walked at all, which is what
// keeps node_modules cheap. The rules apply whether or not the root is a git
// repository, and a nested repository's files are walked with the parent's
// rules too. A .gitignore is read only when it is a regular file (git does
// not follow a linked one either; those of Dir's ancestors are opened
// without listing their directories, so a link to a file inside the root is
// followed there) of at most [MaxIgnoreFile] bytes; a larger one is
// disregarded.
//
// # Selecting files
//
// Glob uses doublestar syntax against the root-relative path; a pattern
// without "/" matches the base name at any depth ("*.go"). A pattern whose
// leading elements have no wildcard ("internal/**/*.go") starts the walk
// there instead of at Dir, with the same result.
//
// # Matching lines
//
// Pattern is RE2 syntax (Go's regexp), matched line by line as grep -n
// does: "^" and "$" (and \A, \z) are the ends of a line, and a match never
// spans a newline. Literal takes it as plain text; IgnoreCase folds case.
// Files are read whole and searched for the pattern (or a literal every
// match must contain) before any line is split, so a file without a match
// costs a memchr-speed scan. A file with a NUL byte in its first 8000 bytes
// is binary (git's and grep's rule) and skipped, as are files larger than
// sandbox.MaxFileSize and files that cannot be opened or read; Skipped
// counts them (and the subdirectories that cannot be listed). Lines are
// shown with a trailing "\r" removed, invalid UTF-8 as U+FFFD, and cut to
// about sandbox.MaxSearchLine bytes (around the match, for the matching
// line) with a "… [line cut, N bytes]" suffix.
//
// # Modes
//
//   - content: each matching line with up to Context lines before and after.
//     Context is not repeated: a match's Before starts after the previous
//     match's After (or the previous match), and its After stops before the
//     next match, so the matches of a file, printed in order with their
//     context, read like grep -C.
//   - files: the matching files; with no Pattern, every selected file,
//     without opening it (so binary files are listed too, and Searched is
//     0).
//   - count: each matching file with its number of matching lines.
//
// # Bounds
//
// Limit bounds the matches (content) or files (files, count) returned, and
// sandbox.MaxSearchBytes the text of what is returned (paths and lines,
// context included); what is found beyond either is counted in More. Once
// the result is full, the search keeps counting to More only until More
// reaches 100 times Limit, or the walk or read budget below runs out: More
// is then a lower bound (the result type has no field to say so; see the
// package's report).
//
// The walk may list at most [MaxWalkEntries] directory entries and read at
// most [MaxReadBytes] bytes; exceeding either before the result is full is an
// error matching sandbox.ErrTooLarge that says to narrow Dir or Glob. The
// context is checked between files and within large ones; a cancelled
// search returns the context's error.
//
// Files are read and searched by runtime.GOMAXPROCS(0) workers; the output
// does not depend on their scheduling.
package search

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/hutchsandbox/hutch/internal/cfgerr"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

// FS is a tree rooted at the sandbox root that refuses paths leaving it.
// Names are root-relative slash paths, "." the root, as Validate leaves
// them.
type FS interface {
	// ReadDir lists a directory. Entries' Type() is the lstat type
	// (symbolic links are fs.ModeSymlink). The order does not matter.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Open opens a file (or directory) for reading, following links
	// inside the root and failing for links leading out, and never
	// blocking on a FIFO. Errors should match sandbox.ErrNotFound (or
	// fs.ErrNotExist) for a missing path and sandbox.ErrEscape for a
	// link leading out.
	Open(name string) (fs.File, error)
}

// Bounds of one search, besides those of package sandbox.
const (
	// MaxWalkEntries bounds the directory entries one search lists.
	MaxWalkEntries = 2_000_000
	// MaxReadBytes bounds the bytes one search reads.
	MaxReadBytes = 2 << 30
	// MaxIgnoreFile is the largest .gitignore (or info/exclude) read.
	MaxIgnoreFile = 1 << 20
	// MaxPattern is the longest Pattern, in bytes.
	MaxPattern = 16 << 10
	// maxGlobAlternatives bounds the combinations of a Glob's {a,b}
	// groups, as Glob's tierkit.MaxGlobAlternatives does.
	maxGlobAlternatives = tierkit.MaxGlobAlternatives
	// moreFactor: once the result is full, counting stops at More =
	// moreFactor * Limit.
	moreFactor = 100
)

// Validate checks req and fills its defaults: Dir "" becomes "." and is
// cleaned, Glob is cleaned, Mode defaults to content (files without a
// Pattern), Limit 0 becomes sandbox.DefaultSearchLimit and is clamped to
// sandbox.MaxSearchLimit, Context is clamped to sandbox.MaxSearchContext, and
// Pattern must compile.
//
// Dir and Glob must be root-relative: the tier, which knows its root, turns
// absolute ones into relative ones with sandbox.Clean and
// sandbox.CleanPattern first; an absolute one here is an error. A path
// leaving the root is an error matching sandbox.ErrEscape, a malformed path
// or glob sandbox.ErrInvalidPath, anything else wrong sandbox.ErrConfig; each
// message is one line naming the problem and the fix. Run validates its
// request itself.
func Validate(req sandbox.SearchRequest) (sandbox.SearchRequest, error) {
	req, _, err := prepare(req)
	return req, err
}

func fail(kind error, format string, args ...any) error {
	return cfgerr.Under(kind, fmt.Errorf("search: "+format, args...))
}

// prepare is Validate, also returning the compiled pattern (nil when there
// is none).
func prepare(req sandbox.SearchRequest) (sandbox.SearchRequest, *matcher, error) {
	if req.Dir == "" {
		req.Dir = "."
	} else {
		if path.IsAbs(req.Dir) {
			return req, nil, fail(sandbox.ErrInvalidPath, "dir %q is absolute: give it relative to the root", req.Dir)
		}
		d, err := sandbox.Clean("/", req.Dir)
		switch {
		case errors.Is(err, sandbox.ErrEscape):
			return req, nil, fail(sandbox.ErrEscape, "dir %q leaves the sandbox root: give a directory inside it", req.Dir)
		case err != nil:
			return req, nil, fail(sandbox.ErrInvalidPath, "dir %q is not a valid path (too long, or a NUL byte)", req.Dir)
		}
		req.Dir = d
	}
	if req.Glob != "" {
		if path.IsAbs(req.Glob) {
			return req, nil, fail(sandbox.ErrInvalidPath, "glob %q is absolute: give it relative to the root", req.Glob)
		}
		g, dirsOnly, err := sandbox.CleanPattern("/", req.Glob)
		switch {
		case errors.Is(err, sandbox.ErrEscape):
			return req, nil, fail(sandbox.ErrEscape, "glob %q leaves the sandbox root: give a pattern inside it", req.Glob)
		case err != nil:
			return req, nil, fail(sandbox.ErrInvalidPath, "glob %q is not a valid pattern: check its brackets, braces and escapes", req.Glob)
		case dirsOnly:
			return req, nil, fail(sandbox.ErrInvalidPath, "glob %q ends in \"/\", which selects directories, and a search selects files: use dir %q, or glob %q", req.Glob, g, g+"/**")
		case g == ".":
			return req, nil, fail(sandbox.ErrInvalidPath, "glob %q names the root, not files: use \"**\" for every file", req.Glob)
		}
		if n := tierkit.GlobCombinations(g); n > maxGlobAlternatives {
			return req, nil, fail(sandbox.ErrInvalidPath, "glob %q: its {a,b} groups make %d combinations, more than %d: simplify the pattern", req.Glob, n, maxGlobAlternatives)
		}
		req.Glob = g
	}
	switch req.Mode {
	case "":
		req.Mode = sandbox.SearchContent
		if req.Pattern == "" {
			req.Mode = sandbox.SearchFiles
		}
	case sandbox.SearchContent, sandbox.SearchFiles, sandbox.SearchCount:
	default:
		return req, nil, fail(sandbox.ErrConfig, "mode %q is unknown: use %q, %q or %q", req.Mode, sandbox.SearchContent, sandbox.SearchFiles, sandbox.SearchCount)
	}
	switch {
	case req.Limit < 0:
		return req, nil, fail(sandbox.ErrConfig, "limit %d is negative: give 0 for the default (%d), at most %d", req.Limit, sandbox.DefaultSearchLimit, sandbox.MaxSearchLimit)
	case req.Limit == 0:
		req.Limit = sandbox.DefaultSearchLimit
	case req.Limit > sandbox.MaxSearchLimit:
		req.Limit = sandbox.MaxSearchLimit
	}
	switch {
	case req.Context < 0:
		return req, nil, fail(sandbox.ErrConfig, "context %d is negative: give the number of lines to show around each match, at most %d", req.Context, sandbox.MaxSearchContext)
	case req.Context > sandbox.MaxSearchContext:
		req.Context = sandbox.MaxSearchContext
	}
	if req.Pattern == "" {
		if req.Mode != sandbox.SearchFiles {
			return req, nil, fail(sandbox.ErrConfig, "mode %q needs a pattern: give one, or use mode %q to list files", req.Mode, sandbox.SearchFiles)
		}
		return req, nil, nil
	}
	if len(req.Pattern) > MaxPattern {
		return req, nil, fail(sandbox.ErrConfig, "pattern is %d bytes, more than %d: search for a shorter part of it", len(req.Pattern), MaxPattern)
	}
	m, err := compile(req.Pattern, req.Literal, req.IgnoreCase)
	if err != nil {
		return req, nil, err
	}
	return req, m, nil
}

// selector is a cleaned Glob.
type selector struct {
	pattern  string // "" selects everything
	baseOnly bool   // no "/": matched against the base name
}

func (s selector) match(p string) bool {
	if s.pattern == "" {
		return true
	}
	target := p
	if s.baseOnly {
		target = p[strings.LastIndexByte(p, '/')+1:]
	}
	ok, _ := doublestar.Match(s.pattern, target) // validated already
	return ok
}

// base is the directory the glob's matches all lie under ("." for any).
func (s selector) base() string {
	if s.pattern == "" || s.baseOnly {
		return "."
	}
	b, _ := doublestar.SplitPattern(s.pattern)
	if strings.Contains(b, `\`) { // escapes: the names differ from b
		return "."
	}
	return b
}
