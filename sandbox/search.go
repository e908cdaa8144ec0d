package sandbox

import (
	"context"
	"io/fs"
	"strings"
)

// SearchMode is what a search reports.
type SearchMode string

// The search modes.
const (
	// SearchContent reports each matching line, with context lines.
	SearchContent SearchMode = "content"
	// SearchFiles reports the files that match (with no Pattern, every
	// file the walk reaches that the Glob matches).
	SearchFiles SearchMode = "files"
	// SearchCount reports each matching file with its number of matching
	// lines.
	SearchCount SearchMode = "count"
)

// SearchRequest is one search of a tree: the files under Dir whose paths
// match Glob, and within them the lines matching Pattern.
type SearchRequest struct {
	// Dir is where the walk starts, a path inside the root ("" is the
	// root). A file there is searched alone.
	Dir string `json:"dir,omitempty"`
	// Glob selects files by their path relative to the root, with Glob's
	// syntax ("**/*.go"); a pattern without "/" matches the base name at
	// any depth ("*.go"). Empty selects every file.
	Glob string `json:"glob,omitempty"`
	// Pattern is a regular expression in Go's RE2 syntax (no
	// backreferences, so no pattern can backtrack for ever); empty with
	// SearchFiles lists files without reading them.
	Pattern string `json:"pattern,omitempty"`
	// Literal takes Pattern as plain text.
	Literal bool `json:"literal,omitempty"`
	// IgnoreCase matches letters in either case.
	IgnoreCase bool `json:"ignore_case,omitempty"`
	// Context is how many lines before and after each match are shown
	// (SearchContent), at most MaxSearchContext.
	Context int `json:"context,omitempty"`
	// Mode is what is reported; "" is SearchContent (SearchFiles when
	// Pattern is empty).
	Mode SearchMode `json:"mode,omitempty"`
	// Limit bounds the matches (SearchContent) or files (the others)
	// returned; 0 is DefaultSearchLimit, and no more than MaxSearchLimit.
	Limit int `json:"limit,omitempty"`
	// IncludeIgnored also walks what .gitignore files (and .git/info/
	// exclude) name; by default those paths are skipped, as is ".git"
	// itself, always.
	IncludeIgnored bool `json:"include_ignored,omitempty"`
}

// Bounds of a search.
const (
	DefaultSearchLimit = 200
	MaxSearchLimit     = 10_000
	MaxSearchContext   = 20
	// MaxSearchLine is the longest line a match shows; longer lines are
	// cut, and say so.
	MaxSearchLine = 500
	// MaxSearchBytes bounds the text of one search's matches, so a result
	// always fits one message.
	MaxSearchBytes = 256 << 10
)

// SearchMatch is one matching line (SearchContent).
type SearchMatch struct {
	Path string `json:"path"`
	// Line counts from 1.
	Line int    `json:"line"`
	Text string `json:"text"`
	// Before and After are the context lines, nearest last and first.
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// SearchFile is one file a search reports (SearchFiles, SearchCount).
type SearchFile struct {
	Path string `json:"path"`
	// Count is its number of matching lines (SearchCount).
	Count int `json:"count,omitempty"`
}

// SearchResult is what a search found. Paths are root-relative and
// slash-separated; matches come sorted by path, then line.
type SearchResult struct {
	Matches []SearchMatch `json:"matches,omitempty"`
	Files   []SearchFile  `json:"files,omitempty"`
	// More counts the matches (or files) found beyond Limit or
	// MaxSearchBytes, which are not returned.
	More int `json:"more,omitempty"`
	// Searched counts the files read; Skipped those left out as binary
	// (a NUL byte near the start), unreadable or larger than MaxFileSize.
	Searched int `json:"searched"`
	Skipped  int `json:"skipped,omitempty"`
}

// Searcher is implemented by tiers that search where the files are, in
// one call however many files there are. Every tier of hutch's own does.
type Searcher interface {
	// Search walks the tree as SearchRequest says. It does not follow
	// symbolic links to directories; links to files inside the root are
	// searched, links that lead out are skipped. A bad request (a
	// pattern that does not compile, a Dir outside the root) is an error
	// matching ErrConfig or ErrEscape.
	Search(ctx context.Context, req SearchRequest) (SearchResult, error)
}

// CleanSearchGlob makes a search's Glob root-relative: an absolute
// pattern inside root loses root's prefix (as CleanPattern makes it), a
// relative one is left as it is, for the search to check. A pattern
// leading out of the root is ErrEscape.
func CleanSearchGlob(root, glob string) (string, error) {
	if glob == "" || !strings.HasPrefix(glob, "/") {
		return glob, nil
	}
	pat, dirs, err := CleanPattern(root, glob)
	if err != nil {
		return "", &fs.PathError{Op: "search", Path: glob, Err: err}
	}
	if dirs {
		pat += "/"
	}
	return pat, nil
}
