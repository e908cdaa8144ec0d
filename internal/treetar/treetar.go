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
	"strings"
	"sync"
	"sync/atomic"
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

// batchBytes and batchFiles bound what Unpack holds before writing;
// readBuffer is how much of the stream it reads at once.
const (
	batchBytes = 16 << 20
	batchFiles = 256
	readBuffer = 64 << 10
)

// Unpack writes the directories and regular files of the tar stream r
// below dir into t, and says how many files it wrote. Entries are checked
// as they come: one that is neither a file nor a directory, or whose name
// leads out of dir, stops it with an error naming the entry. Directories
// are made as they come (after the files held whose paths they would
// cross); files are held at most batchBytes at a time and written
// Workers at once, taken from their directories in turn (writes into one
// directory wait on each other in the kernel, writes into several do
// not). After a failure the files written stay, and the count says how
// many.
func Unpack(ctx context.Context, r io.Reader, dir string, t Target) (int, error) {
	var n atomic.Int64
	var batch []File
	held := 0
	pending := map[string]bool{} // the destinations in batch
	flush := func() error {
		order := interleaved(batch)
		err := Parallel(ctx, len(order), t.Workers, func(i int) error {
			if err := t.Write(ctx, batch[order[i]]); err != nil {
				return err
			}
			n.Add(1)
			return nil
		})
		batch, held = batch[:0], 0
		clear(pending)
		return err
	}
	// crosses reports whether making directory dst would meet a file held
	// (at dst, or at one of its parents).
	crosses := func(dst string) bool {
		for d := dst; d != "." && d != "/" && d != ""; d = path.Dir(d) {
			if pending[d] {
				return true
			}
		}
		return false
	}
	// Headers are read 512 bytes at a time: buffered, a pipe or a
	// stream's inbox is read in chunks, not a call per header.
	tr := tar.NewReader(bufio.NewReaderSize(r, readBuffer))
	var total int64
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			err := flush() // before the count is read
			return int(n.Load()), err
		}
		if err != nil {
			return int(n.Load()), fmt.Errorf("unpack: %w", err)
		}
		dst, err := Destination(dir, hdr.Name)
		if err != nil {
			return int(n.Load()), err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if crosses(dst) {
				if err := flush(); err != nil {
					return int(n.Load()), err
				}
			}
			if err := t.Mkdir(ctx, dst); err != nil {
				return int(n.Load()), err
			}
		case tar.TypeReg:
			if total += hdr.Size; hdr.Size < 0 || total > MaxBytes {
				return int(n.Load()), fmt.Errorf("unpack: more than %d bytes: %w", MaxBytes, sandbox.ErrTooLarge)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return int(n.Load()), fmt.Errorf("unpack: %s: %w", hdr.Name, err)
			}
			if pending[dst] || crosses(path.Dir(dst)) {
				// The same file twice, or a file below one held: the
				// stream's order decides, as it would one at a time.
				if err := flush(); err != nil {
					return int(n.Load()), err
				}
			}
			batch = append(batch, File{Dst: dst, Data: data, Mode: fs.FileMode(hdr.Mode).Perm(), ModTime: hdr.ModTime})
			pending[dst] = true
			if held += len(data); held >= batchBytes || len(batch) >= batchFiles {
				if err := flush(); err != nil {
					return int(n.Load()), err
				}
			}
		default:
			return int(n.Load()), fmt.Errorf("unpack: entry %q is neither a file nor a directory (type %q): %w", hdr.Name, hdr.Typeflag, sandbox.ErrUnsupported)
		}
	}
}

// interleaved orders the indices of files so that consecutive ones are
// in different directories where it can: the first file of each
// directory (in the order the directories first come), then the second
// of each, and so on.
func interleaved(files []File) []int {
	var dirs [][]int
	at := map[string]int{}
	for i, f := range files {
		d := path.Dir(f.Dst)
		k, ok := at[d]
		if !ok {
			k = len(dirs)
			at[d] = k
			dirs = append(dirs, nil)
		}
		dirs[k] = append(dirs[k], i)
	}
	order := make([]int, 0, len(files))
	for round := 0; len(order) < len(files); round++ {
		for _, d := range dirs {
			if round < len(d) {
				order = append(order, d[round])
			}
		}
	}
	return order
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
