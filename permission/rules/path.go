package rules

import (
	"fmt"
	"path"
	"strings"

	"github.com/hutchsandbox/hutch/internal/search"
	"github.com/hutchsandbox/hutch/permission"
)

// pathPattern is a gitignore-style pattern relative to the sandbox root.
type pathPattern struct {
	pattern  string // without a leading "/" or a trailing "/"
	anchored bool   // a "/" at the start or inside: matched from the root
	// folded is the pattern in lower case, which deny and ask rules
	// match against the path in lower case too: on a file system that
	// ignores case (macOS, Windows, a share), .ENV is .env.
	folded *pathPattern
}

// parsePathPattern reads a read or write rule's pattern: gitignore's
// syntax for one line, without "!" (write an allow rule instead). A
// leading "/" or "./" anchors it at the sandbox root; a "/" inside
// anchors it too; otherwise it matches a name at any depth. A trailing
// "/" is allowed (it names a directory; hutch cannot tell a file from a
// directory in a request, so it matches either).
func parsePathPattern(p string) (*pathPattern, error) {
	switch {
	case strings.HasPrefix(p, "!"):
		return nil, fmt.Errorf("path pattern %q: a rule cannot negate; write a rule with the other decision for %q", p, p[1:])
	case strings.HasPrefix(p, "//"), strings.HasPrefix(p, "~"):
		return nil, fmt.Errorf("path pattern %q: patterns are relative to the sandbox root; write it as /path/below/the/root", p)
	case len(p) > 4096:
		return nil, fmt.Errorf("path pattern is %d bytes; at most 4096", len(p))
	}
	if rest, ok := strings.CutPrefix(p, "./"); ok {
		p = "/" + rest
	}
	trimmed := strings.TrimSuffix(p, "/")
	pp := &pathPattern{anchored: strings.Contains(trimmed, "/")}
	pp.pattern = strings.TrimPrefix(trimmed, "/")
	if pp.pattern == "" {
		return nil, fmt.Errorf("path pattern %q names the root itself; write * for every path", p)
	}
	for seg := range strings.SplitSeq(pp.pattern, "/") {
		if seg == ".." || seg == "." || seg == "" {
			return nil, fmt.Errorf("path pattern %q has an empty, . or .. element; write the path as it is below the root", p)
		}
	}
	if err := checkBrackets(pp.pattern); err != nil {
		return nil, fmt.Errorf("path pattern %q: %v", p, err)
	}
	pp.folded = &pathPattern{pattern: strings.ToLower(pp.pattern), anchored: pp.anchored}
	return pp, nil
}

// checkBrackets refuses an unclosed "[" class or a trailing "\", which
// would make the pattern match nothing.
func checkBrackets(p string) error {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			if i+1 == len(p) {
				return fmt.Errorf(`a trailing "\" escapes nothing; remove it`)
			}
			i++
		case '[':
			j := i + 1
			if j < len(p) && (p[j] == '!' || p[j] == '^') {
				j++
			}
			if j < len(p) && p[j] == ']' {
				j++
			}
			k := strings.IndexByte(p[j:], ']')
			if k < 0 {
				return fmt.Errorf(`unclosed "["; write \[ for a literal bracket`)
			}
			i = j + k
		}
	}
	return nil
}

// cleanPath is a request's path as rules match it: root-relative, clean,
// without "." elements. ok is false for a path that leaves the root, is
// absolute, empty or holds a NUL byte: no allow rule matches it, while
// deny and ask rules match what is left of it below the root.
func cleanPath(p string) (clean string, ok bool) {
	ok = p != "" && !strings.ContainsRune(p, 0) && !path.IsAbs(p)
	c := path.Clean("/" + p)[1:] // ".." cannot climb above "/"
	if ok {
		rel := path.Clean(p)
		ok = rel != ".." && !strings.HasPrefix(rel, "../")
	}
	if c == "" {
		c = "."
	}
	return c, ok
}

// matches reports whether the root-relative clean path p, or a
// directory holding it, matches the pattern (as gitignore ignores what is
// below an ignored directory).
func (pp *pathPattern) matches(p string) bool {
	if p == "." {
		return false
	}
	for end := len(p); end > 0; {
		prefix := p[:end]
		target := prefix
		if !pp.anchored {
			target = prefix[strings.LastIndexByte(prefix, '/')+1:]
		}
		if search.Wildmatch(pp.pattern, target) {
			return true
		}
		end = strings.LastIndexByte(prefix, '/')
	}
	return false
}

// mayMatchBelow reports whether the pattern may match some path below
// the directory p (a call that reads or changes everything below p). An
// unanchored pattern may match below any directory.
func (pp *pathPattern) mayMatchBelow(p string) bool {
	if !pp.anchored {
		return true
	}
	psegs := strings.Split(pp.pattern, "/")
	var dsegs []string
	if p != "." {
		dsegs = strings.Split(p, "/")
	}
	for i, d := range dsegs {
		switch {
		case i >= len(psegs):
			return false // matches handles a pattern matching an ancestor
		case strings.Contains(psegs[i], "**"):
			return true
		case !search.Wildmatch(psegs[i], d):
			return false
		}
	}
	return len(psegs) > len(dsegs)
}

// pathPart is one path of a file tool's request.
type pathPart struct {
	path      string
	ok        bool // normalised: may be allowed
	recursive bool
}

func (p pathPart) matches(r *compiled) bool {
	if r.path == nil {
		return false
	}
	if r.Decision == Allow {
		return p.ok && r.path.matches(p.path)
	}
	for _, pp := range []*pathPattern{r.path, r.path.folded} {
		path := p.path
		if pp == r.path.folded {
			path = strings.ToLower(path)
		}
		if pp.matches(path) || (p.recursive && pp.mayMatchBelow(path)) {
			return true
		}
	}
	return false
}

// readParts are the paths a write request reads, or makes readable
// elsewhere, for read deny and ask rules: the source of a move (its
// contents can then be read under the new name), every path of a patch
// and of edit_file (they read the file, and may show it in an error).
func readParts(req permission.Request) []part {
	if req.Capability != permission.Write {
		return nil
	}
	paths := req.Paths
	switch req.Tool {
	case "move":
		paths = paths[:min(1, len(paths))]
	case "apply_patch", "edit_file":
	default:
		return nil
	}
	parts := make([]part, len(paths))
	for i, p := range paths {
		c, _ := cleanPath(p)
		parts[i] = pathPart{path: c, recursive: req.Recursive}
	}
	return parts
}

// pathParts are the paths of req; a request without Paths is its Detail,
// as one path no rule allows.
func pathParts(req permission.Request) []part {
	if len(req.Paths) == 0 {
		c, _ := cleanPath(req.Detail)
		return []part{pathPart{path: c, recursive: req.Recursive}}
	}
	parts := make([]part, len(req.Paths))
	for i, p := range req.Paths {
		c, ok := cleanPath(p)
		parts[i] = pathPart{path: c, ok: ok, recursive: req.Recursive}
	}
	return parts
}
