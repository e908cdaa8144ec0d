package hostfs

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// transferTree writes files files of size bytes each, in 32 directories,
// below dir.
func transferTree(tb testing.TB, dir string, files, size int) {
	tb.Helper()
	data := bytes.Repeat([]byte("a"), size)
	for i := range files {
		name := filepath.Join(dir, fmt.Sprintf("d%02d", i%32), fmt.Sprintf("f%04d", i))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(name, data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// Packing and unpacking a tree of 1000 files of 10 KiB (the remote
// tier's bulk copy, where the files are).
func BenchmarkPack(b *testing.B) {
	src := b.TempDir()
	transferTree(b, src, 1000, 10<<10)
	s, err := New(src, nil)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var buf bytes.Buffer
		if err := s.Pack(context.Background(), ".", time.Time{}, &buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnpack(b *testing.B) {
	src := b.TempDir()
	transferTree(b, src, 1000, 10<<10)
	s, err := New(src, nil)
	if err != nil {
		b.Fatal(err)
	}
	var archive bytes.Buffer
	if err := s.Pack(context.Background(), ".", time.Time{}, &archive); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		dst, err := New(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if n, err := dst.Unpack(context.Background(), ".", bytes.NewReader(archive.Bytes())); err != nil || n != 1000 {
			b.Fatalf("unpacked %d: %v", n, err)
		}
	}
}

// Pack carries every regular file below the directory, read ahead or in
// turn (over packSmall), in name order, and nothing else: not a FIFO, not
// a link out of the root; with since, only the files changed after it.
func TestPackCarriesEveryRegularFile(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	transferTree(t, filepath.Join(root, "t"), 100, 100)
	big := bytes.Repeat([]byte("b"), packSmall+1)
	if err := os.WriteFile(filepath.Join(root, "t", "big"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "t", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "t", "out")); err != nil {
		t.Fatal(err)
	}
	s, err := New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := s.Pack(context.Background(), "t", time.Time{}, &archive); err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(&archive)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if hdr.Name == "big" && (!bytes.Equal(data, big) || hdr.Mode != 0o600) || hdr.Name != "big" && len(data) != 100 {
			t.Errorf("%s: %d bytes, mode %o", hdr.Name, len(data), hdr.Mode)
		}
		names = append(names, hdr.Name)
	}
	if len(names) != 101 || !slices.IsSorted(names) || slices.Contains(names, "fifo") || slices.Contains(names, "out") {
		t.Errorf("packed %d names (sorted %v): %q", len(names), slices.IsSorted(names), names)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(root, "t", "d03", "f0003"), later, later); err != nil {
		t.Fatal(err)
	}
	archive.Reset()
	if err := s.Pack(context.Background(), "t", time.Now().Add(time.Minute), &archive); err != nil {
		t.Fatal(err)
	}
	tr = tar.NewReader(&archive)
	if hdr, err := tr.Next(); err != nil || hdr.Name != "d03/f0003" {
		t.Fatalf("since: first entry %v, %v", hdr, err)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("since: more than the one changed file (%v)", err)
	}
}

// writeSizes records the size of each write.
type writeSizes []int

func (w *writeSizes) Write(p []byte) (int, error) { *w = append(*w, len(p)); return len(p), nil }

// Pack writes its stream in whole chunks, not a write per header and per
// file: a session's pack goes through a pipe, a write a system call.
func TestPackWritesWholeChunks(t *testing.T) {
	root := t.TempDir()
	transferTree(t, root, 300, 700)
	s, err := New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	var w writeSizes
	if err := s.Pack(context.Background(), ".", time.Time{}, &w); err != nil {
		t.Fatal(err)
	}
	if len(w) < 2 {
		t.Fatalf("%d writes: %v", len(w), w)
	}
	for i, n := range w[:len(w)-1] {
		if n != packBuffer {
			t.Fatalf("write %d of %d is %d bytes, want %d", i, len(w), n, packBuffer)
		}
	}
}
