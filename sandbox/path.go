package sandbox

import (
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Clean turns a caller's path into a root-relative, slash-separated path
// without "." or ".." elements ("." is the root itself). root is the
// sandbox's absolute root as returned by Sandbox.Root.
//
// It is a lexical check only: it rejects NUL bytes, empty and overlong paths
// (ErrInvalidPath), and ".." or absolute paths that leave the root
// (ErrEscape). Symbolic links are the tier's business (the local tier resolves
// them through os.Root). Clean guarantees that its result never starts with
// "/" or "..".
func Clean(root, p string) (string, error) {
	switch {
	case p == "":
		return "", ErrInvalidPath
	case len(p) > MaxPathLen:
		return "", ErrInvalidPath
	case strings.IndexByte(p, 0) >= 0:
		return "", ErrInvalidPath
	}
	if path.IsAbs(p) {
		p = path.Clean(p)
		r := path.Clean("/" + root)
		switch {
		case p == r:
			return ".", nil
		case r == "/":
			p = p[1:]
		case strings.HasPrefix(p, r+"/"):
			p = p[len(r)+1:]
		default:
			return "", ErrEscape
		}
	}
	p = path.Clean(p)
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", ErrEscape
	}
	return p, nil
}

// CleanPattern prepares a glob pattern: like Clean, but it also validates
// the pattern's syntax and reports whether the pattern asks for directories
// (a trailing "/"). The returned pattern has no trailing slash.
func CleanPattern(root, pattern string) (clean string, dirsOnly bool, err error) {
	dirsOnly = len(pattern) > 1 && strings.HasSuffix(pattern, "/")
	clean, err = Clean(root, pattern)
	if err != nil {
		return "", false, err
	}
	if !doublestar.ValidatePattern(clean) {
		return "", false, ErrInvalidPath
	}
	return collapseStars(clean), dirsOnly, nil
}

// collapseStars makes runs of "**" segments one: they match the same
// paths, and each more multiplies the work (twenty took 70 s on a tree of
// 259 entries).
func collapseStars(p string) string {
	if !strings.Contains(p, "**/**") {
		return p
	}
	segs := strings.Split(p, "/")
	kept := segs[:1]
	for _, s := range segs[1:] {
		if s == "**" && kept[len(kept)-1] == "**" {
			continue
		}
		kept = append(kept, s)
	}
	return strings.Join(kept, "/")
}
