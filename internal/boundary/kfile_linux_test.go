package boundary

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ReadKernelFile reads what os.ReadFile reads, for kernel files and for
// files longer than its first buffer, and fails as it does.
func TestReadKernelFileReadsWhatOSReadFileReads(t *testing.T) {
	long := filepath.Join(t.TempDir(), "long")
	if err := os.WriteFile(long, bytes.Repeat([]byte("0123456789\n"), 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/proc/sys/kernel/threads-max", "/proc/self/cgroup", "/proc/self/status", long} {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadKernelFile(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// /proc/self/status differs between two reads (it is the reader's).
		if path == "/proc/self/status" {
			if !strings.HasPrefix(string(got), "Name:") || len(got) < 512 {
				t.Fatalf("%s: %q", path, got)
			}
			continue
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: %q, want %q", path, got, want)
		}
	}
	for _, path := range []string{"/proc/hutch-no-such-file", "/proc/self", "bad\x00path"} {
		_, err := ReadKernelFile(path)
		var pe *os.PathError
		if err == nil || !errors.As(err, &pe) || pe.Path != path {
			t.Errorf("%q: %v, want a path error", path, err)
		}
	}
	if _, err := ReadKernelFile("/proc/hutch-no-such-file"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}

// WriteKernelFile writes an existing file whole, never makes one, and
// fails with a path error.
func TestWriteKernelFileWritesAnExistingFileOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteKernelFile(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new contents" {
		t.Fatalf("%q: a write at the start, no truncation (as on a kernel file)", b)
	}
	missing := filepath.Join(dir, "missing")
	err := WriteKernelFile(missing, []byte("x"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("a missing file was made")
	}
	var pe *os.PathError
	if err := WriteKernelFile("/proc/self/stat", []byte("x")); err == nil || !errors.As(err, &pe) {
		t.Fatalf("a read-only kernel file: %v, want a path error", err)
	}
}
