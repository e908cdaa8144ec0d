package hostfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/search"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

// listBatch is how many names List reads from a directory at a time.
const listBatch = 1024

// List returns the entries of the directory p (see sandbox.Sandbox).
func (s *FS) List(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	return s.ListHiding(ctx, p, nil)
}

// ListHiding is List leaving out the entries whose root-relative paths
// hide names (a policy's denied paths), when hide is not nil.
func (s *FS) ListHiding(ctx context.Context, p string, hide func(rel string) bool) ([]sandbox.FileInfo, error) {
	done, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	rel, err := s.resolve("list", p)
	if err != nil {
		return nil, err
	}
	// O_DIRECTORY: a FIFO (or a file) fails at once, never blocks.
	d, err := s.root.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, mapErr("list", p, err)
	}
	defer d.Close()
	var out []sandbox.FileInfo
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ents, rerr := d.ReadDir(listBatch)
		for _, e := range ents {
			if isTemp(e.Name()) {
				continue
			}
			child := path.Join(rel, e.Name())
			if hide != nil && hide(child) {
				continue
			}
			if len(out) == sandbox.MaxGlobResults {
				return nil, tierkit.PathError("list", p, fmt.Errorf("more than %d entries: %w", sandbox.MaxGlobResults, sandbox.ErrTooLarge))
			}
			out = append(out, s.entry(child))
		}
		if rerr == io.EOF || (rerr == nil && len(ents) == 0) {
			break
		}
		if rerr != nil {
			return nil, mapErr("list", p, rerr)
		}
	}
	slices.SortFunc(out, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	if out == nil {
		out = []sandbox.FileInfo{}
	}
	return out, nil
}

// entry describes one directory entry for List: as Lstat sees it, and for
// a link as Stat sees its target when that resolves inside the root.
func (s *FS) entry(rel string) sandbox.FileInfo {
	fi, err := s.root.Lstat(rel)
	if err != nil { // gone since it was listed
		return sandbox.FileInfo{Path: rel, Kind: sandbox.KindOther}
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return infoOf(rel, fi)
	}
	info := sandbox.FileInfo{Path: rel, Kind: sandbox.KindOther, Mode: fi.Mode(), ModTime: fi.ModTime(), Link: true}
	if t, err := s.root.Stat(rel); err == nil {
		info = infoOf(rel, t)
		info.Link = true
	}
	return info
}

// Mkdir creates the directory p and its missing parents.
func (s *FS) Mkdir(ctx context.Context, p string) error {
	done, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	rel, err := s.resolve("mkdir", p)
	if err != nil {
		return err
	}
	if err := s.refuseProtected("mkdir", p, rel, true, false); err != nil {
		return err
	}
	if err := s.root.MkdirAll(rel, 0o755); err != nil {
		if fi, serr := s.root.Stat(rel); serr == nil && !fi.IsDir() {
			return tierkit.PathError("mkdir", p, fmt.Errorf("a file is there: %w", sandbox.ErrNotDir))
		}
		return mapErr("mkdir", p, err)
	}
	return nil
}

// Remove deletes the entry p (see sandbox.Sandbox): its parent
// directories are resolved inside the root, the entry itself never
// followed.
func (s *FS) Remove(ctx context.Context, p string, recursive bool) error {
	done, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	rel, err := s.resolve("remove", p)
	if err != nil {
		return err
	}
	if rel == "." {
		return tierkit.PathError("remove", p, fmt.Errorf("%w: the sandbox root itself cannot be removed: name what is inside it", sandbox.ErrInvalidPath))
	}
	if err := s.refuseProtected("remove", p, rel, false, true); err != nil {
		return err
	}
	fi, err := s.root.Lstat(rel)
	if err != nil {
		return mapErr("remove", p, err)
	}
	if dirOnly(p) && !fi.IsDir() {
		return tierkit.PathError("remove", p, sandbox.ErrNotDir)
	}
	if fi.IsDir() && recursive {
		if err := s.root.RemoveAll(rel); err != nil {
			return mapErr("remove", p, err)
		}
		return nil
	}
	if err := s.root.Remove(rel); err != nil {
		if inner := unwrapPathErr(err); fi.IsDir() && (errors.Is(inner, syscall.ENOTEMPTY) || errors.Is(inner, syscall.EEXIST)) {
			return tierkit.PathError("remove", p, fmt.Errorf("%w: set recursive to remove it and everything in it", sandbox.ErrNotEmpty))
		}
		return mapErr("remove", p, err)
	}
	return nil
}

// Rename moves from to to (see sandbox.Sandbox).
func (s *FS) Rename(ctx context.Context, from, to string) error {
	done, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	src, err := s.resolve("rename", from)
	if err != nil {
		return err
	}
	dst, err := s.resolve("rename", to)
	if err != nil {
		return err
	}
	switch {
	case src == "." || dst == ".":
		return tierkit.PathError("rename", from, fmt.Errorf("%w: the sandbox root itself cannot be moved, nor anything moved onto it", sandbox.ErrInvalidPath))
	case dst == src:
		return tierkit.PathError("rename", from, fmt.Errorf("%w: it is already there (%s)", sandbox.ErrInvalidPath, to))
	case strings.HasPrefix(dst, src+"/"):
		return tierkit.PathError("rename", from, fmt.Errorf("%w: a directory cannot move below itself (%s)", sandbox.ErrInvalidPath, to))
	}
	if err := s.refuseProtected("rename", from, src, false, true); err != nil {
		return err
	}
	if err := s.refuseProtected("rename", to, dst, false, true); err != nil {
		return err
	}
	sfi, err := s.root.Lstat(src)
	if err != nil {
		return mapErr("rename", from, err)
	}
	if dirOnly(from) && !sfi.IsDir() {
		return tierkit.PathError("rename", from, sandbox.ErrNotDir)
	}
	if dfi, err := s.root.Lstat(dst); err == nil && dfi.IsDir() {
		return tierkit.PathError("rename", to, fmt.Errorf("a directory is there; name the new path in full: %w", sandbox.ErrIsDir))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return mapErr("rename", to, err)
	}
	if dir := path.Dir(dst); dir != "." {
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			return mapErr("rename", to, err)
		}
	}
	if err := s.renamePinned(from, to, src, dst); err != nil {
		inner := unwrapPathErr(err)
		switch {
		case errors.Is(inner, syscall.EISDIR), errors.Is(inner, syscall.ENOTEMPTY), errors.Is(inner, syscall.EEXIST):
			return tierkit.PathError("rename", to, fmt.Errorf("a directory is there: %w", sandbox.ErrIsDir))
		case errors.Is(inner, syscall.EXDEV):
			return tierkit.PathError("rename", to, fmt.Errorf("%s and %s are on different filesystems (mounts): copy and delete instead", from, to))
		}
		return mapErr("rename", from, err)
	}
	return nil
}

// renamePinned renames src to dst (root-relative, checked) through their
// directories, pinned and judged again where they are (refusePinned): a
// directory on either path swapped for a link to .git since the check
// would otherwise move the agent's file onto .git/config. The rename
// itself is renameat between the two pinned directories.
func (s *FS) renamePinned(from, to, src, dst string) error {
	sf, err := s.root.Open(path.Dir(src))
	if err != nil {
		return err
	}
	defer sf.Close()
	df, err := s.root.Open(path.Dir(dst))
	if err != nil {
		return err
	}
	defer df.Close()
	// Each directory is judged where its links lead now, and the one
	// pinned must be that directory, reached through no link: a swap
	// after this is on a path the rename no longer uses.
	for _, c := range []struct {
		name, rel string
		f         *os.File
	}{{from, src, sf}, {to, dst, df}} {
		dir, err := s.followLinks(path.Dir(c.rel))
		if err != nil {
			return err
		}
		if err := s.refuseProtected("rename", c.name, path.Join(dir, path.Base(c.rel)), false, true); err != nil {
			return err
		}
		if err := s.checkPinned("rename", c.name, c.f, dir); err != nil {
			return err
		}
	}
	if err := unix.Renameat(int(sf.Fd()), path.Base(src), int(df.Fd()), path.Base(dst)); err != nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: err}
	}
	return nil
}

// Search runs req over the root (see sandbox.Searcher).
func (s *FS) Search(ctx context.Context, req sandbox.SearchRequest) (sandbox.SearchResult, error) {
	return s.SearchHiding(ctx, req, nil)
}

// SearchHiding is Search leaving out the paths hide names (a policy's
// denied paths), when hide is not nil: they are neither listed nor read.
func (s *FS) SearchHiding(ctx context.Context, req sandbox.SearchRequest, hide func(rel string) bool) (sandbox.SearchResult, error) {
	done, err := s.begin(ctx)
	if err != nil {
		return sandbox.SearchResult{}, err
	}
	defer done()
	if req.Dir == "" {
		req.Dir = "."
	}
	if req.Dir, err = s.resolve("search", req.Dir); err != nil {
		return sandbox.SearchResult{}, err
	}
	if req.Glob, err = sandbox.CleanSearchGlob(s.Root(), req.Glob); err != nil {
		return sandbox.SearchResult{}, err
	}
	if hide != nil && hide(req.Dir) {
		return sandbox.SearchResult{}, tierkit.PathError("search", req.Dir, fmt.Errorf("denied by the policy: %w", fs.ErrPermission))
	}
	return search.Run(ctx, s.searchFS(hide), req)
}
