package virtual

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/search"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

// List returns the entries of the directory p, sorted by name.
func (s *Sandbox) List(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	rel, err := s.resolve("list", p)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	n, err := s.lookup("list", p, rel)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, tierkit.PathError("list", p, sandbox.ErrNotDir)
	}
	if len(n.children) > sandbox.MaxGlobResults {
		return nil, tierkit.PathError("list", p, fmt.Errorf("more than %d entries: %w", sandbox.MaxGlobResults, sandbox.ErrTooLarge))
	}
	out := make([]sandbox.FileInfo, 0, len(n.children))
	for c := range n.children {
		out = append(out, s.info(path.Join(rel, c)))
	}
	slices.SortFunc(out, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// info describes the node at rel, which exists; the caller holds the lock.
func (s *Sandbox) info(rel string) sandbox.FileInfo {
	n := s.nodes[rel]
	fi := sandbox.FileInfo{Path: rel, ModTime: n.mtime, Mode: n.mode, Kind: sandbox.KindFile, Size: int64(len(n.data))}
	if n.isDir() {
		fi.Kind = sandbox.KindDir
	}
	return fi
}

// Mkdir creates the directory p and its missing parents.
func (s *Sandbox) Mkdir(ctx context.Context, p string) error {
	rel, err := s.resolve("mkdir", p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	return s.mkdirAll("mkdir", p, rel, time.Now())
}

// mkdirAll makes rel and its missing parents, checking the whole chain
// before changing anything; the caller holds the write lock.
func (s *Sandbox) mkdirAll(op, p, rel string, now time.Time) error {
	var missing []string
	for dir := rel; ; dir = path.Dir(dir) {
		if n, ok := s.nodes[dir]; ok {
			if !n.isDir() {
				return tierkit.PathError(op, p, fmt.Errorf("a file is there: %w", sandbox.ErrNotDir))
			}
			break
		}
		missing = append(missing, dir)
	}
	for _, dir := range slices.Backward(missing) {
		s.nodes[dir] = newDir(now)
		s.link(dir, now)
	}
	return nil
}

// Remove deletes the file or directory p (a directory with entries only
// when recursive). The root is never removed.
func (s *Sandbox) Remove(ctx context.Context, p string, recursive bool) error {
	rel, err := s.resolve("remove", p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	if rel == "." {
		return tierkit.PathError("remove", p, fmt.Errorf("%w: the sandbox root itself cannot be removed: name what is inside it", sandbox.ErrInvalidPath))
	}
	n, err := s.lookup("remove", p, rel)
	if err != nil {
		return err
	}
	switch {
	case dirOnly(p) && !n.isDir():
		return tierkit.PathError("remove", p, sandbox.ErrNotDir)
	case n.isDir() && len(n.children) > 0 && !recursive:
		return tierkit.PathError("remove", p, fmt.Errorf("%w: set recursive to remove it and everything in it", sandbox.ErrNotEmpty))
	}
	for _, k := range s.below(rel) {
		s.size -= int64(len(s.nodes[k].data))
		delete(s.nodes, k)
	}
	s.unlink(rel, time.Now())
	return nil
}

// below is rel and every path under it; the caller holds the lock.
func (s *Sandbox) below(rel string) []string {
	out := []string{rel}
	if !s.nodes[rel].isDir() {
		return out
	}
	prefix := rel + "/"
	for k := range s.nodes {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// unlink drops rel from its parent directory, whose mtime changes.
func (s *Sandbox) unlink(rel string, now time.Time) {
	parent := s.nodes[path.Dir(rel)]
	delete(parent.children, path.Base(rel))
	parent.mtime = now
}

// Rename moves from to to, creating the missing parents of to; an
// existing file at to is replaced, an existing directory refused.
func (s *Sandbox) Rename(ctx context.Context, from, to string) error {
	src, err := s.resolve("rename", from)
	if err != nil {
		return err
	}
	dst, err := s.resolve("rename", to)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
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
	n, err := s.lookup("rename", from, src)
	if err != nil {
		return err
	}
	if dirOnly(from) && !n.isDir() {
		return tierkit.PathError("rename", from, sandbox.ErrNotDir)
	}
	old, exists := s.nodes[dst]
	if exists && old.isDir() {
		return tierkit.PathError("rename", to, fmt.Errorf("a directory is there; name the new path in full: %w", sandbox.ErrIsDir))
	}
	now := time.Now()
	if err := s.mkdirAll("rename", to, path.Dir(dst), now); err != nil {
		return err
	}
	if exists {
		s.size -= int64(len(old.data))
	}
	moved := s.below(src)
	nodes := make([]*node, len(moved))
	for i, k := range moved {
		nodes[i] = s.nodes[k]
		delete(s.nodes, k)
	}
	for i, k := range moved {
		s.nodes[dst+strings.TrimPrefix(k, src)] = nodes[i]
	}
	s.unlink(src, now)
	s.link(dst, now)
	return nil
}

// dirOnly reports a path that ends in "/" (the root's aside): it names a
// directory.
func dirOnly(p string) bool { return len(p) > 1 && strings.HasSuffix(p, "/") }

// Search runs req over the sandbox's files (see sandbox.Searcher).
func (s *Sandbox) Search(ctx context.Context, req sandbox.SearchRequest) (sandbox.SearchResult, error) {
	if req.Dir == "" {
		req.Dir = "."
	}
	var err error
	if req.Dir, err = s.resolve("search", req.Dir); err != nil {
		return sandbox.SearchResult{}, err
	}
	if req.Glob, err = sandbox.CleanSearchGlob("/", req.Glob); err != nil {
		return sandbox.SearchResult{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return sandbox.SearchResult{}, err
	}
	return search.Run(ctx, memFS{s}, req)
}
