package server

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
)

// MaxTransferBytes bounds one Pack or Unpack: the tar stream is held
// whole on each side (a tree larger than this is copied in parts).
const MaxTransferBytes = sandbox.MaxFileSize

// files lists the regular files under dir (root-relative paths), each
// described, changed after since when it is set.
func (b backend) files(ctx context.Context, dir string, since time.Time) ([]sandbox.FileInfo, error) {
	pattern := "**"
	if d := path.Clean(dir); d != "." && d != "" {
		pattern = d + "/**"
	}
	names, err := b.sb.Glob(ctx, pattern)
	if err != nil {
		return nil, err
	}
	out := make([]sandbox.FileInfo, 0, len(names))
	for _, n := range names {
		fi, err := b.sb.Stat(ctx, n)
		if errors.Is(err, sandbox.ErrNotFound) {
			continue // removed since the glob
		}
		if err != nil {
			return nil, err
		}
		if fi.Kind != sandbox.KindFile || (!since.IsZero() && !fi.ModTime.After(since)) {
			continue
		}
		fi.Path = n
		out = append(out, fi)
	}
	return out, nil
}

// Changed describes the regular files under dir changed after since.
func (b backend) Changed(ctx context.Context, dir string, since time.Time) ([]sandbox.FileInfo, error) {
	return b.files(ctx, dir, since)
}

// Pack writes the regular files under dir changed after since as a tar
// stream, names relative to dir, each with its size, permission bits and
// modification time (the manifest is the headers).
func (b backend) Pack(ctx context.Context, dir string, since time.Time, w io.Writer) error {
	fis, err := b.files(ctx, dir, since)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	var total int64
	for _, fi := range fis {
		data, got, err := sandbox.ReadStat(ctx, b.sb, fi.Path, 0)
		if errors.Is(err, sandbox.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if total += int64(len(data)); total > MaxTransferBytes {
			return fmt.Errorf("pack %s: more than %d bytes: %w: copy the tree in parts", dir, MaxTransferBytes, sandbox.ErrTooLarge)
		}
		name := strings.TrimPrefix(fi.Path, path.Clean(dir)+"/")
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: int64(got.Mode.Perm()), ModTime: got.ModTime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// Unpack writes the regular files and directories of the tar stream r
// below dir, each file replaced atomically by the sandbox's Write (a new
// file gets 0644, an existing one keeps its mode: the stream's modes are
// not applied). An entry that is no file or directory, or whose name
// leads out of dir, stops it with an error naming the entry; the files
// written before it stay, and the count says how many.
func (b backend) Unpack(ctx context.Context, dir string, r io.Reader) (int, error) {
	tr := tar.NewReader(r)
	n := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("unpack: %w", err)
		}
		name := path.Clean(hdr.Name)
		if hdr.Name == "" || path.IsAbs(hdr.Name) || name == ".." || strings.HasPrefix(name, "../") || strings.ContainsRune(hdr.Name, 0) {
			return n, fmt.Errorf("unpack: entry %q leads out of %s: %w", hdr.Name, dir, sandbox.ErrEscape)
		}
		dst := path.Join(dir, name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := b.sb.Mkdir(ctx, dst); err != nil {
				return n, err
			}
		case tar.TypeReg:
			if hdr.Size > MaxTransferBytes {
				return n, fmt.Errorf("unpack: %s: %w", hdr.Name, sandbox.ErrTooLarge)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return n, fmt.Errorf("unpack: %s: %w", hdr.Name, err)
			}
			if err := b.sb.Write(ctx, dst, data); err != nil {
				return n, err
			}
			n++
		default:
			return n, fmt.Errorf("unpack: entry %q is neither a file nor a directory (type %q): %w", hdr.Name, hdr.Typeflag, sandbox.ErrUnsupported)
		}
	}
}
