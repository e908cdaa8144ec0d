package tierkit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/hutchsandbox/hutch/sandbox"
)

// GlobFS implements the Glob contract over fsys, which must be rooted at the
// sandbox root and must refuse (not follow) paths leaving it. pattern is the
// output of sandbox.CleanPattern. Every tier that can present its files as an fs.FS
// uses this one function, so glob means the same everywhere.
func GlobFS(ctx context.Context, fsys fs.FS, pattern string, dirsOnly bool) ([]string, error) {
	if n := GlobCombinations(pattern); n > MaxGlobAlternatives {
		return nil, fmt.Errorf("glob %s: its {a,b} groups make %d combinations, more than %d: simplify the pattern: %w", pattern, n, MaxGlobAlternatives, sandbox.ErrInvalidPath)
	}
	out := []string{}
	seen := map[string]bool{}
	walk := func(p string, _ fs.DirEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == "." || seen[p] { // the root itself is never a match
			return nil
		}
		seen[p] = true
		// Stat follows links; one that leaves the root or dangles fails
		// here and is dropped.
		fi, err := fs.Stat(fsys, p)
		if err != nil || fi.IsDir() != dirsOnly {
			return nil
		}
		if len(out) == sandbox.MaxGlobResults {
			return fmt.Errorf("glob %s: more than %d matches, narrow the pattern: %w", pattern, sandbox.MaxGlobResults, sandbox.ErrTooLarge)
		}
		out = append(out, p)
		return nil
	}
	cfs := &ctxFS{ctx: ctx, FS: fsys, budget: MaxGlobOperations}
	err := doublestar.GlobWalk(cfs, pattern, walk, doublestar.WithNoFollow())
	if err == nil && cfs.over {
		err = fmt.Errorf("glob %s: more than %d filesystem operations, narrow the pattern: %w", pattern, MaxGlobOperations, sandbox.ErrTooLarge)
	}
	if err == nil {
		err = ctx.Err() // a cancelled walk with no match is still cancelled
	}
	if err != nil {
		if errors.Is(err, doublestar.ErrBadPattern) {
			return nil, fmt.Errorf("glob %s: %w", pattern, sandbox.ErrInvalidPath)
		}
		return nil, err
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Bounds on one glob, so that no pattern can keep a core busy.
const (
	// MaxGlobAlternatives bounds the combinations of a pattern's {a,b}
	// groups (the glob library tries each one).
	MaxGlobAlternatives = 256
	// MaxGlobOperations bounds the directory listings and stats of one
	// walk.
	MaxGlobOperations = 2_000_000
)

// ctxFS stops the walk once ctx is done or the operation budget is spent:
// every listing and stat fails from then on (the glob library skips failed
// ones quietly, so GlobFS checks both afterwards).
type ctxFS struct {
	ctx context.Context
	fs.FS
	budget int
	over   bool
}

func (c *ctxFS) spend() error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	if c.budget--; c.budget < 0 {
		c.over = true
		return sandbox.ErrTooLarge
	}
	return nil
}

func (c *ctxFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := c.spend(); err != nil {
		return nil, err
	}
	return fs.ReadDir(c.FS, name)
}

func (c *ctxFS) Stat(name string) (fs.FileInfo, error) {
	if err := c.spend(); err != nil {
		return nil, err
	}
	return fs.Stat(c.FS, name)
}

func (c *ctxFS) Open(name string) (fs.File, error) {
	if err := c.spend(); err != nil {
		return nil, err
	}
	return c.FS.Open(name)
}

// GlobCombinations counts the patterns a glob's brace groups expand to
// (each group contributes the sum of its alternatives' counts; groups
// multiply), stopping early once it passes MaxGlobAlternatives. The glob
// library tries each one, so callers refuse patterns over the bound.
func GlobCombinations(pattern string) int {
	n, _ := braceProduct(pattern, 0, false)
	return n
}

// braceProduct reads from i until the end (or, inside a group, until the
// ',' or '}' that ends the alternative) and returns the product of the
// groups it met and where it stopped.
func braceProduct(p string, i int, inGroup bool) (int, int) {
	prod := 1
	for i < len(p) {
		switch p[i] {
		case '\\':
			i += 2
			continue
		case ',', '}':
			if inGroup {
				return prod, i
			}
		case '{':
			sum := 0
			i++
			for i < len(p) {
				var alt int
				alt, i = braceProduct(p, i, true)
				sum += alt
				if i >= len(p) || p[i] == '}' {
					break
				}
				i++ // past ','
			}
			prod *= max(sum, 1)
			if prod > MaxGlobAlternatives {
				return prod, len(p)
			}
		}
		i++
	}
	return prod, i
}
