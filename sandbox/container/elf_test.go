package container

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// elfArchStd is elfArch done with debug/elf, the reference it must agree
// with.
func elfArchStd(p string) (string, bool, bool) {
	f, err := elf.Open(p)
	if err != nil {
		return "", false, false
	}
	defer f.Close()
	static := true
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			static = false
		}
	}
	arch := elfArches[uint16(f.Machine)]
	if f.Machine == elf.EM_PPC64 && f.ByteOrder == binary.LittleEndian {
		arch = "ppc64le"
	}
	return arch, static, true
}

// elfImage is a minimal ELF file: class (1: 32-bit, 2: 64-bit), byte
// order, machine, and one program header of type pt.
func elfImage(class byte, order binary.ByteOrder, machine uint16, pt uint32) []byte {
	b := make([]byte, 256)
	copy(b, "\x7fELF")
	b[4], b[6] = class, 1
	b[5] = 1
	if order == binary.BigEndian {
		b[5] = 2
	}
	order.PutUint16(b[16:], 2) // ET_EXEC
	order.PutUint16(b[18:], machine)
	order.PutUint32(b[20:], 1)
	if class == 1 {
		order.PutUint32(b[28:], 52)  // phoff
		order.PutUint16(b[40:], 52)  // ehsize
		order.PutUint16(b[42:], 32)  // phentsize
		order.PutUint16(b[44:], 1)   // phnum
		order.PutUint32(b[52:], pt)  // p_type
		order.PutUint32(b[52+4:], 0) // p_offset
	} else {
		order.PutUint64(b[32:], 64) // phoff
		order.PutUint16(b[52:], 64) // ehsize
		order.PutUint16(b[54:], 56) // phentsize
		order.PutUint16(b[56:], 1)  // phnum
		order.PutUint32(b[64:], pt)
	}
	return b
}

func TestElfArch(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		path   string
		data   []byte
		arch   string
		static bool
	}{
		{"this test binary (static, CGO_ENABLED=0 or not: as debug/elf says)", self, nil, "", false},
		{"/bin/sh (dynamic)", "/bin/sh", nil, "", false},
		{"amd64 static", "", elfImage(2, binary.LittleEndian, 62, 1), "amd64", true},
		{"amd64 dynamic", "", elfImage(2, binary.LittleEndian, 62, 3), "amd64", false},
		{"arm64 static", "", elfImage(2, binary.LittleEndian, 183, 1), "arm64", true},
		{"386 dynamic", "", elfImage(1, binary.LittleEndian, 3, 3), "386", false},
		{"arm static", "", elfImage(1, binary.LittleEndian, 40, 1), "arm", true},
		{"ppc64le", "", elfImage(2, binary.LittleEndian, 21, 1), "ppc64le", true},
		{"ppc64 big-endian", "", elfImage(2, binary.BigEndian, 21, 1), "ppc64", true},
		{"s390x big-endian dynamic", "", elfImage(2, binary.BigEndian, 22, 3), "s390x", false},
		{"unknown machine", "", elfImage(2, binary.LittleEndian, 9999, 1), "", true},
		{"not ELF", "", []byte("#!/bin/sh\necho hi\n"), "", false},
		{"truncated header", "", elfImage(2, binary.LittleEndian, 62, 1)[:40], "", false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.path
			if c.data != nil {
				p = filepath.Join(dir, "bin"+string(rune('a'+i)))
				if err := os.WriteFile(p, c.data, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			arch, static := elfArch(p)
			wantArch, wantStatic, ok := elfArchStd(p)
			if c.path == "" && (wantArch != c.arch || ok && wantStatic != c.static) {
				t.Fatalf("the test's own expectation (%q, %v) disagrees with debug/elf (%q, %v, parsed %v)", c.arch, c.static, wantArch, wantStatic, ok)
			}
			if !ok {
				wantStatic = false
			}
			if arch != wantArch || static != wantStatic {
				t.Errorf("elfArch = %q, %v; debug/elf says %q, %v", arch, static, wantArch, wantStatic)
			}
		})
	}
}

// FuzzElfArch: on any bytes elfArch neither panics nor disagrees with
// debug/elf about a file debug/elf can read.
func FuzzElfArch(f *testing.F) {
	f.Add(elfImage(2, binary.LittleEndian, 62, 3))
	f.Add(elfImage(1, binary.BigEndian, 21, 1))
	f.Add([]byte("\x7fELF"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "bin")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		arch, static := elfArch(p)
		wantArch, wantStatic, ok := elfArchStd(p)
		if ok && bytes.HasPrefix(data, []byte("\x7fELF")) && (arch != wantArch || static != wantStatic) {
			t.Fatalf("elfArch = %q, %v; debug/elf says %q, %v", arch, static, wantArch, wantStatic)
		}
	})
}
