//go:build !linux

package hostfs

import (
	"io/fs"
	"os"
	"path"
	"slices"
	"syscall"

	"github.com/hutchsandbox/hutch/internal/search"
	"github.com/hutchsandbox/hutch/internal/tierkit"
)

// searchRoot is Linux's descriptor for openat2, which this system lacks.
type searchRoot struct{}

func openSearchRoot(*os.Root) *searchRoot { return nil }

func (*searchRoot) close() error { return nil }

// searchFS is the root as a search walks it: listings through
// O_DIRECTORY and opens through O_NONBLOCK (a FIFO never blocks), Write's
// temporary files and hidden paths left out.
type searchFS struct {
	root *os.Root
	hide func(rel string) bool
}

// searchFS is the FS a search of s walks, leaving out what hide names.
func (s *FS) searchFS(hide func(rel string) bool) search.FS {
	return searchFS{root: s.root, hide: hide}
}

func (f searchFS) ReadDir(name string) ([]fs.DirEntry, error) {
	d, err := f.root.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, mapErr("search", name, err)
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	return slices.DeleteFunc(ents, func(e fs.DirEntry) bool {
		return isTemp(e.Name()) || (f.hide != nil && f.hide(path.Join(name, e.Name())))
	}), err
}

func (f searchFS) Open(name string) (fs.File, error) {
	if f.hide != nil && f.hide(name) {
		return nil, tierkit.PathError("search", name, fs.ErrPermission)
	}
	file, err := f.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, mapErr("search", name, err)
	}
	return file, nil
}
