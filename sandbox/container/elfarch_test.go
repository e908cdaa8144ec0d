package container

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"testing"
)

// elfHeader makes a minimal ELF file: class (1 or 2), byte order, machine
// and program header types, the table right after the header.
func elfHeader(class byte, order binary.ByteOrder, machine uint16, progs ...uint32) []byte {
	data := byte(1)
	if order == binary.BigEndian {
		data = 2
	}
	hsize, phsize := 52, 32
	if class == 2 {
		hsize, phsize = 64, 56
	}
	b := make([]byte, hsize+phsize*len(progs))
	copy(b, "\x7fELF")
	b[4], b[5], b[6] = class, data, 1
	order.PutUint16(b[16:], 2) // ET_EXEC
	order.PutUint16(b[18:], machine)
	order.PutUint32(b[20:], 1)
	if class == 2 {
		order.PutUint64(b[32:], uint64(hsize))
		order.PutUint16(b[52:], uint16(hsize))
		order.PutUint16(b[54:], uint16(phsize))
		order.PutUint16(b[56:], uint16(len(progs)))
	} else {
		order.PutUint32(b[28:], uint32(hsize))
		order.PutUint16(b[40:], uint16(hsize))
		order.PutUint16(b[42:], uint16(phsize))
		order.PutUint16(b[44:], uint16(len(progs)))
	}
	for i, typ := range progs {
		order.PutUint32(b[hsize+i*phsize:], typ)
	}
	return b
}

// elfArch tells a binary's architecture and whether it is static, as
// debug/elf reads them, and says "" for anything it cannot read.
func TestELFArch(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	for _, c := range []struct {
		name   string
		file   []byte
		arch   string
		static bool
	}{
		{"64-bit static amd64", elfHeader(2, le, 62, 1, 1, 4), "amd64", true},
		{"64-bit dynamic arm64", elfHeader(2, le, 183, 6, 3, 1), "arm64", false},
		{"32-bit dynamic 386", elfHeader(1, le, 3, 6, 3), "386", false},
		{"32-bit static arm", elfHeader(1, le, 40, 1), "arm", true},
		{"big-endian ppc64", elfHeader(2, be, 21, 1), "ppc64", true},
		{"little-endian ppc64", elfHeader(2, le, 21, 1), "ppc64le", true},
		{"big-endian s390x, dynamic", elfHeader(2, be, 22, 3), "s390x", false},
		{"an unknown machine", elfHeader(2, le, 9999, 1), "", true},
		{"no program headers", elfHeader(2, le, 62), "amd64", true},
		{"not ELF", []byte("#!/bin/sh\necho hi\n"), "", false},
		{"empty", nil, "", false},
		{"header cut short", elfHeader(2, le, 62, 1)[:40], "", false},
		{"program headers cut short", elfHeader(2, le, 62, 1, 3)[:64+56], "", false},
		{"bad class", append([]byte("\x7fELF\x03\x01"), make([]byte, 60)...), "", false},
		{"bad byte order", append([]byte("\x7fELF\x02\x03"), make([]byte, 60)...), "", false},
	} {
		arch, static := elfArchOf(bytes.NewReader(c.file))
		if arch != c.arch || static != c.static {
			t.Errorf("%s: %q static=%v, want %q static=%v", c.name, arch, static, c.arch, c.static)
		}
		checkELFOracle(t, c.file, arch, static)
	}
	// Real binaries: this test binary and the host's sh.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{self, sh} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		arch, static := elfArch(p)
		if arch == "" {
			t.Errorf("%s: no architecture", p)
		}
		checkELFOracle(t, b, arch, static)
	}
	if arch, static := elfArch("/nonexistent"); arch != "" || static {
		t.Errorf("a missing file: %q %v", arch, static)
	}
}

// checkELFOracle fails t when debug/elf reads file and disagrees with
// elfArchOf's arch and static.
func checkELFOracle(t *testing.T, file []byte, arch string, static bool) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(file))
	if err != nil {
		return
	}
	if len(f.Progs) >= elfMaxProgs {
		return // elfArch does not read that many
	}
	want, wantStatic := "", true
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			wantStatic = false
		}
	}
	want = elfArches[uint16(f.Machine)]
	if f.Machine == elf.EM_PPC64 && f.ByteOrder == binary.LittleEndian {
		want = "ppc64le"
	}
	if arch != want || static != wantStatic {
		t.Errorf("debug/elf reads %q static=%v, elfArch %q static=%v", want, wantStatic, arch, static)
	}
}

func FuzzELFArch(f *testing.F) {
	f.Add(elfHeader(2, binary.LittleEndian, 62, 1, 3))
	f.Add(elfHeader(1, binary.BigEndian, 21, 3, 1))
	f.Add([]byte("\x7fELF"))
	f.Fuzz(func(t *testing.T, file []byte) {
		arch, static := elfArchOf(bytes.NewReader(file))
		checkELFOracle(t, file, arch, static)
	})
}
