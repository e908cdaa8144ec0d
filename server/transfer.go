package server

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/hutchsandbox/hutch/internal/treetar"
	"github.com/hutchsandbox/hutch/sandbox"
)

// MaxTransferBytes bounds one Pack or Unpack.
const MaxTransferBytes = treetar.MaxBytes

// workers is how many operations a transfer keeps in flight on a served
// sandbox that has no Pack of its own: a tier whose file operations cross
// a boundary serves them concurrently, and a write waits on the disk
// (fsync) more than on a core.
const workers = 32

// names lists what Glob finds under dir, undescribed.
func (b backend) names(ctx context.Context, dir string) ([]sandbox.FileInfo, error) {
	names, err := b.sb.Glob(ctx, treetar.Pattern(dir))
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.FileInfo, len(names))
	for i, n := range names {
		out[i].Path = n
	}
	return out, nil
}

// files lists the regular files under dir (root-relative paths), each
// described, changed after since when it is set.
func (b backend) files(ctx context.Context, dir string, since time.Time) ([]sandbox.FileInfo, error) {
	infos, err := b.names(ctx, dir)
	if err != nil {
		return nil, err
	}
	err = treetar.Parallel(ctx, len(infos), workers, func(i int) error {
		fi, err := b.sb.Stat(ctx, infos[i].Path)
		if errors.Is(err, sandbox.ErrNotFound) {
			return nil // removed since the glob
		}
		fi.Path = infos[i].Path
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

// Changed describes the regular files under dir changed after since.
func (b backend) Changed(ctx context.Context, dir string, since time.Time) ([]sandbox.FileInfo, error) {
	return b.files(ctx, dir, since)
}

// Pack writes the regular files under dir changed after since as a tar
// stream: in one operation of the served tier when it is a
// sandbox.Packer, else read workers at once.
func (b backend) Pack(ctx context.Context, dir string, since time.Time, w io.Writer) error {
	if p, ok := b.sb.(sandbox.Packer); ok {
		return p.Pack(ctx, dir, since, w)
	}
	var fis []sandbox.FileInfo
	var err error
	if since.IsZero() {
		fis, err = b.names(ctx, dir) // reading a file describes it
	} else {
		fis, err = b.files(ctx, dir, since)
	}
	if err != nil {
		return err
	}
	var total atomic.Int64
	datas := make([][]byte, len(fis))
	present := make([]bool, len(fis))
	err = treetar.Parallel(ctx, len(fis), workers, func(i int) error {
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
	for i, fi := range fis {
		if !present[i] {
			continue
		}
		if err := tw.WriteHeader(treetar.Header(dir, fi.Path, fi, int64(len(datas[i])))); err != nil {
			return err
		}
		if _, err := tw.Write(datas[i]); err != nil {
			return err
		}
	}
	return tw.Close()
}

// Unpack writes the files of the tar stream r below dir: in one operation
// of the served tier when it is a sandbox.Packer, else through its Write,
// workers at once (see treetar.Unpack).
func (b backend) Unpack(ctx context.Context, dir string, r io.Reader) (int, error) {
	if p, ok := b.sb.(sandbox.Packer); ok {
		return p.Unpack(ctx, dir, r)
	}
	write := func(ctx context.Context, f treetar.File) error { return b.sb.Write(ctx, f.Dst, f.Data) }
	return treetar.Unpack(ctx, r, dir, treetar.Target{Mkdir: b.sb.Mkdir, Write: write, Workers: workers})
}
