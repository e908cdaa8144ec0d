package remote

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/streamclient"
	"github.com/hutchsandbox/hutch/internal/treetar"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/sandbox"
)

// MaxTransferBytes bounds the content of one CopyIn or CopyOut (a larger
// tree is copied in parts). The archive streams and is unpacked as it
// comes.
const MaxTransferBytes = sandbox.MaxFileSize

// conn is the live session for a transfer, after the same checks as a
// file operation.
func (s *Sandbox) transferConn(ctx context.Context, op, dir string) (*streamclient.Conn, string, error) {
	rel, err := s.Clean(op, dir)
	if err != nil {
		return nil, "", err
	}
	b, err := s.ready(ctx)
	if err != nil {
		return nil, "", err
	}
	return b.(*streamclient.Conn), rel, nil
}

// Changed describes the regular files under dir (root-relative; "" or "."
// the root) that were created or changed after since, in one call: what a
// run changed is Changed(ctx, ".", start). It relies on modification
// times, which a command can set back.
func (s *Sandbox) Changed(ctx context.Context, dir string, since time.Time) ([]sandbox.FileInfo, error) {
	c, rel, err := s.transferConn(ctx, "changed", orDot(dir))
	if err != nil {
		return nil, err
	}
	fis, err := c.Changed(ctx, rel, since)
	if err != nil {
		return nil, s.failed(err)
	}
	return fis, nil
}

// CopyIn copies the tree at hostDir (a directory on this machine) to dir
// in the sandbox in one streamed call: one tar stream of its regular
// files and directories (symbolic links are not followed and not
// copied). Each file is replaced atomically on the server; a failure
// part-way leaves the files before it copied, and the count says how many.
func (s *Sandbox) CopyIn(ctx context.Context, hostDir, dir string) (int, error) {
	ents, err := walkHost(hostDir)
	if err != nil {
		return 0, err
	}
	c, rel, err := s.transferConn(ctx, "copy in", orDot(dir))
	if err != nil {
		return 0, err
	}
	if err := c.Mkdir(ctx, rel); err != nil { // an empty tree is a directory there too
		return 0, s.failed(err)
	}
	// The tree streams as it is read: reading here, sending and
	// unpacking there overlap.
	pr, pw := io.Pipe()
	packed := make(chan error, 1)
	go func() {
		err := packHost(hostDir, ents, pw)
		pw.CloseWithError(err)
		packed <- err
	}()
	n, err := c.Unpack(ctx, rel, pr)
	pr.Close() // a server that stopped early stops the packing too
	if perr := <-packed; perr != nil && !errors.Is(perr, io.ErrClosedPipe) {
		return n, perr
	}
	if err != nil {
		return n, s.failed(err)
	}
	return n, nil
}

// CopyOut copies the regular files under dir in the sandbox changed after
// since (all when zero) into hostDir on this machine, in one streamed
// call. Names from the server are written through an os.Root at hostDir,
// so none lands outside it; each file is written to a temporary name and
// renamed, so none is torn.
func (s *Sandbox) CopyOut(ctx context.Context, dir, hostDir string, since time.Time) (int, error) {
	return s.copyOut(ctx, dir, hostDir, since, nil)
}

// copyOut is CopyOut leaving out the files whose names (slash-separated,
// relative to dir) skip names, when skip is not nil.
func (s *Sandbox) copyOut(ctx context.Context, dir, hostDir string, since time.Time, skip func(name string) bool) (int, error) {
	c, rel, err := s.transferConn(ctx, "copy out", orDot(dir))
	if err != nil {
		return 0, err
	}
	// The archive is unpacked here as it comes: reading there, sending
	// and writing here overlap.
	var n int
	err = c.Pack(ctx, rel, since, func(r io.Reader) error {
		var err error
		n, err = unpackHost(r, hostDir, skip)
		return err
	})
	if err != nil {
		return n, s.failed(err)
	}
	return n, nil
}

func orDot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// hostEntry is one regular file or directory of a tree to copy in.
type hostEntry struct {
	name string // slash-separated, relative to the tree
	info fs.FileInfo
}

// walkHost lists hostDir's regular files and directories (links,
// devices and sockets are not copied), refusing a tree of more than
// MaxTransferBytes.
func walkHost(hostDir string) ([]hostEntry, error) {
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return nil, fmt.Errorf("copy in: %w", err)
	}
	defer root.Close()
	var ents []hostEntry
	var total int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !d.IsDir() && !info.Mode().IsRegular() {
			return nil
		}
		if total += info.Size(); total > MaxTransferBytes {
			return fmt.Errorf("%s holds more than %d bytes: %w: copy it in parts", hostDir, MaxTransferBytes, sandbox.ErrTooLarge)
		}
		ents = append(ents, hostEntry{name: p, info: info})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("copy in %s: %w", hostDir, err)
	}
	return ents, nil
}

// packHost writes ents of hostDir to w as a tar stream, the files read
// hostWorkers at once, at most hostAhead ahead of the stream; each is
// opened through an os.Root at hostDir, so none read is outside it.
func packHost(hostDir string, ents []hostEntry, w io.Writer) error {
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return fmt.Errorf("copy in: %w", err)
	}
	defer root.Close()
	read := func(i int) ([]byte, error) {
		if ents[i].info.IsDir() {
			return nil, nil
		}
		return root.ReadFile(ents[i].name)
	}
	// Whole chunks to the stream: each write is a frame and a credit.
	return treetar.Write(w, wire.StreamChunk, func(tw *tar.Writer) error {
		emit := func(i int, data []byte) error {
			e := ents[i]
			hdr := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Size: int64(len(data)), Mode: int64(e.info.Mode().Perm()), ModTime: e.info.ModTime(), Format: tar.FormatPAX}
			if e.info.IsDir() {
				hdr.Typeflag, hdr.Name, hdr.Size = tar.TypeDir, e.name+"/", 0
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			_, err := tw.Write(data)
			return err
		}
		if err := treetar.InOrder(context.Background(), len(ents), hostAhead, hostWorkers, read, emit); err != nil {
			return fmt.Errorf("copy in %s: %w", hostDir, err)
		}
		return nil
	})
}

// hostAhead bounds the files CopyIn reads ahead of its stream.
const hostAhead = 64

// unpackHost writes the regular files of archive below hostDir, through
// an os.Root (a name leading out is refused by it), each via a temporary
// file and a rename, several at once, with the stream's permission bits
// and modification times.
func unpackHost(archive io.Reader, hostDir string, skip func(name string) bool) (int, error) {
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		return 0, fmt.Errorf("copy out: %w", err)
	}
	root, err := os.OpenRoot(hostDir)
	if err != nil {
		return 0, fmt.Errorf("copy out: %w", err)
	}
	defer root.Close()
	dirs := dirRoots{root: root, open: map[string]*os.Root{}}
	defer dirs.close()
	mkdir := func(_ context.Context, dst string) error { _, err := dirs.get(filepath.FromSlash(dst)); return err }
	write := func(_ context.Context, f treetar.File) error {
		if skip != nil && skip(f.Dst) {
			return nil
		}
		name := filepath.FromSlash(f.Dst)
		d, err := dirs.get(filepath.Dir(name))
		if err == nil {
			base := filepath.Base(name)
			if err = writeVia(d, base, bytes.NewReader(f.Data), f.Mode); err == nil {
				_ = d.Chtimes(base, f.ModTime, f.ModTime)
			}
		}
		if err != nil {
			return fmt.Errorf("copy out %s: %w", f.Dst, err)
		}
		return nil
	}
	return treetar.Unpack(context.Background(), archive, ".", treetar.Target{Mkdir: mkdir, Write: write, Workers: hostWorkers})
}

// dirRoots holds an os.Root for each directory an unpack writes in, made
// (and opened) once, so each file costs one name inside it.
type dirRoots struct {
	root *os.Root
	mu   sync.Mutex
	open map[string]*os.Root
}

func (d *dirRoots) get(dir string) (*os.Root, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.open[dir]; r != nil {
		return r, nil
	}
	if dir != "." {
		if err := d.root.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	r, err := d.root.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	d.open[dir] = r
	return r, nil
}

func (d *dirRoots) close() {
	for _, r := range d.open {
		r.Close()
	}
}

// hostWorkers is how many files CopyIn reads and CopyOut writes at once
// on this machine.
const hostWorkers = 16

// writeVia writes r to name under root through a temporary file that is
// renamed over it.
func writeVia(root *os.Root, name string, r io.Reader, mode fs.FileMode) error {
	tmp := filepath.Join(filepath.Dir(name), ".hutch-copy-"+rand.Text())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("%w: %v", sandbox.ErrIsDir, err)
		}
	}
	return err
}

// mark is the time after which what changes under dir is a command's
// doing: the newest modification time there now, by the server's clock
// (no skew between the machines); for an empty dir, any time at all.
func (s *Sandbox) mark(ctx context.Context, dir string) (time.Time, error) {
	fis, err := s.Changed(ctx, dir, time.Time{})
	if err != nil {
		return time.Time{}, err
	}
	mark := time.Unix(0, 1) // everything there will be new
	for _, fi := range fis {
		if fi.ModTime.After(mark) {
			mark = fi.ModTime
		}
	}
	return mark, nil
}

// Mount is a host directory a Run copies into the sandbox before its
// command (at Dir, root-relative), and, when Writable, whose files the
// command created or changed are copied back after it.
type Mount struct {
	Host     string
	Dir      string
	Writable bool
}

// Copied says what a Run moved: files copied in, and copied back.
type Copied struct {
	In, Back int
}

// Run is RubyLLM's custom-sandbox run over the remote tier: every mount
// is copied in (one streamed call each), cmd runs, and the files under
// each writable mount that the run created or changed come back to the
// host (one call each). The result is the command's own, Blocked
// included. Files the command deleted are not deleted on the host, and
// permission bits do not travel in (the server's Write gives new files
// 0644). A failure to copy in runs nothing; a failure to copy back is
// returned with the result.
func (s *Sandbox) Run(ctx context.Context, cmd sandbox.Command, mounts []Mount) (sandbox.Result, Copied, error) {
	var c Copied
	marks := make([]time.Time, len(mounts))
	for i, m := range mounts {
		n, err := s.CopyIn(ctx, m.Host, m.Dir)
		c.In += n
		if err != nil {
			return sandbox.Result{}, c, err
		}
		if marks[i], err = s.mark(ctx, m.Dir); err != nil {
			return sandbox.Result{}, c, err
		}
	}
	res, err := s.Exec(ctx, cmd)
	if err != nil {
		return res, c, err
	}
	for i, m := range mounts {
		if !m.Writable {
			continue
		}
		n, err := s.CopyOut(ctx, m.Dir, m.Host, marks[i])
		c.Back += n
		if err != nil {
			return res, c, err
		}
	}
	return res, c, nil
}
