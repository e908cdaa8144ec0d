package search

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/hutchsandbox/hutch/sandbox"
)

// fastFS is rootFS with one system call per Open where rootFS (os.Root)
// makes about eight: openat2 with RESOLVE_BENEATH resolves the whole path
// in the kernel, confined to the root, and the file is a bare descriptor
// (an *os.File tries to register with the poller and restores the
// blocking mode). Any failure falls back to os.Root, for its errors. It
// shows what an FS implementation can gain (see BenchmarkSearch20k).
type fastFS struct {
	*rootFS
	dir *os.File // the root
	fd  uintptr  // its descriptor
}

func newFastFS(r *rootFS, dir string) (*fastFS, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return &fastFS{rootFS: r, dir: d, fd: d.Fd()}, nil
}

func (f *fastFS) Close() error { return f.dir.Close() }

const (
	sysOpenat2     = 437 // the same number on every Linux architecture
	resolveBeneath = 0x08
	resolveNoMagic = 0x02
)

type openHow struct{ flags, mode, resolve uint64 }

func (f *fastFS) Open(name string) (fs.File, error) {
	p, err := syscall.BytePtrFromString(name)
	if err == nil {
		how := openHow{flags: syscall.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC | syscall.O_NOCTTY, resolve: resolveBeneath | resolveNoMagic}
		fd, _, errno := syscall.Syscall6(sysOpenat2, f.fd, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
		if errno == 0 {
			return &rawFile{fd: int(fd), name: name}, nil
		}
	}
	return f.rootFS.Open(name)
}

// rawFile is an open descriptor as an fs.File.
type rawFile struct {
	fd   int
	name string
}

func (r *rawFile) Read(b []byte) (int, error) {
	for {
		n, err := syscall.Read(r.fd, b)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (r *rawFile) Close() error { return syscall.Close(r.fd) }

func (r *rawFile) Stat() (fs.FileInfo, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(r.fd, &st); err != nil {
		return nil, err
	}
	return statInfo{name: r.name, st: st}, nil
}

type statInfo struct {
	name string
	st   syscall.Stat_t
}

func (s statInfo) Name() string       { return s.name }
func (s statInfo) Size() int64        { return s.st.Size }
func (s statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s statInfo) Sys() any           { return &s.st }

func (s statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	}
	return m
}

// TestFastFS: fastFS searches as rootFS does, links and all.
func TestFastFS(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.txt")
	mustWrite(t, outside, "needle outside\n")
	files := map[string]string{
		"real/file.txt": "needle real\n",
		"linkdir":       "->real",
		"linkfile":      "->real/file.txt",
		"linkabs":       "->" + outside,
		"linkup":        "->../../outside.txt",
		"dangling":      "->nowhere",
		"a/b/c.go":      "needle\n",
		"a/up":          "->../real/file.txt",
	}
	r, dir := tree(t, files)
	f, err := newFastFS(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, req := range []sandbox.SearchRequest{{Pattern: "needle"}, {}, {Dir: "linkdir", Pattern: "needle"}, {Dir: "a/up", Pattern: "e"}} {
		want, err1 := Run(context.Background(), r, req)
		got, err2 := Run(context.Background(), f, req)
		if !reflect.DeepEqual(got, want) || (err1 == nil) != (err2 == nil) {
			t.Errorf("%+v: fastFS %+v, %v; rootFS %+v, %v", req, got, err2, want, err1)
		}
	}
}
