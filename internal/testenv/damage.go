package testenv

import (
	"bytes"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Damages are the ways DamageFile breaks a file, each named for a test
// case: what a full disk, a crash, a bad copy or another program does to
// a database file.
var Damages = []string{"empty", "truncated to 8 KiB", "truncated to 12 KiB", "truncated to half",
	"header zeroed", "page headers overwritten", "random bytes", "replaced by text"}

// DamageFile breaks the file at path in the way named (one of Damages),
// in place; an unknown name fails t.
func DamageFile(t testing.TB, path, how string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case "empty":
		b = nil
	case "truncated to 8 KiB":
		b = b[:min(len(b), 8<<10)]
	case "truncated to 12 KiB":
		b = b[:min(len(b), 12<<10)]
	case "truncated to half":
		b = b[:len(b)/2]
	case "header zeroed":
		copy(b, make([]byte, 100))
	case "page headers overwritten":
		for off := 4096; off+16 <= len(b); off += 4096 {
			copy(b[off:], bytes.Repeat([]byte{0xff}, 16))
		}
	case "random bytes":
		r := rand.New(rand.NewSource(1))
		for range 2000 {
			b[r.Intn(len(b))] = byte(r.Intn(256))
		}
	case "replaced by text":
		b = bytes.Repeat([]byte("not a database\n"), 1000)
	default:
		t.Fatalf("DamageFile: no damage named %q", how)
	}
	// In place (same inode): a program holding the file open sees it.
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// DescriptorsOn counts process pid's open descriptors on path or on files
// whose names start with it (a database's journal).
func DescriptorsOn(t testing.TB, pid int, path string) int {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(dir + "/" + e.Name()); err == nil && strings.HasPrefix(target, path) {
			n++
		}
	}
	return n
}
