package tool

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

type grepArgs struct {
	Pattern        string `json:"pattern"`
	Path           string `json:"path,omitempty"`
	Glob           string `json:"glob,omitempty"`
	IgnoreCase     bool   `json:"ignore_case,omitempty"`
	Literal        bool   `json:"literal,omitempty"`
	Context        int    `json:"context,omitempty"`
	Output         string `json:"output,omitempty"`
	Limit          int    `json:"limit,omitempty"`
	IncludeIgnored bool   `json:"include_ignored,omitempty"`
}

// GrepResult is the grep tool's structured result.
type GrepResult struct {
	// Matches are the matching lines (output content).
	Matches []sandbox.SearchMatch `json:"matches,omitempty"`
	// Files are the matching files, with their counts for output count.
	Files []sandbox.SearchFile `json:"files,omitempty"`
	// More counts what was found beyond the limit and not shown (a lower
	// bound once it is large).
	More     int    `json:"more,omitempty"`
	Searched int    `json:"searched"`
	Skipped  int    `json:"skipped,omitempty"`
	Note     string `json:"note,omitempty"`
}

func grepFiles(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a grepArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if a.Pattern == "" {
		return failf("grep needs a pattern (a regular expression; set literal for plain text)"), nil
	}
	for _, p := range []string{a.Path, a.Glob} {
		if out, bad := badPath("grep", p); bad {
			return out, nil
		}
	}
	mode := sandbox.SearchMode(a.Output)
	switch mode {
	case "":
		mode = sandbox.SearchContent
	case sandbox.SearchContent, sandbox.SearchFiles, sandbox.SearchCount:
	default:
		return failf("output must be content, files or count, not %q", a.Output), nil
	}
	if a.Limit < 0 || a.Limit > sandbox.MaxSearchLimit || a.Context < 0 || a.Context > sandbox.MaxSearchContext {
		return failf("limit must be between 1 and %d and context between 0 and %d", sandbox.MaxSearchLimit, sandbox.MaxSearchContext), nil
	}
	s, ok := ts.opts.Sandbox.(sandbox.Searcher)
	if !ok {
		return failf("grep: this sandbox cannot search (%T): use glob and read_file", ts.opts.Sandbox), nil
	}
	detail := a.Pattern
	if a.Path != "" {
		detail += " in " + a.Path
	}
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Read, Tool: "grep", Detail: detail, Paths: ts.rulePaths(cmp.Or(a.Path, ".")), Recursive: true}, a); !ok {
		return out, err
	}
	res, err := s.Search(ctx, sandbox.SearchRequest{
		Dir: a.Path, Glob: a.Glob, Pattern: a.Pattern, Literal: a.Literal, IgnoreCase: a.IgnoreCase,
		Context: a.Context, Mode: mode, Limit: a.Limit, IncludeIgnored: a.IncludeIgnored,
	})
	if err != nil {
		if ctx.Err() != nil {
			return Output{}, ctx.Err()
		}
		return failf("grep: %s", describeErr(err)), nil
	}
	out := GrepResult{Matches: res.Matches, Files: res.Files, More: res.More, Searched: res.Searched, Skipped: res.Skipped}
	if res.More > 0 {
		out.Note = fmt.Sprintf("%d more not shown: narrow path or glob, or raise limit", res.More)
	}
	return structured(out), nil
}
