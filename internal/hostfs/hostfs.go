// Package hostfs holds the file operations on a root directory of the
// host that hutch's local tier offers, and that the helpers inside the
// isolated and container tiers use to serve files: an [FS] is a root
// directory, opened with [New].
//
// Every operation goes through os.Root, which resolves every path
// component at the system-call level: "..", absolute paths elsewhere and
// symbolic links pointing out — at any depth, dangling or swapped after a
// check — fail with sandbox.ErrEscape and nothing outside the root is
// touched. Absolute symbolic links are refused even when their target is
// inside the root (os.Root does not follow them).
package hostfs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

// FS is a root directory of the host. Create one with New; it is safe for
// concurrent use.
type FS struct {
	root    *os.Root
	search  *searchRoot // the root's descriptor for searches; nil: none
	dir     string      // absolute, symlinks resolved
	given   string      // absolute form of the directory the caller named
	closeMu sync.RWMutex
	closed  bool
	sweptMu sync.Mutex
	swept   map[string]bool // directories sweepTemps has swept (sweepOnce)

	// protected are the protected entries, split at "/" (see Protect).
	protected [][]string
}

// New opens dir (which must exist and be a directory) as a root. check,
// when not nil, runs once dir is known to be a directory and before it is
// opened; its error is New's. Errors match sandbox.ErrConfig.
func New(dir string, check func() error) (*FS, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: local sandbox needs a root directory", sandbox.ErrConfig)
	}
	given, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: root %s: %v", sandbox.ErrConfig, dir, err)
	}
	real, err := filepath.EvalSymlinks(given)
	if err != nil {
		return nil, fmt.Errorf("%w: root %s: %v", sandbox.ErrConfig, dir, err)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: root %s is not a directory", sandbox.ErrConfig, dir)
	}
	if check != nil {
		if err := check(); err != nil {
			return nil, err
		}
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("%w: open root %s: %v", sandbox.ErrConfig, dir, err)
	}
	return &FS{root: root, search: openSearchRoot(root), dir: real, given: given}, nil
}

// Root is the absolute root directory with symbolic links resolved.
func (s *FS) Root() string { return filepath.ToSlash(s.dir) }

// begin guards an operation against Close; the caller must call the
// returned function when done.
func (s *FS) begin(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return nil, sandbox.ErrClosed
	}
	return s.closeMu.RUnlock, nil
}

// resolve is the lexical half of the guard; os.Root is the other half.
// Absolute paths may name the root as the caller gave it or as resolved.
func (s *FS) resolve(op, p string) (string, error) {
	rel, err := sandbox.Clean(s.Root(), p)
	if errors.Is(err, sandbox.ErrEscape) && s.given != s.dir {
		rel, err = sandbox.Clean(filepath.ToSlash(s.given), p)
	}
	if err != nil {
		return "", tierkit.PathError(op, p, err)
	}
	if err := s.dotDotAfterLink(p); err != nil {
		return "", tierkit.PathError(op, p, err)
	}
	return rel, nil
}

// dotDotAfterLink refuses a path with ".." right after a symbolic link.
// The contract applies ".." to the path as written ("l/../f" is f), but
// the system, and so every command Exec runs, climbs from where l leads:
// the two would name different files (one perhaps outside the root), so
// such a path is refused rather than read either way. ".." elsewhere, and
// paths without it, cost nothing here.
func (s *FS) dotDotAfterLink(p string) error {
	if !strings.Contains(p, "..") || !slices.Contains(strings.Split(p, "/"), "..") {
		return nil // the common path allocates nothing
	}
	rel := p
	if path.IsAbs(p) {
		var ok bool
		for _, root := range []string{s.Root(), filepath.ToSlash(s.given)} {
			if rel, ok = strings.CutPrefix(p, strings.TrimSuffix(root, "/")+"/"); ok {
				break
			}
		}
		if !ok {
			return nil // the ".." is above the root, where Clean judged it
		}
	}
	cur, afterLink := ".", false
	for _, name := range strings.Split(rel, "/") {
		switch name {
		case "", ".":
			continue
		case "..":
			if afterLink {
				return fmt.Errorf("%w: \"..\" right after the symbolic link %s: commands would climb from where it leads, the file tools from where it is; give the path without it", sandbox.ErrInvalidPath, cur)
			}
			cur, afterLink = path.Dir(cur), false
			continue
		}
		cur = path.Join(cur, name)
		fi, err := s.root.Lstat(cur)
		afterLink = err == nil && fi.Mode()&fs.ModeSymlink != 0
	}
	return nil
}

// Read returns the content of a regular file.
func (s *FS) Read(ctx context.Context, p string) ([]byte, error) {
	data, _, err := s.ReadStat(ctx, p, 0)
	return data, err
}

// ReadStat reads a regular file (at most max bytes when max > 0) and
// describes it, with one open: the description is of the opened file,
// taken before its content is read.
func (s *FS) ReadStat(ctx context.Context, p string, max int64) ([]byte, sandbox.FileInfo, error) {
	f, fi, release, err := s.openRead(ctx, p, max)
	if err != nil {
		return nil, sandbox.FileInfo{}, err
	}
	defer release()
	want := fi.Size + 1 // one more byte to see growth
	if max > 0 && want > max {
		want = max
	}
	// Sized to what is wanted, so a read is one allocation and, usually,
	// one read call.
	data := make([]byte, 0, want)
	for {
		if max > 0 && int64(len(data)) >= max {
			break
		}
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF || (err == nil && n == 0) {
			break
		}
		if err != nil {
			return nil, sandbox.FileInfo{}, mapErr("read", p, err)
		}
		if len(data) == cap(data) {
			if len(data) > sandbox.MaxFileSize {
				return nil, sandbox.FileInfo{}, tierkit.PathError("read", p, sandbox.ErrTooLarge)
			}
			data = slices.Grow(data, len(data)) // it grew since the stat
		}
	}
	if len(data) > sandbox.MaxFileSize {
		return nil, sandbox.FileInfo{}, tierkit.PathError("read", p, sandbox.ErrTooLarge)
	}
	return data, fi, nil
}

// ReadTo is ReadStat with the content copied to w instead of returned: it
// never holds the file in memory (a session's init, in the sandbox's
// memory limit, serves reads with it). The description comes first, and
// a file that grows past sandbox.MaxFileSize while it is copied is
// ErrTooLarge after w has had part of it.
func (s *FS) ReadTo(ctx context.Context, p string, max int64, w io.Writer) (sandbox.FileInfo, error) {
	f, fi, release, err := s.openRead(ctx, p, max)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	defer release()
	limit := int64(sandbox.MaxFileSize) + 1
	if max > 0 && max < limit {
		limit = max
	}
	n, err := io.Copy(w, io.LimitReader(f, limit))
	switch {
	case err != nil:
		return sandbox.FileInfo{}, mapErr("read", p, err)
	case n > sandbox.MaxFileSize:
		return sandbox.FileInfo{}, tierkit.PathError("read", p, sandbox.ErrTooLarge)
	}
	return fi, nil
}

// ReadStream hands fn the open file (see sandbox.Streamer). A file that
// grows past sandbox.MaxFileSize while fn reads it is ErrTooLarge, as in
// ReadStat.
func (s *FS) ReadStream(ctx context.Context, p string, fn func(io.Reader) error) (sandbox.FileInfo, error) {
	f, fi, release, err := s.openRead(ctx, p, 0)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	defer release()
	r := &io.LimitedReader{R: f, N: sandbox.MaxFileSize + 1}
	ferr := fn(r)
	if r.N == 0 { // fn was handed more than MaxFileSize
		return sandbox.FileInfo{}, tierkit.PathError("read", p, fmt.Errorf("it grew over the %d byte limit while read: %w", sandbox.MaxFileSize, sandbox.ErrTooLarge))
	}
	return fi, ferr
}

// openRead opens p for ReadStat, ReadTo and ReadStream and describes the opened file;
// release closes it and ends the call (see begin). A directory, a file
// named as a directory, anything but a regular file, and a file over
// sandbox.MaxFileSize when more than that is wanted are errors.
func (s *FS) openRead(ctx context.Context, p string, max int64) (f *os.File, info sandbox.FileInfo, release func(), err error) {
	done, err := s.begin(ctx)
	if err != nil {
		return nil, info, nil, err
	}
	defer func() {
		if err != nil {
			done()
		}
	}()
	rel, err := s.resolve("read", p)
	if err != nil {
		return nil, info, nil, err
	}
	// O_NONBLOCK: opening a FIFO planted in the root must not hang;
	// O_NOCTTY: nor a terminal device become hutch's terminal.
	f, err = s.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, info, nil, mapErr("read", p, err)
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		err = mapErr("read", p, err)
	case fi.IsDir():
		err = tierkit.PathError("read", p, sandbox.ErrIsDir)
	case dirOnly(p):
		err = tierkit.PathError("read", p, sandbox.ErrNotDir)
	case !fi.Mode().IsRegular():
		err = tierkit.PathError("read", p, fmt.Errorf("not a regular file (%v)", fi.Mode().Type()))
	case fi.Size() > sandbox.MaxFileSize && (max <= 0 || max > sandbox.MaxFileSize):
		err = tierkit.PathError("read", p, fmt.Errorf("%d bytes is over the %d byte limit: %w", fi.Size(), sandbox.MaxFileSize, sandbox.ErrTooLarge))
	}
	if err != nil {
		f.Close()
		return nil, info, nil, err
	}
	return f, infoOf(rel, fi), func() { f.Close(); done() }, nil
}

func infoOf(rel string, fi fs.FileInfo) sandbox.FileInfo {
	ino, changed := identity(fi)
	return sandbox.FileInfo{Path: rel, Size: fi.Size(), ModTime: fi.ModTime(), Mode: fi.Mode(), Kind: kindOf(fi.Mode()), Inode: ino, Changed: changed}
}

// Write replaces the file atomically: the data goes to a temporary file in
// the same directory, which is synced and then renamed over the target. If
// p is a symbolic link (inside the root), the file it points to is replaced.
// A hard link to a file outside the root is replaced, never written
// through.
func (s *FS) Write(ctx context.Context, p string, data []byte) error {
	return s.write(ctx, p, bytes.NewReader(data), int64(len(data)), sandbox.MaxFileSize)
}

// WriteFrom is Write with the content read from r, at most limit bytes
// (sandbox.MaxFileSize when limit is 0 or more than that): more is
// ErrTooLarge and leaves the file as it was. The content is copied, never
// held whole in memory (a session's init, in the sandbox's memory limit,
// serves writes with it).
func (s *FS) WriteFrom(ctx context.Context, p string, r io.Reader, limit int64) error {
	if limit <= 0 || limit > sandbox.MaxFileSize {
		limit = sandbox.MaxFileSize
	}
	return s.write(ctx, p, r, -1, limit)
}

// errOverLimit is writeSynced's: the content went past its limit.
var errOverLimit = errors.New("over the limit")

// write is Write and WriteFrom: size is the content's length when known
// (else -1), checked before anything is touched.
func (s *FS) write(ctx context.Context, p string, r io.Reader, size, limit int64) error {
	done, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	rel, err := s.resolve("write", p)
	if err != nil {
		return err
	}
	if size > limit {
		return tierkit.PathError("write", p, fmt.Errorf("%d bytes is over the %d byte limit: %w", size, limit, sandbox.ErrTooLarge))
	}
	// Held: a file may not take the name of a directory on the way to a
	// protected path either (a .git file points git at a config of its
	// own).
	target, err := s.followLinks(rel)
	if err != nil {
		if perr := s.refuseProtected("write", p, rel, false, true); perr != nil {
			return perr // below a protected file, say: refused as such
		}
		return mapErr("write", p, err)
	}
	if err := s.refuseProtected("write", p, rel, false, true, target); err != nil {
		return err
	}
	if target == "." || dirOnly(p) {
		return tierkit.PathError("write", p, sandbox.ErrIsDir)
	}
	dir, base := path.Split(target)
	if dir == "" {
		dir = "."
	}
	// Pin the directory (made first when missing): the temporary file,
	// the rename and any clean-up all happen in this one directory even
	// if its path is swapped.
	d, err := s.root.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err = s.root.MkdirAll(dir, 0o755); err == nil {
			d, err = s.root.OpenRoot(dir)
		}
	}
	if err != nil {
		return mapErr("write", p, err)
	}
	defer d.Close()
	if err := s.checkPinnedRoot("write", p, d, dir); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if fi, err := d.Lstat(base); err == nil {
		switch {
		case fi.IsDir():
			return tierkit.PathError("write", p, sandbox.ErrIsDir)
		case fi.Mode()&fs.ModeSymlink != 0:
			// target was resolved through every link, so a link here
			// was put in its place since: never take its mode (0777).
			return tierkit.PathError("write", p, fmt.Errorf("%s changed while it was written (now a symbolic link): try again", p))
		}
		mode = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return mapErr("write", p, err)
	}
	s.sweepOnce(dir, d)
	if err := replace(d, base, r, limit, mode); err != nil {
		if errors.Is(err, errOverLimit) {
			return tierkit.PathError("write", p, fmt.Errorf("more than the %d byte limit: %w", limit, sandbox.ErrTooLarge))
		}
		return mapErr("write", p, err)
	}
	return nil
}

// replace puts a file holding r's content (at most limit bytes) with mode
// at base in d, atomically: readers see the old file or the new, whole
// and synced. The content goes to a file with no name (O_TMPFILE), so a
// process killed while writing leaves nothing; once synced it is linked
// in at base when nothing is there (a link never replaces: one step,
// whole), else as a temporary name renamed over base (a kill between the
// two leaves that name, which sweepTemps removes later). Where the
// filesystem has no unnamed files, the content goes to a named temporary
// file, as where it cannot be linked (no /proc, no capability), copied
// from the unnamed one.
func replace(d *os.Root, base string, r io.Reader, limit int64, mode fs.FileMode) error {
	tmp := tmpPrefix + randomSuffix() + tmpSuffix
	dir, err := d.Open(".")
	if err != nil {
		return err
	}
	defer dir.Close()
	anon, err := openTemp(dir)
	if err == nil {
		defer anon.Close()
		if err := copySynced(anon, r, limit, mode); err != nil {
			return err
		}
		if linkTemp(dir, anon, base) == nil {
			return nil // base was new
		}
		if linkTemp(dir, anon, tmp) != nil {
			if _, err := anon.Seek(0, io.SeekStart); err != nil {
				return err
			}
			return replaceNamed(d, base, tmp, anon, limit, mode)
		}
		return renameTemp(d, tmp, base)
	}
	return replaceNamed(d, base, tmp, r, limit, mode)
}

// openTemp and linkTemp are openAnon and linkAnon; tests make them fail,
// as a filesystem without unnamed files (or a host without /proc) does.
var (
	openTemp = openAnon
	linkTemp = linkAnon
)

// replaceNamed is replace through the temporary file tmp, made with a
// name from the start.
func replaceNamed(d *os.Root, base, tmp string, r io.Reader, limit int64, mode fs.FileMode) error {
	f, err := d.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = copySynced(f, r, limit, mode)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = d.Remove(tmp)
		return err
	}
	return renameTemp(d, tmp, base)
}

// renameTemp renames the temporary file tmp of d over base, and removes
// it when that fails.
func renameTemp(d *os.Root, tmp, base string) error {
	err := d.Rename(tmp, base)
	if err != nil {
		_ = d.Remove(tmp)
	}
	return err
}

// copySynced copies at most limit bytes of r to f (errOverLimit when r
// has more), sets mode and syncs f.
func copySynced(f *os.File, r io.Reader, limit int64, mode fs.FileMode) error {
	n, err := io.Copy(f, io.LimitReader(r, limit+1))
	if err == nil && n > limit {
		err = errOverLimit
	}
	if err == nil {
		err = f.Chmod(mode) // exact bits, whatever the umask
	}
	if err == nil {
		err = f.Sync()
	}
	return err
}

// staleTemp is how old a temporary file of Write's must be before
// sweepTemps takes it for a leftover: far longer than linking and
// renaming one takes, so no write still under way loses its file.
const staleTemp = time.Minute

// sweptDirs bounds how many directories a sandbox remembers having swept;
// past it, it forgets them all and sweeps each again once.
const sweptDirs = 4096

// sweepOnce sweeps d (the directory dir of the root) with sweepTemps the
// first time this sandbox writes in it.
func (s *FS) sweepOnce(dir string, d *os.Root) {
	s.sweptMu.Lock()
	if s.swept[dir] {
		s.sweptMu.Unlock()
		return
	}
	if s.swept == nil || len(s.swept) >= sweptDirs {
		s.swept = map[string]bool{}
	}
	s.swept[dir] = true
	s.sweptMu.Unlock()
	sweepTemps(d, time.Now().Add(-staleTemp))
}

// sweepTemps removes the leftovers of writes that were killed: regular
// files of d named exactly as Write names its temporary files (isTemp),
// owned by this process's user and last changed before cutoff. Nothing
// else is touched. The directory is read a batch of names at a time.
func sweepTemps(d *os.Root, cutoff time.Time) {
	dir, err := d.Open(".")
	if err != nil {
		return
	}
	defer dir.Close()
	uid := os.Geteuid()
	for {
		ents, err := dir.ReadDir(256)
		for _, e := range ents {
			if !e.Type().IsRegular() || !isTemp(e.Name()) {
				continue
			}
			fi, err := d.Lstat(e.Name())
			if err != nil || !fi.Mode().IsRegular() || !fi.ModTime().Before(cutoff) {
				continue
			}
			if owner, ok := fileOwner(fi); ok && owner == uid {
				_ = d.Remove(e.Name())
			}
		}
		if err != nil {
			return // io.EOF: all read
		}
	}
}

// followLinks resolves the symbolic links in rel the way the kernel would:
// component by component, a relative link being relative to the directory
// that holds it once that directory's own links are resolved. The result
// has no links left and stays inside the root (absolute links and ".."
// above the root are ErrEscape). Missing components are kept as they are:
// Write creates them.
func (s *FS) followLinks(rel string) (string, error) {
	const maxLinks = 8 // os.Root's own limit, so Write, Read and Stat agree
	done, todo, links := ".", rel, 0
	// What done is: a ".." (which only a link's target brings, rel being
	// clean) climbs out of a directory only, as the kernel (and so Read,
	// through os.Root) resolves it: after a file it is ENOTDIR, after a
	// missing name ENOENT.
	var doneErr error
	for todo != "" {
		var name string
		name, todo, _ = strings.Cut(todo, "/")
		switch name {
		case "", ".":
			continue
		case "..":
			switch {
			case doneErr != nil:
				return "", doneErr
			case done == ".":
				return "", sandbox.ErrEscape
			}
			done = path.Dir(done)
			continue
		}
		if doneErr != nil && !errors.Is(doneErr, syscall.ENOENT) {
			return "", doneErr // below a file
		}
		next := path.Join(done, name)
		fi, err := s.root.Lstat(next)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			done = next // a directory, a file, or missing
			switch {
			case err != nil:
				doneErr = syscall.ENOENT
			case !fi.IsDir():
				doneErr = syscall.ENOTDIR
			}
			continue
		}
		if links++; links > maxLinks {
			return "", syscall.ELOOP
		}
		t, err := s.root.Readlink(next)
		if errors.Is(err, syscall.EINVAL) {
			// No longer a link: it was replaced since the Lstat. Look
			// again (bounded by the link count).
			t = name
		} else if err != nil {
			return "", err
		}
		if path.IsAbs(t) {
			return "", sandbox.ErrEscape // os.Root never follows absolute links
		}
		if todo != "" {
			t += "/" + todo
		}
		todo = t // resolved from done, the directory holding the link
	}
	return done, nil
}

func randomSuffix() string {
	var b [tmpRandom]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Stat describes p, following symbolic links inside the root.
func (s *FS) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	done, err := s.begin(ctx)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	defer done()
	rel, err := s.resolve("stat", p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := s.root.Stat(rel)
	if err != nil {
		return sandbox.FileInfo{}, mapErr("stat", p, err)
	}
	if dirOnly(p) && !fi.IsDir() {
		return sandbox.FileInfo{}, tierkit.PathError("stat", p, sandbox.ErrNotDir)
	}
	return infoOf(rel, fi), nil
}

// dirOnly reports a path that ends in "/" (the root's aside): as for the
// kernel and Glob, it names a directory, so a file there is ErrNotDir
// and a write there ErrIsDir.
func dirOnly(p string) bool { return len(p) > 1 && strings.HasSuffix(p, "/") }

func kindOf(m fs.FileMode) sandbox.Kind {
	switch {
	case m.IsDir():
		return sandbox.KindDir
	case m.IsRegular():
		return sandbox.KindFile
	}
	return sandbox.KindOther
}

// Glob matches pattern under the root (see sandbox.Sandbox for the rules).
func (s *FS) Glob(ctx context.Context, pattern string) ([]string, error) {
	done, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	pat, dirsOnly, err := sandbox.CleanPattern(s.Root(), pattern)
	if err != nil {
		return nil, tierkit.PathError("glob", pattern, err)
	}
	return tierkit.GlobFS(ctx, globFS{s.root}, pat, dirsOnly)
}

// Write's temporary files are named tmpPrefix + tmpRandom random bytes in
// hex (randomSuffix) + tmpSuffix.
const (
	tmpPrefix = ".hutch-"
	tmpSuffix = ".tmp"
	tmpRandom = 8
)

// isTemp says whether name is one of Write's temporary files.
func isTemp(name string) bool {
	if !strings.HasPrefix(name, tmpPrefix) || !strings.HasSuffix(name, tmpSuffix) {
		return false
	}
	hexPart := name[len(tmpPrefix) : len(name)-len(tmpSuffix)]
	return len(hexPart) == 2*tmpRandom && strings.Trim(hexPart, "0123456789abcdef") == ""
}

// globFS is the root as Glob walks it. Unlike os.Root.FS it lists a
// directory through O_DIRECTORY, so a FIFO where the pattern expects a
// directory fails at once instead of blocking Glob forever, and it accepts
// names that are not valid UTF-8 (fs.ValidPath refuses them, which hid such
// files from Glob). Containment is os.Root's either way.
type globFS struct{ root *os.Root }

func (g globFS) Open(name string) (fs.File, error) {
	return g.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

func (g globFS) Stat(name string) (fs.FileInfo, error) { return g.root.Stat(name) }

func (g globFS) ReadDir(name string) ([]fs.DirEntry, error) {
	f, err := g.root.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	// Write's temporary files are not the workspace's.
	ents = slices.DeleteFunc(ents, func(e fs.DirEntry) bool { return isTemp(e.Name()) })
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, err
}

// Close releases the root. It waits for running file operations; it does
// not stop running commands (cancel their context). It is idempotent.
func (s *FS) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.search.close()
	return s.root.Close()
}

var (
	escapeOnce sync.Once
	escapeErr  error // the error os.Root uses for "path escapes from parent"
)

// rootEscapeErr learns os.Root's (unexported) escape error once, so it can
// be matched by identity rather than by its text.
func rootEscapeErr() error {
	escapeOnce.Do(func() {
		r, err := os.OpenRoot(os.TempDir())
		if err != nil {
			return
		}
		defer r.Close()
		_, err = r.Stat("..")
		escapeErr = unwrapPathErr(err)
	})
	return escapeErr
}

// unwrapPathErr peels every *fs.PathError and *os.LinkError (Root.Rename's
// error) off err; os.Root sometimes nests them.
func unwrapPathErr(err error) error {
	for {
		var pe *fs.PathError
		var le *os.LinkError
		switch {
		case errors.As(err, &pe):
			err = pe.Err
		case errors.As(err, &le):
			err = le.Err
		default:
			return err
		}
	}
}

// mapErr translates an os error into the contract's typed errors, keeping
// the caller's path in the message.
func mapErr(op, p string, err error) error {
	inner := unwrapPathErr(err)
	switch {
	case inner != nil && inner == rootEscapeErr():
		inner = sandbox.ErrEscape
	case errors.Is(inner, fs.ErrNotExist):
		inner = sandbox.ErrNotFound
	case errors.Is(inner, syscall.EISDIR):
		inner = sandbox.ErrIsDir
	case errors.Is(inner, syscall.ENOTDIR):
		inner = sandbox.ErrNotDir
	case errors.Is(inner, syscall.ENAMETOOLONG):
		inner = fmt.Errorf("%w: name too long", sandbox.ErrInvalidPath)
	}
	return tierkit.PathError(op, p, inner)
}

// WorkDir opens dir, a Command.Dir, inside s's root and returns it with its
// host path; it fails as an operation does after s is closed or ctx is
// done. The command starts in the opened directory (the local tier's chdirPath), so a
// path component swapped for a link after this check cannot move it out.
func WorkDir(ctx context.Context, s *FS, dir string) (*os.File, string, error) {
	done, err := s.begin(ctx)
	if err != nil {
		return nil, "", err
	}
	defer done() // a running command does not hold Close back
	if dir == "" {
		dir = "."
	}
	rel, err := s.resolve("exec", dir)
	if err != nil {
		return nil, "", err
	}
	// O_DIRECTORY: a FIFO (or anything else) fails with ENOTDIR at once.
	f, err := s.root.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, "", mapErr("exec", dir, err)
	}
	return f, filepath.Join(s.dir, filepath.FromSlash(rel)), nil
}
