//go:build !linux

package hostfs

import (
	"errors"
	"os"
	"syscall"
)

// openAnon is Linux's O_TMPFILE, which this system lacks: Write names its
// temporary files.
func openAnon(*os.File) (*os.File, error) { return nil, errors.ErrUnsupported }

// linkAnon is never called here (openAnon always fails).
func linkAnon(_, _ *os.File, _ string) error { return errors.ErrUnsupported }

// fileOwner is the user owning fi's file.
func fileOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
