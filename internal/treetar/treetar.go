// Package treetar moves a tree of regular files as one tar stream, whose
// headers are its manifest (name, size, permission bits, modification
// time): the remote tier's bulk copies. Both ends of hutch use it — the
// server's generic path over any sandbox, and the file guard (hostfs) of
// the tiers that serve it directly — so a tree has one format and one
// set of checks.
package treetar

import (
	"archive/tar"
	"bufio"
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

	"github.com/hutchsandbox/hutch/sandbox"
)

// MaxBytes bounds the content of one stream.
const MaxBytes = sandbox.MaxFileSize

// Pattern is the glob of every file under dir ("." or "" the root).
func Pattern(dir string) string {
	if d := path.Clean(dir); d != "." && d != "" {
		return d + "/**"
	}
	return "**"
}

// Header is a regular file's header: name is the file's path relative to
// dir (root-relative name), with fi's bits and time and size bytes.
func Header(dir, name string, fi sandbox.FileInfo, size int64) *tar.Header {
	rel := strings.TrimPrefix(name, path.Clean(dir)+"/")
	return &tar.Header{Typeflag: tar.TypeReg, Name: rel, Size: size, Mode: int64(fi.Mode.Perm()), ModTime: fi.ModTime, Format: tar.FormatPAX}
}

// Destination is where entry name of a stream unpacked below dir goes; a
// name that is empty, absolute, holds a NUL or leads out of dir is
// ErrEscape.
func Destination(dir, name string) (string, error) {
	clean := path.Clean(name)
	if name == "" || path.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("unpack: entry %q leads out of %s: %w", name, dir, sandbox.ErrEscape)
	}
	return path.Join(dir, clean), nil
}

// File is one regular file of a stream, at its destination.
type File struct {
	Dst     string
	Data    []byte
	Mode    fs.FileMode // the stream's permission bits
	ModTime time.Time
}

// Target is what Unpack writes into.
type Target struct {
	Mkdir func(ctx context.Context, dst string) error
	Write func(ctx context.Context, f File) error
	// Workers is how many writes run at once (at least 1).
	Workers int
}

// Unpack writes the directories and regular files of the tar stream r
// below dir into t, and says how many files it wrote. Entries are checked
// as they come: one that is neither a file nor a directory, or whose name
// leads out of dir, stops it with an error naming the entry. Reading and
// writing overlap: files are queued as they come, at most queueBytes and
// queueFiles at a time, and Workers writers take them from their
// directories in turn (writes into one directory wait on each other in
// the kernel, writes into several do not). The stream's order holds
// where it means something: the same file twice, or a directory or file
// in the path of a file not yet written, waits until the queue is
// written. After a failure the files written stay, and the count says
// how many.
func Unpack(ctx context.Context, r io.Reader, dir string, t Target) (int, error) {
	q := newQueue(ctx, t)
	defer q.stop()
	// Headers are read 512 bytes at a time: buffered, a pipe or a
	// stream's inbox is read in chunks, not a call per header.
	tr := tar.NewReader(bufio.NewReaderSize(r, readBuffer))
	var total int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			err := q.drain()
			return q.written(), err
		}
		if err != nil {
			return q.fail(fmt.Errorf("unpack: %w", err))
		}
		dst, err := Destination(dir, hdr.Name)
		if err != nil {
			return q.fail(err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if q.crosses(dst) {
				if err := q.drain(); err != nil {
					return q.written(), err
				}
			}
			if err := t.Mkdir(ctx, dst); err != nil {
				return q.fail(err)
			}
		case tar.TypeReg:
			if total += hdr.Size; hdr.Size < 0 || total > MaxBytes {
				return q.fail(fmt.Errorf("unpack: more than %d bytes: %w", MaxBytes, sandbox.ErrTooLarge))
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return q.fail(fmt.Errorf("unpack: %s: %w", hdr.Name, err))
			}
			if q.crosses(dst) {
				// The same file twice, or a file below one queued (crosses
				// walks dst's parents too): the stream's order decides, as
				// it would one at a time.
				if err := q.drain(); err != nil {
					return q.written(), err
				}
			}
			if err := q.put(File{Dst: dst, Data: data, Mode: fs.FileMode(hdr.Mode).Perm(), ModTime: hdr.ModTime}); err != nil {
				return q.written(), err
			}
		default:
			return q.fail(fmt.Errorf("unpack: entry %q is neither a file nor a directory (type %q): %w", hdr.Name, hdr.Typeflag, sandbox.ErrUnsupported))
		}
	}
}

// queue is Unpack's files between the stream and the writers: queued or
// being written, by directory, with the writers taking the directories
// in turn.
type queue struct {
	ctx  context.Context
	t    Target
	mu   sync.Mutex
	cond *sync.Cond
	dirs map[string][]File // the files waiting, by directory
	ring []string          // the directories with files waiting, in turn
	next int               // the ring's next directory
	// pending counts the files queued or being written at each
	// destination; held and files are their bytes and number.
	pending     map[string]int
	held, files int
	n           int
	err         error
	closed      bool
	wg          sync.WaitGroup
	unwatch     func() bool
}

// queueBytes and queueFiles bound what Unpack holds before it is
// written; readBuffer is how much of the stream it reads at once.
const (
	queueBytes = 16 << 20
	queueFiles = 256
	readBuffer = 64 << 10
)

func newQueue(ctx context.Context, t Target) *queue {
	q := &queue{ctx: ctx, t: t, dirs: map[string][]File{}, pending: map[string]int{}}
	q.cond = sync.NewCond(&q.mu)
	// A cancel wakes every wait, which then sees it.
	q.unwatch = context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.setErr(ctx.Err())
		q.mu.Unlock()
	})
	for range max(t.Workers, 1) {
		q.wg.Add(1)
		go q.work()
	}
	return q
}

// setErr keeps the first error and wakes every wait; mu is held.
func (q *queue) setErr(err error) {
	if q.err == nil && err != nil {
		q.err = err
	}
	q.cond.Broadcast()
}

// put queues f, waiting while the queue is full.
func (q *queue) put(f File) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.err == nil && q.files > 0 && (q.files >= queueFiles || q.held+len(f.Data) > queueBytes) {
		q.cond.Wait()
	}
	if q.err != nil {
		return q.err
	}
	d := path.Dir(f.Dst)
	if len(q.dirs[d]) == 0 {
		q.ring = append(q.ring, d)
	}
	q.dirs[d] = append(q.dirs[d], f)
	q.pending[f.Dst]++
	q.held += len(f.Data)
	q.files++
	q.cond.Broadcast()
	return nil
}

// crosses reports whether dst, or one of its parents, is a file queued
// or being written.
func (q *queue) crosses(dst string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for d := dst; d != "." && d != "/" && d != ""; d = path.Dir(d) {
		if q.pending[d] > 0 {
			return true
		}
	}
	return false
}

// drain waits until every file queued is written, or one failed.
func (q *queue) drain() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.err == nil && q.files > 0 {
		q.cond.Wait()
	}
	return q.err
}

// work writes the files queued, taking the directories in turn, until
// the queue is stopped or a write failed.
func (q *queue) work() {
	defer q.wg.Done()
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		for q.err == nil && !q.closed && len(q.ring) == 0 {
			q.cond.Wait()
		}
		if q.err != nil || len(q.ring) == 0 {
			return
		}
		q.next %= len(q.ring)
		d := q.ring[q.next]
		f := q.dirs[d][0]
		if q.dirs[d] = q.dirs[d][1:]; len(q.dirs[d]) == 0 {
			delete(q.dirs, d)
			q.ring = slices.Delete(q.ring, q.next, q.next+1)
		} else {
			q.next++
		}
		q.mu.Unlock()
		err := q.t.Write(q.ctx, f)
		q.mu.Lock()
		if err != nil {
			q.setErr(err)
			continue
		}
		q.n++
		if q.pending[f.Dst]--; q.pending[f.Dst] == 0 {
			delete(q.pending, f.Dst)
		}
		q.held -= len(f.Data)
		q.files--
		q.cond.Broadcast()
	}
}

// written is how many files were written.
func (q *queue) written() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// fail stops the queue's writers and returns how many files they wrote,
// and err.
func (q *queue) fail(err error) (int, error) {
	q.mu.Lock()
	q.setErr(err)
	q.mu.Unlock()
	q.stop()
	return q.written(), err
}

// stop ends the writers once the files queued are written (or one
// failed) and waits for them.
func (q *queue) stop() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
	q.wg.Wait()
	q.unwatch()
}

// Write writes the tar stream that fill makes to w in chunks of size
// bytes (a write to a pipe or a stream is a system call or a frame, not
// one per header and per file), then its end.
func Write(w io.Writer, size int, fill func(tw *tar.Writer) error) error {
	bw := bufio.NewWriterSize(w, size)
	tw := tar.NewWriter(bw)
	if err := fill(tw); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// InOrder reads items 0..n-1 workers at once, at most ahead of the one
// being emitted, and emits each in order: the read-ahead of a stream
// written in order (a tree's archive). It stops at the first error.
func InOrder[T any](ctx context.Context, n, ahead, workers int, read func(i int) (T, error), emit func(i int, v T) error) error {
	got := make([]T, min(ahead, n))
	for start := 0; start < n; start += len(got) {
		chunk := got[:min(len(got), n-start)]
		if err := Parallel(ctx, len(chunk), workers, func(i int) error {
			var err error
			chunk[i], err = read(start + i)
			return err
		}); err != nil {
			return err
		}
		for i, v := range chunk {
			if err := emit(start+i, v); err != nil {
				return err
			}
		}
		clear(chunk) // what was emitted is not held
	}
	return nil
}

// Parallel calls fn(0..n-1) from at most workers goroutines and returns
// the first error (the others then stop taking work).
func Parallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(max(workers, 1), n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					cancel(err)
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}
