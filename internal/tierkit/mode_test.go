package tierkit

import (
	"io/fs"
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
)

// Every st_mode type maps to its Go mode and Kind; an unknown type is
// never taken for a file.
func TestUnixModeKinds(t *testing.T) {
	for _, c := range []struct {
		raw  uint32
		mode fs.FileMode
		kind sandbox.Kind
	}{
		{0o100644, 0o644, sandbox.KindFile},
		{0o104755, 0o755 | fs.ModeSetuid, sandbox.KindFile},
		{0o041777, 0o777 | fs.ModeDir | fs.ModeSticky, sandbox.KindDir},
		{0o120777, 0o777 | fs.ModeSymlink, sandbox.KindOther},
		{0o010600, 0o600 | fs.ModeNamedPipe, sandbox.KindOther},
		{0o140755, 0o755 | fs.ModeSocket, sandbox.KindOther},
		{0o020620, 0o620 | fs.ModeDevice | fs.ModeCharDevice, sandbox.KindOther},
		{0o060660, 0o660 | fs.ModeDevice, sandbox.KindOther},
		{0o170644, 0o644 | fs.ModeIrregular, sandbox.KindOther},
		{0o000644, 0o644 | fs.ModeIrregular, sandbox.KindOther},
	} {
		mode, kind := UnixMode(c.raw)
		if mode != c.mode || kind != c.kind {
			t.Errorf("UnixMode(%o) = %v %s, want %v %s", c.raw, mode, kind, c.mode, c.kind)
		}
	}
}
