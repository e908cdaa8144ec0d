package tool

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// runDir is one run_code call's private directory on the host: made by
// hutch (0700), holding the code, the input files and the mounts' links,
// and removed after the call.
type runDir struct {
	dir    string
	script string
	before map[string]stamp // what was there before the code ran
}

// stamp is what tells a file the code changed from one it left alone.
type stamp struct {
	size  int64
	mtime time.Time
	ctime syscall.Timespec
}

func newRunDir(parent string) (*runDir, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	// Not "hutch-...": a command listing its processes must not see
	// hutch's name in its own command line.
	dir, err := os.MkdirTemp(parent, "run_code-")
	if err != nil {
		return nil, fmt.Errorf("making the run directory: %w", err)
	}
	// MkdirTemp's 0700 already; resolved, because the sandbox binds the
	// real path.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return &runDir{dir: dir}, nil
}

// put writes an input file at its workspace-relative path, read-only.
func (r *runDir) put(name string, data []byte) error {
	rel := path.Clean("/" + filepath.ToSlash(name))[1:]
	if rel == "" || strings.HasPrefix(rel, ".run_code.") {
		return fmt.Errorf("file %q cannot be copied in under that name", name)
	}
	p := filepath.Join(r.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("copying %s: %w", name, err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o444)
	if err != nil {
		return fmt.Errorf("copying %s: %w", name, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying %s: %w", name, err)
	}
	return nil
}

func (r *runDir) snapshot() error {
	r.before = map[string]stamp{}
	return r.walk(func(rel string, fi fs.FileInfo) {
		r.before[rel] = runStamp(fi)
	})
}

func runStamp(fi fs.FileInfo) stamp {
	s := stamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ctime = st.Ctim
	}
	return s
}

// walk calls fn for every regular file under the directory, never
// following a link (the mounts' links included), in lexical order.
func (r *runDir) walk(fn func(rel string, fi fs.FileInfo)) error {
	return filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a directory the code made unreadable: skipped
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(r.dir, p)
		fn(filepath.ToSlash(rel), fi)
		return nil
	})
}

// written returns the files the code wrote or changed, at most
// MaxCodeFiles, each at most MaxCodeFileBytes and MaxCodeTotalBytes in all,
// and how many others there were. Each is opened through an os.Root of
// the run directory, without following links, and read only when it is
// still a regular file (a file the code swapped for a link or a FIFO
// after the walk is left out and counted).
func (r *runDir) written() ([]CodeFile, int) {
	root, err := os.OpenRoot(r.dir)
	if err != nil {
		return []CodeFile{}, 0
	}
	defer root.Close()
	files, left, total := []CodeFile{}, 0, int64(0)
	_ = r.walk(func(rel string, fi fs.FileInfo) {
		if old, ok := r.before[rel]; ok && old == runStamp(fi) {
			return
		}
		if len(files) >= MaxCodeFiles || fi.Size() > MaxCodeFileBytes || total+fi.Size() > MaxCodeTotalBytes {
			left++
			return
		}
		data, err := readRegular(root, rel)
		if err != nil || total+int64(len(data)) > MaxCodeTotalBytes {
			left++
			return
		}
		total += int64(len(data))
		files = append(files, CodeFile{Name: rel, Size: int64(len(data)), MediaType: mediaType(rel, data), Data: data})
	})
	return files, left
}

var errNotRegular = errors.New("not a regular file")

func readRegular(root *os.Root, rel string) ([]byte, error) {
	f, err := root.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxCodeFileBytes+1))
	if err == nil && len(data) > MaxCodeFileBytes {
		err = errors.New("grew past the limit")
	}
	return data, err
}

// mediaType names a returned file's type: by its extension when that is
// known, else by its content.
func mediaType(name string, data []byte) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return http.DetectContentType(data)
}

// remove deletes the run directory, making writable first what the code
// made read-only (an unwritable directory would keep its entries).
func (r *runDir) remove() {
	if os.RemoveAll(r.dir) == nil {
		return
	}
	_ = filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(r.dir)
}
