package sysprog

import (
	"os"

	"golang.org/x/sys/unix"
)

// readsRootOnly reports whether a sandbox started by this process could
// read the root-only entries of /proc: when this process is root (the
// sandbox's root is then the host's, and owns them), is in group 0 (some
// are group-readable), or holds a capability. Otherwise the sandbox's
// processes are this user without capabilities, whom the kernel's own
// permission checks already keep out of them, and hostOnlyEntries's walk of
// /proc (some 900 entries) is skipped. When it cannot tell, it says yes.
func readsRootOnly() bool {
	if os.Geteuid() == 0 || os.Getegid() == 0 {
		return true
	}
	groups, err := os.Getgroups()
	if err != nil {
		return true
	}
	for _, g := range groups {
		if g == 0 {
			return true
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return true
	}
	return data[0].Permitted|data[1].Permitted|data[0].Effective|data[1].Effective != 0
}
