package virtual

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Sandbox is an in-memory sandbox. The zero value is not usable; call New.
// It is safe for concurrent use.
type Sandbox struct {
	mu     sync.RWMutex
	nodes  map[string]*node // root-relative path -> entry; "." is the root
	size   int64            // the files' content, in bytes (under mu)
	max    int64
	closed bool
}

type node struct {
	data     []byte
	mtime    time.Time
	mode     fs.FileMode
	children map[string]struct{} // non-nil for directories
}

func (n *node) isDir() bool { return n.children != nil }

var _ sandbox.Sandbox = (*Sandbox)(nil)

// Options are the settings of an in-memory sandbox.
type Options struct {
	// MaxBytes bounds the file content the sandbox holds; MaxBytes (the
	// constant) when zero or less.
	MaxBytes int64
}

// MaxBytes is how much file content a sandbox holds when Options does not
// say.
const MaxBytes = 512 << 20

// New returns an empty in-memory sandbox. Unlike the other tiers' New it
// takes no context and returns no error: it touches nothing outside the
// process, so it can neither block nor fail.
func New(opts Options) *Sandbox {
	max := opts.MaxBytes
	if max <= 0 {
		max = MaxBytes
	}
	return &Sandbox{nodes: map[string]*node{".": newDir(time.Now())}, max: max}
}

func newDir(t time.Time) *node {
	return &node{mtime: t, mode: fs.ModeDir | 0o755, children: map[string]struct{}{}}
}

// InMemory marks the tier as in-memory (see sandbox.InMemory).
func (s *Sandbox) InMemory() {}

// Root is always "/".
func (s *Sandbox) Root() string { return "/" }

func (s *Sandbox) resolve(op, p string) (string, error) {
	rel, err := sandbox.Clean("/", p)
	if err != nil {
		return "", tierkit.PathError(op, p, err)
	}
	return rel, nil
}

// lookup finds rel; the caller holds the lock. A file used as a directory
// component is ErrNotDir, a missing entry ErrNotFound.
func (s *Sandbox) lookup(op, p, rel string) (*node, error) {
	if n, ok := s.nodes[rel]; ok {
		return n, nil
	}
	for dir := path.Dir(rel); dir != "."; dir = path.Dir(dir) {
		if n, ok := s.nodes[dir]; ok && !n.isDir() {
			return nil, tierkit.PathError(op, p, sandbox.ErrNotDir)
		}
	}
	return nil, tierkit.PathError(op, p, sandbox.ErrNotFound)
}

func (s *Sandbox) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed {
		return sandbox.ErrClosed
	}
	return nil
}

// Read returns a copy of the file's content.
func (s *Sandbox) Read(ctx context.Context, p string) ([]byte, error) {
	rel, err := s.resolve("read", p)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	n, err := s.lookup("read", p, rel)
	if err != nil {
		return nil, err
	}
	if n.isDir() {
		return nil, tierkit.PathError("read", p, sandbox.ErrIsDir)
	}
	return slices.Clone(n.data), nil
}

// ReadStat is Read and Stat in one step, reading at most max bytes when
// max > 0 (see sandbox.StatReader).
func (s *Sandbox) ReadStat(ctx context.Context, p string, max int64) ([]byte, sandbox.FileInfo, error) {
	data, fi, err := s.view(ctx, p)
	if err != nil {
		return nil, sandbox.FileInfo{}, err
	}
	if max > 0 && int64(len(data)) > max {
		data = data[:max]
	}
	return slices.Clone(data), fi, nil
}

// ReadStream hands fn the file's content without copying it (see
// sandbox.Streamer).
func (s *Sandbox) ReadStream(ctx context.Context, p string, fn func(io.Reader) error) (sandbox.FileInfo, error) {
	data, fi, err := s.view(ctx, p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	return fi, fn(bytes.NewReader(data))
}

// view is the file's content as stored (Write replaces a file's slice,
// never changes it: it may be read after the lock is released) and its
// description.
func (s *Sandbox) view(ctx context.Context, p string) ([]byte, sandbox.FileInfo, error) {
	fi, err := s.Stat(ctx, p)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fi, tierkit.PathError("read", p, pe.Err)
		}
		return nil, fi, err // closed, cancelled: not about the path
	}
	if fi.Kind == sandbox.KindDir {
		return nil, sandbox.FileInfo{}, tierkit.PathError("read", p, sandbox.ErrIsDir)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, sandbox.FileInfo{}, err
	}
	n, ok := s.nodes[fi.Path]
	if !ok || n.isDir() {
		return nil, sandbox.FileInfo{}, tierkit.PathError("read", p, sandbox.ErrNotFound)
	}
	fi.Size, fi.ModTime, fi.Mode = int64(len(n.data)), n.mtime, n.mode
	return n.data, fi, nil
}

// Write stores a copy of data at p, creating parent directories. It is
// atomic: concurrent readers see the old or the new content.
func (s *Sandbox) Write(ctx context.Context, p string, data []byte) error {
	rel, err := s.resolve("write", p)
	if err != nil {
		return err
	}
	if len(data) > sandbox.MaxFileSize {
		return tierkit.PathError("write", p, fmt.Errorf("%d bytes is over the %d byte limit: %w", len(data), sandbox.MaxFileSize, sandbox.ErrTooLarge))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	if rel == "." {
		return tierkit.PathError("write", p, sandbox.ErrIsDir)
	}
	now := time.Now()
	// Check the whole chain before changing anything.
	var missing []string
	for dir := path.Dir(rel); ; dir = path.Dir(dir) {
		n, ok := s.nodes[dir]
		if ok {
			if !n.isDir() {
				return tierkit.PathError("write", p, sandbox.ErrNotDir)
			}
			break
		}
		missing = append(missing, dir)
	}
	mode := fs.FileMode(0o644)
	size := s.size + int64(len(data))
	if old, ok := s.nodes[rel]; ok {
		if old.isDir() {
			return tierkit.PathError("write", p, sandbox.ErrIsDir)
		}
		mode = old.mode
		size -= int64(len(old.data))
	}
	if size > s.max {
		return tierkit.PathError("write", p, fmt.Errorf("the sandbox's files would hold %d bytes, over its %d byte limit (write less, or overwrite what is no longer needed): %w", size, s.max, sandbox.ErrTooLarge))
	}
	s.size = size
	for _, dir := range slices.Backward(missing) {
		s.nodes[dir] = newDir(now)
		s.link(dir, now)
	}
	if _, ok := s.nodes[rel]; !ok {
		s.link(rel, now)
	}
	s.nodes[rel] = &node{data: slices.Clone(data), mtime: now, mode: mode}
	return nil
}

// link records rel in its parent directory, whose mtime changes.
func (s *Sandbox) link(rel string, now time.Time) {
	parent := s.nodes[path.Dir(rel)]
	parent.children[path.Base(rel)] = struct{}{}
	parent.mtime = now
}

// Stat describes p.
func (s *Sandbox) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	rel, err := s.resolve("stat", p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return sandbox.FileInfo{}, err
	}
	n, err := s.lookup("stat", p, rel)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	fi := sandbox.FileInfo{Path: rel, ModTime: n.mtime, Mode: n.mode, Kind: sandbox.KindFile, Size: int64(len(n.data))}
	if n.isDir() {
		fi.Kind = sandbox.KindDir
	}
	return fi, nil
}

// Glob matches pattern with the contract's rules (see sandbox.Sandbox).
func (s *Sandbox) Glob(ctx context.Context, pattern string) ([]string, error) {
	pat, dirsOnly, err := sandbox.CleanPattern("/", pattern)
	if err != nil {
		return nil, tierkit.PathError("glob", pattern, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return tierkit.GlobFS(ctx, memFS{s}, pat, dirsOnly)
}

// Exec is not supported: the virtual sandbox has no shell, on purpose.
func (s *Sandbox) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return sandbox.Result{}, err
	}
	return sandbox.Result{}, fmt.Errorf("virtual sandbox has no shell: %w", sandbox.ErrUnsupported)
}

// Supports reports read, write, glob, stat and manage; never shell.
func (s *Sandbox) Supports(c sandbox.Feature) bool {
	switch c {
	case sandbox.FeatureRead, sandbox.FeatureWrite, sandbox.FeatureGlob, sandbox.FeatureStat, sandbox.FeatureManage:
		return true
	}
	return false
}

// Instructions is empty: there is nothing on the host to describe.
func (s *Sandbox) Instructions() string { return "" }

// Close drops every file. It is idempotent.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.nodes = nil
	return nil
}

// memFS presents the sandbox as an fs.FS for glob; the caller holds the
// read lock.
type memFS struct{ s *Sandbox }

func (m memFS) get(name string) (*node, error) {
	if !validName(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	n, ok := m.s.nodes[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

// validName is fs.ValidPath without its UTF-8 check: a file whose name is
// not valid UTF-8 can be written and read, so Glob lists it too.
func validName(name string) bool {
	if name == "." {
		return true
	}
	for _, elem := range strings.Split(name, "/") {
		if elem == "" || elem == "." || elem == ".." {
			return false
		}
	}
	return true
}

func (m memFS) Open(name string) (fs.File, error) {
	n, err := m.get(name)
	if err != nil {
		return nil, err
	}
	return &memFile{info: info{name: path.Base(name), n: n}}, nil
}

func (m memFS) Stat(name string) (fs.FileInfo, error) {
	n, err := m.get(name)
	if err != nil {
		return nil, err
	}
	return info{name: path.Base(name), n: n}, nil
}

func (m memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	n, err := m.get(name)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: sandbox.ErrNotDir}
	}
	names := make([]string, 0, len(n.children))
	for c := range n.children {
		names = append(names, c)
	}
	slices.Sort(names)
	out := make([]fs.DirEntry, len(names))
	for i, c := range names {
		out[i] = fs.FileInfoToDirEntry(info{name: c, n: m.s.nodes[path.Join(name, c)]})
	}
	return out, nil
}

type info struct {
	name string
	n    *node
}

func (i info) Name() string       { return i.name }
func (i info) Size() int64        { return int64(len(i.n.data)) }
func (i info) Mode() fs.FileMode  { return i.n.mode }
func (i info) ModTime() time.Time { return i.n.mtime }
func (i info) IsDir() bool        { return i.n.isDir() }
func (i info) Sys() any           { return nil }

type memFile struct {
	info info
	r    *strings.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Read(p []byte) (int, error) {
	if f.info.IsDir() {
		return 0, sandbox.ErrIsDir
	}
	if f.r == nil {
		f.r = strings.NewReader(string(f.info.n.data))
	}
	return f.r.Read(p)
}
func (f *memFile) Close() error { return nil }

var _ io.Reader = (*memFile)(nil)
