package hostfs

import (
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"

	"github.com/hutchsandbox/hutch/internal/tierkit"
)

// rootFS is the root as a search walks it through os.Root alone:
// listings through O_DIRECTORY and opens through O_NONBLOCK (a FIFO never
// blocks), Write's temporary files and hidden paths left out. It is the
// search FS where openat2 is not to be had, and the fast one's fallback.
type rootFS struct {
	root *os.Root
	hide func(rel string) bool
}

// hidden reports a path the search must not reach (a denied path).
func (f rootFS) hidden(name string) bool { return f.hide != nil && f.hide(name) }

// keep reports whether a listing of dir shows the entry named name.
func (f rootFS) keep(dir, name string) bool { return !isTemp(name) && !f.hidden(path.Join(dir, name)) }

// openDir opens the directory name through os.Root.
func (f rootFS) openDir(name string) (*os.File, error) {
	d, err := f.root.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, mapErr("search", name, err)
	}
	return d, nil
}

func (f rootFS) ReadDir(name string) ([]fs.DirEntry, error) {
	d, err := f.openDir(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	return slices.DeleteFunc(ents, func(e fs.DirEntry) bool { return !f.keep(name, e.Name()) }), err
}

func (f rootFS) Open(name string) (fs.File, error) {
	if f.hidden(name) {
		return nil, tierkit.PathError("search", name, fs.ErrPermission)
	}
	file, err := f.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, mapErr("search", name, err)
	}
	return file, nil
}
