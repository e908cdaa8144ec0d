package policy

import "golang.org/x/sys/unix"

// physicalMemory is the host's total physical memory in bytes, as
// sysinfo(2) reports it; ok is false when it cannot be read.
func physicalMemory() (total uint64, ok bool) {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0, false
	}
	return uint64(si.Totalram) * uint64(si.Unit), true
}
