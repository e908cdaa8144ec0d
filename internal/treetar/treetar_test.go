package treetar_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/hutchsandbox/hutch/internal/treetar"
	"github.com/hutchsandbox/hutch/sandbox"
)

// recorder is a Target that keeps what it was given.
type recorder struct {
	mu    sync.Mutex
	dirs  []string
	files map[string]string
}

func (r *recorder) target() treetar.Target {
	r.files = map[string]string{}
	return treetar.Target{
		Mkdir: func(_ context.Context, dst string) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.dirs = append(r.dirs, dst)
			return nil
		},
		Write: func(_ context.Context, f treetar.File) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.files[f.Dst] = string(f.Data)
			return nil
		},
		Workers: 4,
	}
}

type entry struct {
	name, body string
	typ        byte
}

func stream(t testing.TB, es ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Size: int64(len(e.body)), Mode: 0o644, Linkname: "/etc/passwd"}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Unpack writes every file below dir and counts them; an entry that leads
// out of dir or is no file or directory stops it, naming the entry.
func TestUnpackStaysBelowDir(t *testing.T) {
	for _, c := range []struct {
		name    string
		entries []entry
		want    map[string]string
		err     error
		says    string
	}{
		{"files and directories", []entry{{name: "a/", typ: tar.TypeDir}, {name: "a/x", body: "1"}, {name: "b", body: "2"}}, map[string]string{"in/a/x": "1", "in/b": "2"}, nil, ""},
		{"dot-dot inside", []entry{{name: "a/../b", body: "2"}}, map[string]string{"in/b": "2"}, nil, ""},
		{"dot-dot out", []entry{{name: "../x", body: "1"}}, nil, sandbox.ErrEscape, `"../x"`},
		{"deeper dot-dot out", []entry{{name: "a/../../x", body: "1"}}, nil, sandbox.ErrEscape, "leads out"},
		{"absolute", []entry{{name: "/etc/passwd", body: "1"}}, nil, sandbox.ErrEscape, "leads out"},
		{"symbolic link", []entry{{name: "l", typ: tar.TypeSymlink}}, nil, sandbox.ErrUnsupported, "neither a file nor a directory"},
		{"hard link", []entry{{name: "l", typ: tar.TypeLink}}, nil, sandbox.ErrUnsupported, "neither"},
		{"device", []entry{{name: "d", typ: tar.TypeChar}}, nil, sandbox.ErrUnsupported, "neither"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r recorder
			n, err := treetar.Unpack(context.Background(), bytes.NewReader(stream(t, c.entries...)), "in", r.target())
			if c.err != nil {
				if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.says) || len(r.files) != 0 {
					t.Fatalf("Unpack: %d, %v (wrote %v), want %v naming %q", n, err, r.files, c.err, c.says)
				}
				return
			}
			if err != nil || n != len(c.want) || len(r.files) != len(c.want) {
				t.Fatalf("Unpack: %d, %v, %v", n, err, r.files)
			}
			for k, v := range c.want {
				if r.files[k] != v {
					t.Errorf("%s = %q, want %q", k, r.files[k], v)
				}
			}
		})
	}
}

// A name tar cannot even carry (a NUL), or an empty one, is refused as a
// destination too.
func TestDestinationRefusesOddNames(t *testing.T) {
	for _, name := range []string{"", "a\x00b", "/x", "..", "../x", "a/../../x"} {
		if _, err := treetar.Destination("in", name); !errors.Is(err, sandbox.ErrEscape) {
			t.Errorf("Destination(%q): %v, want ErrEscape", name, err)
		}
	}
	if d, err := treetar.Destination("in", "a/./b"); err != nil || d != "in/a/b" {
		t.Errorf("Destination(a/./b): %q %v", d, err)
	}
}

// Whatever the stream, Unpack never panics and never writes outside dir.
func FuzzUnpack(f *testing.F) {
	f.Add(stream(f, entry{name: "a/b", body: "x"}))
	f.Add(stream(f, entry{name: "../x", body: "x"}))
	f.Add(stream(f, entry{name: "a/", typ: tar.TypeDir}, entry{name: "a/../../../etc/x", body: "y"}))
	f.Add([]byte("not a tar stream"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r recorder
		_, _ = treetar.Unpack(context.Background(), bytes.NewReader(b), "in", r.target())
		for _, d := range append(r.dirs, keys(r.files)...) {
			if d != "in" && !strings.HasPrefix(d, "in/") || path.Clean(d) != d {
				t.Fatalf("wrote %q, outside in/", d)
			}
		}
	})
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Unpack keeps what the stream's order means while it writes files at
// once: the same file twice ends with its last content, and a directory
// (or a file) in the path of a file queued comes after that file's
// write. Writes that do not depend on each other may go in any order:
// each case lists the calls that must come before others.
func TestUnpackKeepsTheStreamOrder(t *testing.T) {
	for _, c := range []struct {
		name    string
		entries []entry
		calls   int         // how many calls the Target gets
		before  [][2]string // pairs of calls, the first before the second
	}{
		{"the same file twice", []entry{{name: "f", body: "1"}, {name: "f", body: "2"}}, 2,
			[][2]string{{"write in/f 1", "write in/f 2"}}},
		{"a directory where a file was", []entry{{name: "a", body: "1"}, {name: "a/", typ: tar.TypeDir}}, 2,
			[][2]string{{"write in/a 1", "mkdir in/a"}}},
		{"a file below a file", []entry{{name: "a", body: "1"}, {name: "a/b", body: "2"}}, 2,
			[][2]string{{"write in/a 1", "write in/a/b 2"}}},
		{"a file below a file deeper", []entry{{name: "a", body: "1"}, {name: "x/y", body: "3"}, {name: "a/b/c", body: "2"}}, 3,
			[][2]string{{"write in/a 1", "write in/a/b/c 2"}}},
		{"directories before their files", []entry{{name: "x/", typ: tar.TypeDir}, {name: "x/1", body: "1"}, {name: "y/", typ: tar.TypeDir}, {name: "y/1", body: "2"}}, 4,
			[][2]string{{"mkdir in/x", "write in/x/1 1"}, {"mkdir in/x", "mkdir in/y"}, {"mkdir in/y", "write in/y/1 2"}}},
	} {
		for _, workers := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/%d writers", c.name, workers), func(t *testing.T) {
				var mu sync.Mutex
				at := map[string]int{}
				call := func(s string) {
					mu.Lock()
					defer mu.Unlock()
					at[s] = len(at)
				}
				tgt := treetar.Target{
					Mkdir: func(_ context.Context, dst string) error { call("mkdir " + dst); return nil },
					Write: func(_ context.Context, f treetar.File) error {
						call("write " + f.Dst + " " + string(f.Data))
						return nil
					},
					Workers: workers,
				}
				if _, err := treetar.Unpack(context.Background(), bytes.NewReader(stream(t, c.entries...)), "in", tgt); err != nil {
					t.Fatal(err)
				}
				if len(at) != c.calls {
					t.Errorf("calls %v, want %d of them", at, c.calls)
				}
				for _, b := range c.before {
					first, ok1 := at[b[0]]
					second, ok2 := at[b[1]]
					if !ok1 || !ok2 || first > second {
						t.Errorf("%q must come before %q: calls %v", b[0], b[1], at)
					}
				}
			})
		}
	}
}

// InOrder emits every item in order, reads none more than ahead past the
// ones emitted, and stops at the first error without emitting the items
// read with it.
func TestInOrderReadsAheadAndEmitsInOrder(t *testing.T) {
	var mu sync.Mutex
	emitted := 0
	read := func(i int) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if i >= emitted+3 {
			t.Errorf("read %d with %d emitted: more than 3 ahead", i, emitted)
		}
		if i == 7 {
			return 0, errors.New("item 7")
		}
		return i * i, nil
	}
	emit := func(i, v int) error {
		mu.Lock()
		defer mu.Unlock()
		if i != emitted || v != i*i {
			t.Errorf("emit(%d, %d) after %d emitted", i, v, emitted)
		}
		emitted++
		return nil
	}
	if err := treetar.InOrder(context.Background(), 7, 3, 2, read, emit); err != nil || emitted != 7 {
		t.Fatalf("7 items: %v, %d emitted", err, emitted)
	}
	emitted = 0
	if err := treetar.InOrder(context.Background(), 10, 3, 2, read, emit); err == nil || err.Error() != "item 7" || emitted != 6 {
		t.Fatalf("an error at item 7: %v, %d emitted (want 6: the chunk of 6-8 fails)", err, emitted)
	}
}

// readCounter counts the reads of its reader.
type readCounter struct {
	r     *bytes.Reader
	reads int
}

func (c *readCounter) Read(p []byte) (int, error) { c.reads++; return c.r.Read(p) }

// Unpack reads its stream in chunks, not a read per header or per file:
// each read of a pipe or an inbox is a system call or a handoff.
func TestUnpackReadsTheStreamInChunks(t *testing.T) {
	var es []entry
	for i := range 500 {
		es = append(es, entry{name: fmt.Sprintf("d%d/f%d", i%10, i), body: strings.Repeat("x", 100)})
	}
	archive := stream(t, es...)
	var rec recorder
	c := &readCounter{r: bytes.NewReader(archive)}
	n, err := treetar.Unpack(context.Background(), c, ".", rec.target())
	if err != nil || n != 500 {
		t.Fatalf("unpacked %d: %v", n, err)
	}
	if most := len(archive)/(32<<10) + 2; c.reads > most {
		t.Errorf("%d reads of a %d byte stream, want at most %d", c.reads, len(archive), most)
	}
}
