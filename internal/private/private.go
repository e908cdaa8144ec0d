package private

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Check refuses (an error wrapping kind, naming the fix) a file hutch keeps
// secrets or decisions in that is not this user's alone: owned by another
// user (theirs to read and rewrite whatever its mode), or open to group
// or others. what names the file for the message ("token file"); fi is
// the file's, best taken from the open file rather than the path.
func Check(kind error, what, path string, fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: %s %s belongs to uid %d, not to this user (uid %d): use a file of your own", kind, what, path, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%w: %s %s is open to group or others (mode %04o): chmod 600 %s", kind, what, path, perm, path)
	}
	return nil
}
