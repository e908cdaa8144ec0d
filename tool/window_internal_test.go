package tool

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// wholeWindow is lineWindow as it was before it streamed: the file read
// whole, the window cut from it. The streaming one must answer alike.
func wholeWindow(data []byte, offset, limit int) (string, bool) {
	if hasNUL(data) || isImage(data) {
		return "", true
	}
	lines := bytes.Count(data, []byte{'\n'})
	if len(data) > 0 && data[len(data)-1] != '\n' {
		lines++
	}
	start := max(offset, 1) - 1
	if start >= lines {
		return fmt.Sprintf("[the file has %d lines; offset %d is past the end]", lines, offset), false
	}
	end := lines
	if limit > 0 && limit < lines-start {
		end = start + limit
	}
	at := func(n int) int { // where line n (0-based) begins
		pos := 0
		for ; n > 0; n-- {
			i := bytes.IndexByte(data[pos:], '\n')
			if i < 0 {
				return len(data)
			}
			pos += i + 1
		}
		return pos
	}
	text := data[at(start):at(end)]
	out := capText(text, int64(len(text)))
	if end < lines {
		out += fmt.Sprintf("\n[lines %d-%d of %d; use offset %d to read on]", start+1, end, lines, end+1)
	}
	return out, false
}

func checkWindow(t *testing.T, data []byte, offset, limit int) {
	t.Helper()
	want, wantBin := wholeWindow(data, offset, limit)
	for how, r := range map[string]io.Reader{"at once": bytes.NewReader(data), "a byte at a time": iotest.OneByteReader(bytes.NewReader(data))} {
		got, bin, err := lineWindow(r, offset, limit)
		if err != nil || got != want || bin != wantBin {
			t.Fatalf("%s: lineWindow(%d bytes, %d, %d) = %.200q, %v, %v; want %.200q, %v", how, len(data), offset, limit, got, bin, err, want, wantBin)
		}
	}
}

func TestLineWindow(t *testing.T) {
	long := strings.Repeat("é", MaxReadBytes) + "\n"
	cases := []struct {
		data          string
		offset, limit int
	}{
		{"", 2, 0}, {"", 0, 1}, {"a", 1, 1}, {"a\n", 2, 0}, {"a\nb\nc", 2, 1}, {"a\nb\nc\n", 2, 0},
		{"a\nb\nc\n", 3, 5}, {"a\nb\nc\n", 4, 1}, {"\n\n\n", 2, 1}, {"a\nb", 1, 1 << 62},
		{long + long, 1, 1}, {long + long, 2, 0}, {"x\n" + long, 2, 1},
		{"text\x00binary\n", 1, 1}, {strings.Repeat("a", 9000) + "\xff\n", 1, 1}, {strings.Repeat("a", 8191) + "é\n", 1, 1},
		{strings.Repeat("line\n", 100000), 50000, 3}, {strings.Repeat("y", 200000) + "\n", 1, 1},
	}
	for _, c := range cases {
		checkWindow(t, []byte(c.data), c.offset, c.limit)
	}
}

func FuzzLineWindow(f *testing.F) {
	f.Add([]byte("a\nb\nc"), 2, 1)
	f.Add([]byte("\n\n"), 0, 0)
	f.Add([]byte("é\xff\n\x00"), 1, 5)
	f.Fuzz(func(t *testing.T, data []byte, offset, limit int) {
		if offset < 0 || limit < 0 {
			return // read_file refuses these before
		}
		checkWindow(t, data, offset, limit)
	})
}

// checkTail: the last n lines of a file small enough to be held whole are
// the window that starts n lines before its end, as lineWindow shows it.
func checkTail(t *testing.T, data []byte, n, limit int) {
	t.Helper()
	if len(data) > MaxReadBytes/2 || n <= 0 {
		return
	}
	lines := bytes.Count(data, []byte{'\n'})
	if len(data) > 0 && data[len(data)-1] != '\n' {
		lines++
	}
	got, first, bin, err := tailWindow(iotest.OneByteReader(bytes.NewReader(data)), n, limit)
	if err != nil {
		t.Fatal(err)
	}
	if lines == 0 {
		if !bin && got != "[the file is empty]" {
			t.Fatalf("tail of an empty file: %q", got)
		}
		return
	}
	offset := max(lines-n, 0) + 1
	want, wantBin, _ := lineWindow(bytes.NewReader(data), offset, limit)
	if bin != wantBin || (!bin && (got != want || first != offset)) {
		t.Fatalf("tailWindow(%q, %d, %d) = %q, line %d, %v; want %q, line %d, %v", data, n, limit, got, first, bin, want, offset, wantBin)
	}
}

func TestTailWindow(t *testing.T) {
	for _, c := range []struct {
		data     string
		n, limit int
	}{
		{"", 1, 0}, {"a", 1, 0}, {"a\n", 1, 0}, {"a\nb\nc", 2, 0}, {"a\nb\nc\n", 2, 1}, {"a\nb\nc\n", 9, 0},
		{"\n\n\n", 2, 1}, {"a\nb", 1, 1 << 62}, {"x\x00y\n", 1, 0}, {"caf\xe9\n", 1, 0},
	} {
		checkTail(t, []byte(c.data), c.n, c.limit)
	}
	// Lines over the byte bound: the earliest of the tail are left out,
	// and the answer says so.
	long := strings.Repeat("z", MaxReadBytes/2) + "\n"
	got, first, _, _ := tailWindow(strings.NewReader(long+long+long+"end\n"), 4, 0)
	if first != 3 || !strings.Contains(got, "showing from line 3") || !strings.HasSuffix(got, "end\n") || len(got) > MaxReadBytes+200 {
		t.Errorf("an over-long tail: first %d, %d bytes, %.80q", first, len(got), got)
	}
}

func FuzzTailWindow(f *testing.F) {
	f.Add([]byte("a\nb\nc"), 2, 1)
	f.Add([]byte("\n\n"), 1, 0)
	f.Fuzz(func(t *testing.T, data []byte, n, limit int) {
		if n <= 0 || limit < 0 {
			return
		}
		checkTail(t, data, n, limit)
	})
}
