package permission

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockHolder is the process, other than this one, holding a lock on the
// file at path as /proc/locks lists it (SQLite's locks are POSIX locks on
// the database file), preferring a write lock; 0 when none is found. It
// opens no descriptor on the file (closing one would drop this process's
// own locks on it).
func lockHolder(path string) int {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	dev := fmt.Sprintf("%02x:%02x:%d", (st.Dev>>8)&0xfff|(st.Dev>>32)&^0xfff, st.Dev&0xff|(st.Dev>>12)&^0xff, st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	holder := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: POSIX  ADVISORY  WRITE 1234 00:2d:5678 1073741824 1073741825";
		// a waiter's line has "->" after the number.
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] == "->" || fields[5] != dev {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if fields[3] == "WRITE" {
			return pid
		}
		if holder == 0 {
			holder = pid
		}
	}
	return holder
}
