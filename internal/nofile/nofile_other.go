//go:build !linux || !(amd64 || arm64)

package nofile

// readLimit reports failure: on this platform the limit is not read.
func readLimit(*[2]uint64) uintptr { return 1 }
