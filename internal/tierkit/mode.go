package tierkit

import (
	"io/fs"

	"github.com/hutchsandbox/hutch/sandbox"
)

// UnixMode turns a raw st_mode (as stat(1) or a listing prints it) into
// Go's mode and a Kind: a regular file, a directory, or other (a link
// lstat saw, a fifo, a socket, a device; an unknown type is irregular).
func UnixMode(m uint32) (fs.FileMode, sandbox.Kind) {
	mode := fs.FileMode(m & 0o777)
	for bit, flag := range map[uint32]fs.FileMode{0o4000: fs.ModeSetuid, 0o2000: fs.ModeSetgid, 0o1000: fs.ModeSticky} {
		if m&bit != 0 {
			mode |= flag
		}
	}
	switch m & 0o170000 {
	case 0o040000:
		return mode | fs.ModeDir, sandbox.KindDir
	case 0o100000:
		return mode, sandbox.KindFile
	case 0o120000:
		mode |= fs.ModeSymlink
	case 0o010000:
		mode |= fs.ModeNamedPipe
	case 0o140000:
		mode |= fs.ModeSocket
	case 0o020000:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		mode |= fs.ModeDevice
	default:
		mode |= fs.ModeIrregular
	}
	return mode, sandbox.KindOther
}
