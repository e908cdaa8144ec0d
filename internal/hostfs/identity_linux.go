package hostfs

import (
	"io/fs"
	"syscall"
	"time"
)

// identity is the file's inode number and status change time (ctime).
func identity(fi fs.FileInfo) (uint64, time.Time) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, time.Time{}
	}
	return st.Ino, time.Unix(st.Ctim.Unix())
}
