package tool_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/tool"
)

func pngOf(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, x%h, color.RGBA{R: uint8(x), A: 255})
	}
	var b bytes.Buffer
	must(t, png.Encode(&b, img))
	return b.Bytes()
}

// TestReadFileWindowsAndKinds: the tail, several paths, line numbers,
// text that is not UTF-8, images as images, other binary described.
func TestReadFileWindowsAndKinds(t *testing.T) {
	sb, dir := localSB(t)
	ts := toolset(t, sb, permission.Config{})
	write := func(name string, data []byte) { must(t, os.WriteFile(filepath.Join(dir, name), data, 0o644)) }
	write("lines.txt", []byte("one\ntwo\nthree\nfour\n"))
	write("latin1.txt", []byte("caf\xe9 cr\xe8me\n"))
	write("pic.png", pngOf(t, 16, 8))
	write("doc.pdf", []byte("%PDF-1.7\n\x00\x00binary stream"))
	var many strings.Builder
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&many, "line %d %s\n", i, strings.Repeat("x", 60))
	}
	write("many.txt", []byte(many.String()))

	cases := []struct {
		name string
		args map[string]any
		want string // the whole answer, or with prefix "~" a part of it
	}{
		{"tail", map[string]any{"path": "lines.txt", "offset": -2}, "three\nfour\n"},
		{"tail longer than the file", map[string]any{"path": "lines.txt", "offset": -10}, "one\ntwo\nthree\nfour\n"},
		{"tail with a limit", map[string]any{"path": "lines.txt", "offset": -3, "limit": 1}, "two\n\n[lines 2-2 of 4; use offset 3 to read on]"},
		{"line numbers", map[string]any{"path": "lines.txt", "offset": 3, "line_numbers": true}, "     3\tthree\n     4\tfour\n"},
		{"line numbers of the tail", map[string]any{"path": "many.txt", "offset": -1, "line_numbers": true}, "~  5000\tline 5000"},
		{"not UTF-8", map[string]any{"path": "latin1.txt"}, "caf\uFFFD cr\uFFFDme\n\n[not UTF-8: bytes that are not UTF-8 are shown as \uFFFD; the file itself is unchanged]"},
		{"other binary", map[string]any{"path": "doc.pdf"}, "~doc.pdf is a binary file (application/pdf, 24 bytes); not shown"},
		{"other binary in a window", map[string]any{"path": "doc.pdf", "offset": 2}, "~is a binary file"},
		{"several", map[string]any{"paths": []string{"lines.txt", "missing.txt", "doc.pdf"}}, "~==> lines.txt <==\none\n"},
	}
	for _, c := range cases {
		out := call(t, ts, "read_file", c.args)
		got := out.Text
		if want, part := strings.CutPrefix(c.want, "~"); part && !strings.Contains(got, want) || !part && got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	several := call(t, ts, "read_file", map[string]any{"paths": []string{"lines.txt", "missing.txt"}})
	if several.IsError || !strings.Contains(several.Text, "==> missing.txt <==\nread missing.txt: no such file") {
		t.Errorf("one file of several missing: %+v", several)
	}

	img := call(t, ts, "read_file", map[string]any{"path": "pic.png"})
	if img.IsError || len(img.Files) != 1 || img.Files[0].MediaType != "image/png" || !bytes.Equal(img.Files[0].Data, pngOf(t, 16, 8)) {
		t.Errorf("image: %q, files %+v", img.Text, img.Files)
	}
	big := make([]byte, tool.MaxImageBytes+1)
	copy(big, pngOf(t, 4, 4))
	write("big.png", big)
	if out := call(t, ts, "read_file", map[string]any{"path": "big.png"}); len(out.Files) != 0 || !strings.Contains(out.Text, "larger than") {
		t.Errorf("an image over the bound: %q, %d files", out.Text, len(out.Files))
	}
	// A read makes the file known to the write guard, images included.
	ws := toolset(t, sb, permission.Config{Mode: permission.Auto})
	call(t, ws, "read_file", map[string]any{"paths": []string{"pic.png", "latin1.txt"}})
	wantOK(t, call(t, ws, "write_file", map[string]any{"path": "latin1.txt", "content": "fixed\n"}))
	wantOK(t, call(t, ws, "write_file", map[string]any{"path": "pic.png", "content": "x"}))

	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "a", "paths": []string{"b"}}, "not both"},
		{map[string]any{"paths": make([]string, tool.MaxReadPaths+1)}, "at most"},
		{map[string]any{"paths": []string{"lines.txt", ""}}, "empty path"},
		{map[string]any{"paths": []string{"../x"}}, "escapes"},
	} {
		wantErrText(t, call(t, ts, "read_file", c.args), c.want)
	}
}
