package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/bmatcuk/doublestar/v4"
)

// GlobFS implements the Glob contract over fsys, which must be rooted at the
// sandbox root and must refuse (not follow) paths leaving it. pattern is the
// output of CleanPattern. Every tier that can present its files as an fs.FS
// uses this one function, so glob means the same everywhere.
func GlobFS(ctx context.Context, fsys fs.FS, pattern string, dirsOnly bool) ([]string, error) {
	out := []string{}
	walk := func(p string, _ fs.DirEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == "." { // the root itself is never a match
			return nil
		}
		// Stat follows links; one that leaves the root or dangles fails
		// here and is dropped.
		fi, err := fs.Stat(fsys, p)
		if err != nil || fi.IsDir() != dirsOnly {
			return nil
		}
		if len(out) == MaxGlobResults {
			return fmt.Errorf("glob %s: more than %d matches, narrow the pattern: %w", pattern, MaxGlobResults, ErrTooLarge)
		}
		out = append(out, p)
		return nil
	}
	err := doublestar.GlobWalk(ctxFS{ctx, fsys}, pattern, walk, doublestar.WithNoFollow())
	if err == nil {
		err = ctx.Err() // a cancelled walk with no match is still cancelled
	}
	if err != nil {
		if errors.Is(err, doublestar.ErrBadPattern) {
			return nil, fmt.Errorf("glob %s: %w", pattern, ErrInvalidPath)
		}
		return nil, err
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ctxFS stops directory listing once ctx is done, so a walk that matches
// nothing can still be cancelled.
type ctxFS struct {
	ctx context.Context
	fs.FS
}

func (c ctxFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, err
	}
	return fs.ReadDir(c.FS, name)
}

func (c ctxFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(c.FS, name) }
