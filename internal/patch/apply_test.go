package patch

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
)

// numbered is lines "1\n" to "n\n".
func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// TestApplyAtTheLineOrTheNearestExactMatch: a hunk applies at its
// header's line, else at the nearest line where its old lines match
// exactly (moved by the offset of the hunk before it), and never by
// similarity; a failure names the hunk and the line it expected.
func TestApplyAtTheLineOrTheNearestExactMatch(t *testing.T) {
	ten := numbered(10)
	cases := []struct {
		name, old, patch string
		want             string   // the result, when it applies
		errs             []string // what the error says, when it does not
	}{
		{name: "at its line", old: ten,
			patch: "--- a/f\n+++ b/f\n@@ -4,3 +4,3 @@\n 4\n-5\n+five\n 6\n",
			want:  strings.Replace(ten, "5\n", "five\n", 1)},
		{name: "lines were added above: an offset down", old: "new\nnew\n" + ten,
			patch: "--- a/f\n+++ b/f\n@@ -4,3 +4,3 @@\n 4\n-5\n+five\n 6\n",
			want:  "new\nnew\n" + strings.Replace(ten, "5\n", "five\n", 1)},
		{name: "lines were removed above: an offset up", old: strings.Replace(ten, "1\n2\n3\n", "", 1),
			patch: "--- a/f\n+++ b/f\n@@ -6,3 +6,3 @@\n 6\n-7\n+seven\n 8\n",
			want:  strings.Replace(strings.Replace(ten, "1\n2\n3\n", "", 1), "7\n", "seven\n", 1)},
		{name: "the second hunk carries the first one's offset", old: "x\n" + ten,
			patch: "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-1\n+one\n 2\n@@ -9,2 +9,2 @@\n 9\n-10\n+ten\n",
			want:  "x\none\n" + strings.TrimPrefix(strings.Replace(ten, "10\n", "ten\n", 1), "1\n")},
		{name: "an insertion after line 0", old: "b\n",
			patch: "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+a\n", want: "a\nb\n"},
		{name: "an insertion after the last line", old: "a\n",
			patch: "--- a/f\n+++ b/f\n@@ -1,0 +2 @@\n+b\n", want: "a\nb\n"},
		{name: "the last line loses its line break", old: "a\nb\n",
			patch: "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n", want: "a\nb"},
		{name: "the last line gets a line break", old: "a\nb",
			patch: "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n", want: "a\nb\n"},
		{name: "a new file", old: "",
			patch: "--- /dev/null\n+++ b/f\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n", want: "a\nb"},
		{name: "a deleted file", old: "a\nb\n",
			patch: "--- a/f\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n", want: ""},
		{name: "CRLF lines match as they are", old: "a\r\nb\r\n",
			patch: "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\r\n-b\r\n+c\r\n", want: "a\r\nc\r\n"},

		{name: "lines nowhere", old: ten,
			patch: "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-1\n+one\n@@ -5,2 +5,2 @@\n-5\n+five\n 7\n",
			errs:  []string{"f: hunk 2 (patch line 6) does not apply", "not at line 5", `expected "5\n7\n"`}},
		{name: "no fuzz: one line of three differs", old: ten,
			patch: "--- a/f\n+++ b/f\n@@ -4,3 +4,3 @@\n 4\n-5\n+five\n 7\n", errs: []string{"hunk 1", "not at line 4"}},
		{name: "two places equally near", old: "x\na\nx\nb\nx\n",
			patch: "--- a/f\n+++ b/f\n@@ -4 +4 @@\n-x\n+y\n", errs: []string{"does not apply at line 4", "lines 3 and 5, equally near", "add context"}},
		{name: "not before the hunk before it", old: "a\nb\n",
			patch: "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n+B\n@@ -1 +1 @@\n-a\n+A\n", errs: []string{"hunk 2", "after the hunk before it"}},
		{name: "a last line without a break, not at the end", old: "a\nb\nc\n",
			patch: "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n\\ No newline at end of file\n", errs: []string{"hunk 1", "no line break", "before the end"}},
		{name: "the file lacks the final line break the patch expects", old: "a\nb",
			patch: "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n", errs: []string{"hunk 1", "does not apply"}},
		{name: "an insertion past the end", old: "a\n",
			patch: "--- a/f\n+++ b/f\n@@ -5,0 +6 @@\n+b\n", errs: []string{"hunk 1", "after line 5", "has 1 lines"}},
		{name: "a deletion that leaves lines", old: "a\nb\n",
			patch: "--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n", errs: []string{"deletes the file", "2 bytes"}},
		{name: "a new file that exists", old: "here\n",
			patch: "--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+a\n", errs: []string{"adds the file, but it exists"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files, err := Parse([]byte(c.patch))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Apply(files[0], []byte(c.old))
			if c.errs == nil {
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != c.want {
					t.Fatalf("got %q, want %q", got, c.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("applied to %q; want an error", got)
			}
			var pe *Error
			if !errors.As(err, &pe) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %T %q: want one line of *Error", err, err)
			}
			for _, w := range c.errs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestApplyFindsHunksWhoseLinesArePastTheEnd: line numbers far past
// the file's end search up from its end.
func TestApplyFindsHunksWhoseLinesArePastTheEnd(t *testing.T) {
	old := numbered(50_000)
	var p strings.Builder
	p.WriteString("--- a/f\n+++ b/f\n")
	for i := range 200 {
		fmt.Fprintf(&p, "@@ -%d +%d @@\n-%d\n+x\n", 200_000_000+i, 200_000_000+i, 49_800+i)
	}
	files, err := Parse([]byte(p.String()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Apply(files[0], []byte(old))
	if err != nil {
		t.Fatalf("hunks far past the end, whose lines are in the file: %v", err)
	}
	if !strings.HasSuffix(string(got), "49799\n"+strings.Repeat("x\n", 200)+"50000\n") {
		t.Fatalf("applied wrong: ...%q", got[len(got)-40:])
	}
}

// FuzzParse: Parse never panics, refuses with one line of *Error, and
// what it parses renders back to a patch it parses to the same files;
// Apply never panics on what it parses.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"diff --git a/x.go b/x.go\nindex 1..2 100644\n--- a/x.go\n+++ b/x.go\n@@ -1,2 +1,2 @@ func main\n a\n-b\n+c\n",
		"--- x.txt\t2024-01-01\n+++ x.txt\t2024-01-02\n@@ -1 +1 @@\n-a\n+b\n",
		"--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+1\n+2\n\\ No newline at end of file\n--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n",
		"diff --git a/r.txt b/r new.txt\nsimilarity index 83%\nrename from r.txt\nrename to r new.txt\n--- a/r.txt\n+++ b/r new.txt\t\n@@ -3,2 +3,2 @@ r2\n r3\n-r6\n+R6\n",
		"diff --git \"a/tab\\t\\303\\251.txt\" \"b/tab\\t\\303\\251.txt\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/tab\\t\\303\\251.txt\"\n@@ -0,0 +1 @@\n+new\n",
		"diff --git a/e b/e\nnew file mode 100644\ndiff --git a/f g b/f g\ndeleted file mode 100755\n",
		"--- a/x\r\n+++ b/x\r\n@@ -1,3 +1,3 @@\r\n a\r\n\r\n-b\r\n+c\r\n",
		"diff --git a/i.png b/i.png\nGIT binary patch\nliteral 5\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		files, err := Parse(data)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %T %q: want one line of *Error", err, err)
			}
			return
		}
		rendered := Render(files)
		again, err := Parse(rendered)
		if err != nil {
			t.Fatalf("the rendered patch does not parse: %v\n%q", err, rendered)
		}
		if a, b := canonical(files), canonical(again); a != b {
			t.Fatalf("rendered and parsed again:\n%s\nwant\n%s\nrendered %q", b, a, rendered)
		}
		for _, f := range files {
			_, _ = Apply(f, data)
		}
	})
}

// BenchmarkApply: 20 hunks into a 100000-line file, each 3 lines off
// its header's line.
func BenchmarkApply(b *testing.B) {
	const lines, hunks = 100_000, 20
	old := []byte("a\nb\nc\n" + numbered(lines))
	var p strings.Builder
	p.WriteString("--- a/f\n+++ b/f\n")
	for i := range hunks {
		n := 1 + i*(lines/hunks) + 1000
		fmt.Fprintf(&p, "@@ -%d,3 +%d,3 @@\n %d\n-%d\n+changed\n %d\n", n, n, n, n+1, n+2)
	}
	files, err := Parse([]byte(p.String()))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(old)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Apply(files[0], old); err != nil {
			b.Fatal(err)
		}
	}
}

// TestApplyRefusesResultsOverMaxFileSize: the result's size is checked
// before it is built.
func TestApplyRefusesResultsOverMaxFileSize(t *testing.T) {
	old := make([]byte, sandbox.MaxFileSize) // one long line of NULs
	files, err := Parse([]byte("--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+x\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Apply(files[0], old)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("would be %d bytes, over the %d byte limit", sandbox.MaxFileSize+2, sandbox.MaxFileSize)) {
		t.Fatalf("Apply: %v; want the result refused as too large", err)
	}
}
