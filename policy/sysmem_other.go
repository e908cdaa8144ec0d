//go:build !linux

package policy

// physicalMemory is read on Linux only: elsewhere DefaultMemory is its
// fixed fallback.
func physicalMemory() (total uint64, ok bool) { return 0, false }
