package server

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
)

// MaxTransferBytes bounds one Pack or Unpack: the tar stream is held
// whole on each side (a tree larger than this is copied in parts).
const MaxTransferBytes = sandbox.MaxFileSize

// names lists what Glob finds under dir (files, and entries that are
// neither files nor directories), undescribed.
func (b backend) names(ctx context.Context, dir string) ([]sandbox.FileInfo, error) {
	names, err := b.sb.Glob(ctx, treePattern(dir))
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.FileInfo, len(names))
	for i, n := range names {
		out[i].Path = n
	}
	return out, nil
}

func treePattern(dir string) string {
	if d := path.Clean(dir); d != "." && d != "" {
		return d + "/**"
	}
	return "**"
}

// files lists the regular files under dir (root-relative paths), each
// described, changed after since when it is set.
func (b backend) files(ctx context.Context, dir string, since time.Time) ([]sandbox.FileInfo, error) {
	names, err := b.sb.Glob(ctx, treePattern(dir))
	if err != nil {
		return nil, err
	}
	infos := make([]sandbox.FileInfo, len(names))
	err = parallel(ctx, len(names), func(i int) error {
		fi, err := b.sb.Stat(ctx, names[i])
		if errors.Is(err, sandbox.ErrNotFound) {
			return nil // removed since the glob
		}
		fi.Path = names[i]
		infos[i] = fi
		return err
	})
	if err != nil {
		return nil, err
	}
	out := infos[:0]
	for _, fi := range infos {
		if fi.Kind == sandbox.KindFile && (since.IsZero() || fi.ModTime.After(since)) {
			out = append(out, fi)
		}
	}
	return out, nil
}

// workers is how many operations a transfer keeps in flight on the
// served sandbox: a tier whose file operations cross a boundary (the
// isolated tier's helper) serves them concurrently, and a write waits on
// the disk (fsync) more than on a core.
const workers = 32

// parallel calls fn(0..n-1) from at most workers goroutines and returns
// the first error (the others then stop taking work).
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
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

// Changed describes the regular files under dir changed after since.
func (b backend) Changed(ctx context.Context, dir string, since time.Time) ([]sandbox.FileInfo, error) {
	return b.files(ctx, dir, since)
}

// Pack writes the regular files under dir changed after since as a tar
// stream, names relative to dir, each with its size, permission bits and
// modification time (the manifest is the headers).
func (b backend) Pack(ctx context.Context, dir string, since time.Time, w io.Writer) error {
	var fis []sandbox.FileInfo
	var err error
	if since.IsZero() {
		// Every file goes: reading one describes it, so no Stat first.
		fis, err = b.names(ctx, dir)
	} else {
		fis, err = b.files(ctx, dir, since)
	}
	if err != nil {
		return err
	}
	var total atomic.Int64
	datas := make([][]byte, len(fis))
	present := make([]bool, len(fis))
	err = parallel(ctx, len(fis), func(i int) error {
		data, got, err := sandbox.ReadStat(ctx, b.sb, fis[i].Path, 0)
		if errors.Is(err, sandbox.ErrNotFound) {
			return nil // removed since the listing: not sent
		}
		if err != nil {
			if fi, serr := b.sb.Stat(ctx, fis[i].Path); serr == nil && fi.Kind != sandbox.KindFile {
				return nil // a fifo, a device: not a file to copy
			}
			return err
		}
		if total.Add(int64(len(data))) > MaxTransferBytes {
			return fmt.Errorf("pack %s: more than %d bytes: %w: copy the tree in parts", dir, MaxTransferBytes, sandbox.ErrTooLarge)
		}
		got.Path = fis[i].Path // the name listed, not a link's target
		fis[i], datas[i], present[i] = got, data, true
		return nil
	})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	prefix := path.Clean(dir) + "/"
	for i, fi := range fis {
		if !present[i] {
			continue
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(fi.Path, prefix), Size: int64(len(datas[i])), Mode: int64(fi.Mode.Perm()), ModTime: fi.ModTime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(datas[i]); err != nil {
			return err
		}
	}
	return tw.Close()
}

// Unpack writes the regular files and directories of the tar stream r
// below dir, each file replaced atomically by the sandbox's Write (a new
// file gets 0644, an existing one keeps its mode: the stream's modes are
// not applied). The whole stream is checked first: an entry that is no
// file or directory, or whose name leads out of dir, refuses it with an
// error naming the entry, and no file is written. Files are then written
// concurrently; after a failure the files written stay, and the count
// says how many.
func (b backend) Unpack(ctx context.Context, dir string, r io.Reader) (int, error) {
	type file struct {
		dst  string
		data []byte
	}
	var files []file
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("unpack: %w", err)
		}
		name := path.Clean(hdr.Name)
		if hdr.Name == "" || path.IsAbs(hdr.Name) || name == ".." || strings.HasPrefix(name, "../") || strings.ContainsRune(hdr.Name, 0) {
			return 0, fmt.Errorf("unpack: entry %q leads out of %s: %w", hdr.Name, dir, sandbox.ErrEscape)
		}
		dst := path.Join(dir, name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			// Made now: directories come before what they hold.
			if err := b.sb.Mkdir(ctx, dst); err != nil {
				return 0, err
			}
		case tar.TypeReg:
			if hdr.Size > MaxTransferBytes {
				return 0, fmt.Errorf("unpack: %s: %w", hdr.Name, sandbox.ErrTooLarge)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return 0, fmt.Errorf("unpack: %s: %w", hdr.Name, err)
			}
			files = append(files, file{dst, data})
		default:
			return 0, fmt.Errorf("unpack: entry %q is neither a file nor a directory (type %q): %w", hdr.Name, hdr.Typeflag, sandbox.ErrUnsupported)
		}
	}
	var n atomic.Int64
	err := parallel(ctx, len(files), func(i int) error {
		if err := b.sb.Write(ctx, files[i].dst, files[i].data); err != nil {
			return err
		}
		n.Add(1)
		return nil
	})
	return int(n.Load()), err
}
