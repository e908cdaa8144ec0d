package container

import (
	"encoding/binary"
	"io"
	"os"
)

// ELF's numbers that elfArch reads (see elf(5)).
const (
	elfClass32, elfClass64 = 1, 2
	elfDataLSB, elfDataMSB = 1, 2
	elfPTInterp            = 3      // a program header naming the program interpreter
	elfPNXNum              = 0xffff // e_phnum saying the count is elsewhere
	// elfMaxProgs bounds the program headers read: a binary has a dozen.
	elfMaxProgs = 256
)

// elfArches are GOARCH's names of ELF machines (e_machine).
var elfArches = map[uint16]string{
	62: "amd64", 183: "arm64", 3: "386", 40: "arm", 243: "riscv64", 22: "s390x", 21: "ppc64",
}

// elfArch reads a Linux binary's architecture as GOARCH names it, and
// whether it is static (no program interpreter, so it runs in any image);
// "" and false when it cannot tell. It reads the ELF header and the
// program headers only (not debug/elf, whose DWARF and compressed-section
// readers every start of hutch would otherwise initialize).
func elfArch(p string) (arch string, static bool) {
	f, err := os.Open(p)
	if err != nil {
		return "", false
	}
	defer f.Close()
	return elfArchOf(f)
}

// elfArchOf is elfArch of the ELF file r.
func elfArchOf(r io.ReaderAt) (arch string, static bool) {
	var h [64]byte
	if _, err := r.ReadAt(h[:52], 0); err != nil || string(h[:4]) != "\x7fELF" {
		return "", false
	}
	var order binary.ByteOrder
	switch h[5] {
	case elfDataLSB:
		order = binary.LittleEndian
	case elfDataMSB:
		order = binary.BigEndian
	default:
		return "", false
	}
	var phoff uint64
	var phentsize, phnum uint16
	switch h[4] {
	case elfClass32:
		phoff = uint64(order.Uint32(h[28:]))
		phentsize, phnum = order.Uint16(h[42:]), order.Uint16(h[44:])
	case elfClass64:
		if _, err := r.ReadAt(h[52:], 52); err != nil {
			return "", false
		}
		phoff = order.Uint64(h[32:])
		phentsize, phnum = order.Uint16(h[54:]), order.Uint16(h[56:])
	default:
		return "", false
	}
	if phnum == elfPNXNum || phnum > elfMaxProgs || phnum > 0 && (phentsize < 4 || phoff > 1<<40) {
		return "", false
	}
	static = true
	var typ [4]byte
	for i := range uint64(phnum) {
		if _, err := r.ReadAt(typ[:], int64(phoff+i*uint64(phentsize))); err != nil {
			return "", false
		}
		if order.Uint32(typ[:]) == elfPTInterp {
			static = false
		}
	}
	machine := order.Uint16(h[18:])
	arch = elfArches[machine]
	if arch == "ppc64" && order == binary.LittleEndian {
		arch = "ppc64le"
	}
	return arch, static
}
