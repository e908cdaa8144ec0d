//go:build !linux

package hostfs

import (
	"os"

	"github.com/hutchsandbox/hutch/internal/search"
)

// searchRoot is Linux's descriptor for openat2, which this system lacks.
type searchRoot struct{}

func openSearchRoot(*os.Root) *searchRoot { return nil }

func (*searchRoot) close() error { return nil }

// searchFS is the FS a search of s walks, leaving out what hide names.
func (s *FS) searchFS(hide func(rel string) bool) search.FS {
	return rootFS{root: s.root, hide: hide}
}
