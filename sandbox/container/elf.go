package container

import (
	"encoding/binary"
	"io"
	"os"
)

// The ELF machines hutch can tell apart, as GOARCH names them (ppc64le is
// EM_PPC64 with little-endian data).
var elfArches = map[uint16]string{
	62: "amd64", 183: "arm64", 3: "386", 40: "arm", 243: "riscv64", 22: "s390x", 21: "ppc64",
}

// elfArch reads a Linux binary's architecture as GOARCH names it, and
// whether it is static (no program interpreter, so it runs in any image);
// "" when it cannot tell. It reads the ELF header and program headers
// itself: debug/elf would bring debug/dwarf, zstd and zlib, whose package
// set-up every start of hutch (and of each of its helpers) would pay.
func elfArch(p string) (arch string, static bool) {
	f, err := os.Open(p)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var h [64]byte // the header: 52 bytes (32-bit) or 64 (64-bit)
	n, _ := io.ReadFull(f, h[:])
	if n < 52 || string(h[:4]) != "\x7fELF" || h[4] == 2 && n < 64 {
		return "", false
	}
	var order binary.ByteOrder
	switch h[5] {
	case 1:
		order = binary.LittleEndian
	case 2:
		order = binary.BigEndian
	default:
		return "", false
	}
	machine := order.Uint16(h[18:])
	var phoff int64
	var phentsize, phnum int
	switch h[4] {
	case 1: // 32-bit
		phoff, phentsize, phnum = int64(order.Uint32(h[28:])), int(order.Uint16(h[42:])), int(order.Uint16(h[44:]))
	case 2: // 64-bit
		phoff, phentsize, phnum = int64(order.Uint64(h[32:])), int(order.Uint16(h[54:])), int(order.Uint16(h[56:]))
	default:
		return "", false
	}
	if phnum > 0 && (phentsize < 4 || phentsize > 256 || phnum > 1<<12 || phoff < 0) {
		return "", false
	}
	table := make([]byte, phentsize*phnum)
	if _, err := f.ReadAt(table, phoff); phnum > 0 && err != nil {
		return "", false
	}
	static = true
	for i := 0; i < phnum; i++ {
		if order.Uint32(table[i*phentsize:]) == 3 { // PT_INTERP
			static = false
		}
	}
	arch = elfArches[machine]
	if machine == 21 && h[5] == 1 {
		arch = "ppc64le"
	}
	return arch, static
}
