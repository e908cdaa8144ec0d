package streamclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Backend is what a Front's methods call: a Conn, or a tier's own
// fallback (the container tier's runtime exec per operation). Paths are
// root-relative and already cleaned.
type Backend interface {
	ReadStat(ctx context.Context, rel string, max int64) ([]byte, sandbox.FileInfo, error)
	Write(ctx context.Context, rel string, data []byte) error
	Stat(ctx context.Context, rel string) (sandbox.FileInfo, error)
	Glob(ctx context.Context, pattern string, dirsOnly bool) ([]string, error)
	List(ctx context.Context, rel string) ([]sandbox.FileInfo, error)
	Search(ctx context.Context, req sandbox.SearchRequest) (sandbox.SearchResult, error)
	Mkdir(ctx context.Context, rel string) error
	Remove(ctx context.Context, rel string, recursive bool) error
	Rename(ctx context.Context, from, to string) error
	Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error)
}

var _ Backend = (*Conn)(nil)

// FileTimeout is the deadline of a file operation whose context has none:
// a paused or hung peer holds no call longer than this.
const FileTimeout = 30 * time.Second

// Front is the file half of a sandbox.Sandbox whose operations go to a
// Backend: each method cleans its paths lexically against the root (the
// server resolves links where the files are), refuses a closed sandbox,
// gives an operation without a deadline FileTimeout, and passes what the
// backend returns through the tier's failed. Exec, Supports, Instructions
// and Close are the tier's own. Make one with NewFront.
type Front struct {
	root    string
	closed  func() bool
	ready   func(ctx context.Context) (Backend, error)
	failed  func(err error) error
	timeout error // the cause of the default deadline
}

// NewFront returns the file half of a sandbox rooted at root whose files
// peer serves ("the container", "the remote hutch"): closed reports
// whether the sandbox was closed; ready returns the backend (starting or
// reconnecting first when needed); failed turns a backend's error into
// the caller's (it may check whether the peer went away).
func NewFront(root, peer string, closed func() bool, ready func(context.Context) (Backend, error), failed func(error) error) Front {
	return Front{root: root, closed: closed, ready: ready, failed: failed,
		timeout: fmt.Errorf("no answer from %s within %v, the deadline of a file operation without one of its own (is it paused or overloaded?): resume it, or retry: %w", peer, FileTimeout, context.DeadlineExceeded)}
}

// Command checks cmd and makes it what a backend runs: defaults filled,
// its Dir resolved lexically against the root ("" is the root), env
// under its own environment.
func (f *Front) Command(cmd sandbox.Command, env map[string]string) (sandbox.Command, error) {
	cmd, err := cmd.Validate()
	if err != nil {
		return cmd, err
	}
	dir := cmd.Dir
	if dir == "" {
		dir = "."
	}
	if cmd.Dir, err = f.Clean("exec", dir); err != nil {
		return cmd, err
	}
	cmd.Env = tierkit.MergeEnv(env, cmd.Env)
	return cmd, nil
}

// Root is the root paths are resolved against.
func (f *Front) Root() string { return f.root }

// Clean resolves a caller's path lexically, before anything starts; a
// closed sandbox says so first.
func (f *Front) Clean(op, p string) (string, error) {
	if f.closed() {
		return "", sandbox.ErrClosed
	}
	rel, err := sandbox.Clean(f.root, p)
	if err != nil {
		return "", tierkit.PathError(op, p, err)
	}
	return rel, nil
}

// fileOp runs op on the ready backend under the file deadline.
func fileOp[T any](ctx context.Context, f *Front, op func(context.Context, Backend) (T, error)) (T, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, FileTimeout, f.timeout)
		defer cancel()
	}
	timedOut := func(err error) error {
		if errors.Is(err, context.DeadlineExceeded) && errors.Is(context.Cause(ctx), f.timeout) {
			return f.timeout
		}
		return err
	}
	var zero T
	b, err := f.ready(ctx)
	if err != nil {
		return zero, timedOut(err)
	}
	v, err := op(ctx, b)
	if err != nil {
		return zero, f.failed(timedOut(err))
	}
	return v, nil
}

// noValue adapts an operation without a result to fileOp.
func noValue(op func(context.Context, Backend) error) func(context.Context, Backend) (struct{}, error) {
	return func(ctx context.Context, b Backend) (struct{}, error) { return struct{}{}, op(ctx, b) }
}

// Read returns the content of a regular file.
func (f *Front) Read(ctx context.Context, p string) ([]byte, error) {
	data, _, err := f.ReadStat(ctx, p, 0)
	return data, err
}

// ReadStat reads at most max bytes (all, up to sandbox.MaxFileSize, when
// max <= 0) of a regular file and describes it, in one operation.
func (f *Front) ReadStat(ctx context.Context, p string, max int64) ([]byte, sandbox.FileInfo, error) {
	rel, err := f.Clean("read", p)
	if err != nil {
		return nil, sandbox.FileInfo{}, err
	}
	type read struct {
		data []byte
		fi   sandbox.FileInfo
	}
	r, err := fileOp(ctx, f, func(ctx context.Context, b Backend) (read, error) {
		data, fi, err := b.ReadStat(ctx, rel, max)
		return read{data, fi}, err
	})
	if err != nil {
		return nil, sandbox.FileInfo{}, err
	}
	r.fi.Path = rel
	return r.data, r.fi, nil
}

// Write replaces a file atomically where the files are, creating missing
// parent directories; a new file gets 0644, an existing one keeps its
// mode.
func (f *Front) Write(ctx context.Context, p string, data []byte) error {
	rel, err := f.Clean("write", p)
	if err != nil {
		return err
	}
	if len(data) > sandbox.MaxFileSize {
		return tierkit.PathError("write", p, fmt.Errorf("%d bytes is over the %d byte limit: %w", len(data), sandbox.MaxFileSize, sandbox.ErrTooLarge))
	}
	_, err = fileOp(ctx, f, noValue(func(ctx context.Context, b Backend) error {
		if rel == "." {
			return tierkit.PathError("write", p, sandbox.ErrIsDir)
		}
		return b.Write(ctx, rel, data)
	}))
	return err
}

// Stat describes a path, following symbolic links inside the root.
func (f *Front) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	rel, err := f.Clean("stat", p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := fileOp(ctx, f, func(ctx context.Context, b Backend) (sandbox.FileInfo, error) { return b.Stat(ctx, rel) })
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	fi.Path = rel
	return fi, nil
}

// Glob matches pattern under the root (see sandbox.Sandbox for the rules).
func (f *Front) Glob(ctx context.Context, pattern string) ([]string, error) {
	if _, err := f.Clean("glob", "."); err != nil {
		return nil, err
	}
	pat, dirsOnly, err := sandbox.CleanPattern(f.root, pattern)
	if err != nil {
		return nil, tierkit.PathError("glob", pattern, err)
	}
	return fileOp(ctx, f, func(ctx context.Context, b Backend) ([]string, error) { return b.Glob(ctx, pat, dirsOnly) })
}

// List returns a directory's entries, listed where the files are.
func (f *Front) List(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	rel, err := f.Clean("list", p)
	if err != nil {
		return nil, err
	}
	return fileOp(ctx, f, func(ctx context.Context, b Backend) ([]sandbox.FileInfo, error) { return b.List(ctx, rel) })
}

// Search runs req where the files are, in one call. Dir and an absolute
// Glob are resolved against the root first.
func (f *Front) Search(ctx context.Context, req sandbox.SearchRequest) (sandbox.SearchResult, error) {
	dir := req.Dir
	if dir == "" {
		dir = "."
	}
	rel, err := f.Clean("search", dir)
	if err != nil {
		return sandbox.SearchResult{}, err
	}
	req.Dir = rel
	if req.Glob, err = sandbox.CleanSearchGlob(f.root, req.Glob); err != nil {
		return sandbox.SearchResult{}, err
	}
	return fileOp(ctx, f, func(ctx context.Context, b Backend) (sandbox.SearchResult, error) { return b.Search(ctx, req) })
}

// Mkdir creates a directory and its parents.
func (f *Front) Mkdir(ctx context.Context, p string) error {
	rel, err := f.Clean("mkdir", p)
	if err != nil {
		return err
	}
	_, err = fileOp(ctx, f, noValue(func(ctx context.Context, b Backend) error { return b.Mkdir(ctx, rel) }))
	return err
}

// Remove deletes an entry (a tree when recursive).
func (f *Front) Remove(ctx context.Context, p string, recursive bool) error {
	rel, err := f.Clean("remove", p)
	if err != nil {
		return err
	}
	if len(p) > 1 && strings.HasSuffix(p, "/") {
		rel += "/" // the server checks that it names a directory
	}
	_, err = fileOp(ctx, f, noValue(func(ctx context.Context, b Backend) error { return b.Remove(ctx, rel, recursive) }))
	return err
}

// Rename moves an entry.
func (f *Front) Rename(ctx context.Context, from, to string) error {
	src, err := f.Clean("rename", from)
	if err != nil {
		return err
	}
	dst, err := f.Clean("rename", to)
	if err != nil {
		return err
	}
	_, err = fileOp(ctx, f, noValue(func(ctx context.Context, b Backend) error { return b.Rename(ctx, src, dst) }))
	return err
}
