package hostfs

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"time"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/internal/treetar"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Pack writes the regular files under dir changed after since (all when
// zero) to w as one tar stream (see sandbox.Packer), a file at a time:
// never whole in memory.
func (s *FS) Pack(ctx context.Context, dir string, since time.Time, w io.Writer) error {
	return s.PackHiding(ctx, dir, since, nil, w)
}

// PackHiding is Pack leaving out the files whose root-relative paths hide
// names (a policy's denied paths), when hide is not nil. Small files are
// read packWorkers at once, at most packAhead ahead of the stream; a
// bigger one is copied into it when its turn comes.
func (s *FS) PackHiding(ctx context.Context, dir string, since time.Time, hide func(rel string) bool, w io.Writer) error {
	names, err := s.Glob(ctx, treetar.Pattern(dir))
	if err != nil {
		return err
	}
	if hide != nil {
		names = slices.DeleteFunc(names, hide)
	}
	var total int64
	return treetar.Write(w, packBuffer, func(tw *tar.Writer) error {
		return treetar.InOrder(ctx, len(names), packAhead, packWorkers,
			func(i int) (packed, error) { return s.readAhead(ctx, names[i], since) },
			func(i int, p packed) error { return s.packOne(ctx, tw, dir, names[i], p, since, &total) })
	})
}

// Pack's read-ahead: how many files, how big one may be, how many reads
// at once; and how much of the stream it writes at once.
const (
	packAhead   = 64
	packSmall   = 1 << 20
	packWorkers = 16
	packBuffer  = 64 << 10
)

// packed is what Pack read ahead of one name.
type packed struct {
	skip bool // gone since the glob, not a regular file, or not changed since
	info sandbox.FileInfo
	data []byte // nil for a file of more than packSmall bytes: read in turn
}

// readAhead reads the file at name when it is small.
func (s *FS) readAhead(ctx context.Context, name string, since time.Time) (packed, error) {
	if fi, err := s.Stat(ctx, name); errors.Is(err, fs.ErrNotExist) || err == nil && fi.Kind != sandbox.KindFile {
		return packed{skip: true}, nil // gone since the glob; a fifo, a device
	} else if err != nil {
		return packed{}, err
	}
	f, info, release, err := s.openRead(ctx, name, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return packed{skip: true}, nil
	}
	if err != nil {
		return packed{}, err
	}
	defer release()
	if !since.IsZero() && !info.ModTime.After(since) {
		return packed{skip: true}, nil
	}
	if info.Size > packSmall {
		return packed{info: info}, nil
	}
	data := make([]byte, info.Size)
	if _, err := io.ReadFull(f, data); err != nil {
		return packed{}, tierkit.PathError("pack", name, fmt.Errorf("changed while it was read: %w", err))
	}
	return packed{info: info, data: data}, nil
}

// packOne adds one file to tw: what was read ahead, or a big file read
// now (unless it is older than since).
func (s *FS) packOne(ctx context.Context, tw *tar.Writer, dir, name string, p packed, since time.Time, total *int64) error {
	if p.skip {
		return nil
	}
	info, src := p.info, io.Reader(bytes.NewReader(p.data))
	if p.data == nil {
		f, opened, release, err := s.openRead(ctx, name, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer release()
		if !since.IsZero() && !opened.ModTime.After(since) {
			return nil
		}
		info, src = opened, f
	}
	if *total += info.Size; *total > treetar.MaxBytes {
		return tierkit.PathError("pack", dir, fmt.Errorf("more than %d bytes: %w: copy the tree in parts", treetar.MaxBytes, sandbox.ErrTooLarge))
	}
	if err := tw.WriteHeader(treetar.Header(dir, name, info, info.Size)); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, src, info.Size); err != nil {
		return tierkit.PathError("pack", name, fmt.Errorf("changed while it was read: %w", err))
	}
	return nil
}

// Unpack writes the files of the tar stream r below dir (see
// sandbox.Packer), each as Write does.
func (s *FS) Unpack(ctx context.Context, dir string, r io.Reader) (int, error) {
	return s.UnpackHiding(ctx, dir, r, nil, 0)
}

// unpackWorkers is how many of an unpack's writes run at once: each
// waits on its sync more than on a core, and syncs that run together
// share the filesystem's journal commits.
const unpackWorkers = 32

// UnpackHiding is Unpack refusing a file whose root-relative path hide
// names (a policy's denied paths) and, when limit > 0, a file of more
// than limit bytes.
func (s *FS) UnpackHiding(ctx context.Context, dir string, r io.Reader, hide func(rel string) bool, limit int64) (int, error) {
	refuse := func(op, dst string) error {
		if hide != nil && hide(dst) {
			return tierkit.PathError(op, dst, fmt.Errorf("denied by the policy: %w", fs.ErrPermission))
		}
		return nil
	}
	return treetar.Unpack(ctx, r, dir, treetar.Target{
		Mkdir: func(ctx context.Context, dst string) error {
			if err := refuse("mkdir", dst); err != nil {
				return err
			}
			return s.Mkdir(ctx, dst)
		},
		Write: func(ctx context.Context, f treetar.File) error {
			if err := refuse("write", f.Dst); err != nil {
				return err
			}
			if limit > 0 && int64(len(f.Data)) > limit {
				return tierkit.PathError("write", f.Dst, fmt.Errorf("more than the file size limit of %d bytes: %w", limit, sandbox.ErrTooLarge))
			}
			return s.Write(ctx, f.Dst, f.Data)
		},
		Workers: unpackWorkers,
	})
}
