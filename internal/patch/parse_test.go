package patch

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestParseReadsGitAndPlainDiffs: git's headers (a/ b/ prefixes,
// /dev/null, new and deleted file modes, renames, similarity and index
// lines, quoted names, names with spaces), diff -u's (no prefixes, times
// after a tab), counts left out, "\ No newline at end of file", leading
// commit text and a trailing signature.
func TestParseReadsGitAndPlainDiffs(t *testing.T) {
	type want struct {
		op       Op
		old, new string
		hunks    int
	}
	cases := []struct {
		name  string
		patch string
		files []want
	}{
		{"git modify", "diff --git a/x.go b/x.go\nindex 1..2 100644\n--- a/x.go\n+++ b/x.go\n@@ -1,2 +1,2 @@ func main\n a\n-b\n+c\n",
			[]want{{Modify, "x.go", "x.go", 1}}},
		{"plain diff -u with times", "--- x.txt\t2024-01-01 10:00:00.000000000 +0000\n+++ x.txt\t2024-01-02 10:00:00.000000000 +0000\n@@ -1 +1 @@\n-a\n+b\n",
			[]want{{Modify, "x.txt", "x.txt", 1}}},
		{"plain diff -u of a backup: the shorter name", "--- x.txt.orig\n+++ x.txt\n@@ -1 +1 @@\n-a\n+b\n",
			[]want{{Modify, "x.txt", "x.txt", 1}}},
		{"a/ and b/ stripped only when both carry them", "--- a/x\n+++ c/x\n@@ -1 +1 @@\n-a\n+b\n",
			[]want{{Modify, "a/x", "a/x", 1}}},
		{"a/ and b/ stripped when both carry them", "--- a/c/x\n+++ b/c/x\n@@ -1 +1 @@\n-a\n+b\n",
			[]want{{Modify, "c/x", "c/x", 1}}},
		{"git diff --no-prefix", "diff --git x y\n--- x\n+++ x\n@@ -1 +1 @@\n-a\n+b\n",
			[]want{{Modify, "x", "x", 1}}},
		{"add and delete by /dev/null", "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+1\n+2\n--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n",
			[]want{{Add, "", "new.txt", 1}, {Delete, "old.txt", "", 1}}},
		{"empty file added and deleted, no hunks", "diff --git a/e b/e\nnew file mode 100644\nindex 0000000..e69de29\ndiff --git a/f g b/f g\ndeleted file mode 100755\nindex e69de29..0000000\n",
			[]want{{Add, "", "e", 0}, {Delete, "f g", "", 0}}},
		{"pure rename", "diff --git a/r.txt b/s.txt\nsimilarity index 100%\nrename from r.txt\nrename to s.txt\n",
			[]want{{Rename, "r.txt", "s.txt", 0}}},
		{"rename with changes and spaces", "diff --git a/r.txt b/r new.txt\nsimilarity index 83%\nrename from r.txt\nrename to r new.txt\nindex edb6c6a..599817e 100644\n--- a/r.txt\n+++ b/r new.txt\t\n@@ -3,2 +3,2 @@ r2\n r3\n-r6\n+R6\n",
			[]want{{Rename, "r.txt", "r new.txt", 1}}},
		{"quoted names", "diff --git \"a/tab\\t\\303\\251.txt\" \"b/tab\\t\\303\\251.txt\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/tab\\t\\303\\251.txt\"\n@@ -0,0 +1 @@\n+new\n",
			[]want{{Add, "", "tab\té.txt", 1}}},
		{"mode change only", "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n",
			[]want{{Modify, "run.sh", "run.sh", 0}}},
		{"format-patch mail", "From 1234 Mon Sep 17 00:00:00 2001\nFrom: A <a@b>\nSubject: [PATCH] fix\n\nThe message says --- and @@ in words.\n---\n x.txt | 2 +-\n 1 file changed\n\ndiff --git a/x.txt b/x.txt\nindex 1..2 100644\n--- a/x.txt\n+++ b/x.txt\n@@ -1 +1 @@\n-a\n+b\n-- \n2.43.0\n\n",
			[]want{{Modify, "x.txt", "x.txt", 1}}},
		{"CRLF patch", "--- a/x\r\n+++ b/x\r\n@@ -1 +1 @@\r\n-a\r\n+b\r\n",
			[]want{{Modify, "x", "x", 1}}},
		{"empty context line", "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n",
			[]want{{Modify, "x", "x", 1}}},
		{"two hunks", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n@@ -10,0 +11 @@\n+z\n",
			[]want{{Modify, "x", "x", 2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files, err := Parse([]byte(c.patch))
			if err != nil {
				t.Fatal(err)
			}
			var got []want
			for _, f := range files {
				got = append(got, want{f.Op, f.OldPath, f.NewPath, len(f.Hunks)})
			}
			if fmt.Sprint(got) != fmt.Sprint(c.files) {
				t.Errorf("got %+v, want %+v", got, c.files)
			}
		})
	}
}

// TestParseHunkLines: counts default to 1, the section is kept, "\ No
// newline" marks the line before it, and each line's kind and text.
func TestParseHunkLines(t *testing.T) {
	files, err := Parse([]byte("--- a/x\n+++ b/x\n@@ -3 +3,2 @@ func f() {\n-old\n\\ No newline at end of file\n+new\n+last\n\\ No newline at end of file\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := files[0].Hunks[0]
	if h.OldStart != 3 || h.OldCount != 1 || h.NewStart != 3 || h.NewCount != 2 || h.Section != "func f() {" || h.Line != 3 {
		t.Errorf("header: %+v", h)
	}
	want := []Line{{'-', "old", true}, {'+', "new", false}, {'+', "last", true}}
	if fmt.Sprint(h.Lines) != fmt.Sprint(want) {
		t.Errorf("lines %+v, want %+v", h.Lines, want)
	}
	if a, r := files[0].Stats(); a != 2 || r != 1 {
		t.Errorf("stats +%d -%d, want +2 -1", a, r)
	}
}

// TestParseRefusesWhatItCannotApplyExactly: every refusal names the
// patch line, and the file when there is one, before anything is
// applied.
func TestParseRefusesWhatItCannotApplyExactly(t *testing.T) {
	mod := func(name string) string { return "--- a/" + name + "\n+++ b/" + name + "\n@@ -1 +1 @@\n-a\n+b\n" }
	cases := []struct {
		name, patch string
		want        []string
	}{
		{"nothing", "just some words\n", []string{"no file changes"}},
		{"empty", "", []string{"no file changes"}},
		{"too big", strings.Repeat("x", MaxSize+1), []string{"over the 8388608 byte limit"}},
		{"git binary", "diff --git a/i.png b/i.png\nindex 1..2 100644\nGIT binary patch\nliteral 5\nxyz\n", []string{"patch line 3", "i.png", "binary"}},
		{"binary files differ", "diff --git a/i.png b/i.png\nindex 1..2 100644\nBinary files a/i.png and b/i.png differ\n", []string{"patch line 3", "binary"}},
		{"plain binary", "Binary files a/i.png and b/i.png differ\n", []string{"patch line 1", "binary"}},
		{"too few lines", "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n", []string{"x", "hunk 1", "patch ends inside the hunk", "fix the counts"}},
		{"too many lines", "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n d\n", []string{"patch line 3", "line 7", "fix the counts"}},
		{"line not of the hunk", "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\nwhat\n", []string{"line 5 is not part of the hunk"}},
		{"bad header", "--- a/x\n+++ b/x\n@@ -1,a +1 @@\n-a\n+b\n", []string{"patch line 3", "bad hunk header"}},
		{"line 0 with lines", "--- a/x\n+++ b/x\n@@ -0,1 +1 @@\n-a\n+b\n", []string{"line 0"}},
		{"no hunk", "--- a/x\n+++ b/x\n", []string{"patch line 1", "no @@ hunk"}},
		{"hunk alone", "@@ -1 +1 @@\n-a\n+b\n", []string{"patch line 1", "without a file header"}},
		{"combined", "diff --cc x\n@@@ -1,1 -1,1 +1,1 @@@\n", []string{"combined"}},
		{"copy", "diff --git a/x b/y\nsimilarity index 100%\ncopy from x\ncopy to y\n", []string{"patch line 3", "copies"}},
		{"twice", mod("x") + mod("y") + mod("./x"), []string{"patch line 11", "patched a second time", "first at patch line 1"}},
		{"rename onto a patched file", mod("y") + "diff --git a/x b/y\nrename from x\nrename to y\n", []string{"patch line 6", "second time"}},
		{"dot-dot in ---/+++", mod("../x"), []string{"patch line 1", `"../x"`, ".."}},
		{"dot-dot inside", mod("a/../../x"), []string{".."}},
		{"dot-dot in rename to", "diff --git a/x b/x\nrename from x\nrename to ../x\n", []string{"patch line 1", `"../x"`}},
		{"absolute", "--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", []string{"patch line 1", "absolute"}},
		{"absolute new file", "--- /dev/null\n+++ /tmp/x\n@@ -0,0 +1 @@\n+a\n", []string{"absolute"}},
		{"NUL", mod("a\x00b"), []string{"NUL"}},
		{"quoted NUL", "diff --git \"a/x\\000y\" \"b/x\\000y\"\nnew file mode 100644\n", []string{"NUL"}},
		{"empty name", "--- a/\n+++ b/\n@@ -1 +1 @@\n-a\n+b\n", []string{"empty"}},
		{"directory", mod("d/"), []string{"directory"}},
		{"long path", mod(strings.Repeat("p", 5000)), []string{"5000 bytes"}},
		{"bad quote", "--- \"a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", []string{"patch line 1", "no closing quote"}},
		{"new file with old lines", "--- /dev/null\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", []string{"new, but the hunk has old lines"}},
		{"no newline in the middle", "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n\\ No newline at end of file\n-b\n+c\n", []string{"not the last of its side"}},
		{"rename names that are not the --- and +++ names", "diff --git a/x b/y\nrename from x\nrename to y\n--- a/x\n+++ b/z\n@@ -1 +1 @@\n-a\n+b\n", []string{"patch line 1", `"z"`, "make them agree"}},
		{"rename to its own name", "diff --git a/x b/x\nrename from x\nrename to ./x\n", []string{"its own name"}},
		{"rename and new file", "diff --git a/x b/y\nnew file mode 100644\nrename from x\nrename to y\n", []string{"cannot also be a new"}},
		{"rename without rename to", "diff --git a/x b/y\nrename from x\n", []string{"both rename from and rename to"}},
		{"empty name in a git diff", "diff --git a/ b/\n--- a/\n+++ b/\n@@ -1 +1 @@\n-a\n+b\n", []string{"patch line 1", "empty"}},
		{"a name with a line break is quoted in the error", "diff --git \"a/x\\ny/../../z\" \"b/x\\ny/../../z\"\n--- \"a/x\\ny/../../z\"\n+++ \"b/x\\ny/../../z\"\n@@ -1 +1 @@\n-a\n+b\n", []string{`"x\ny/../../z"`, ".."}},
		{"names differ in a git diff", "diff --git a/x b/y\n--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n", []string{"names differ"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files, err := Parse([]byte(c.patch))
			if err == nil {
				t.Fatalf("parsed to %d files; want an error", len(files))
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Errorf("error %T, want *Error", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is more than one line", err)
			}
			if len(err.Error()) > 600 {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
		})
	}
}

// TestRenderParsesBack: Render's output is read back to the same files.
func TestRenderParsesBack(t *testing.T) {
	files := []*File{
		{Op: Modify, OldPath: "a b/c.txt", NewPath: "a b/c.txt", Hunks: []Hunk{{OldStart: 1, OldCount: 2, NewStart: 1, NewCount: 1, Section: "s", Lines: []Line{{' ', "x", false}, {'-', "y", true}}}}},
		{Op: Add, NewPath: "q\"uote\t\x01é"},
		{Op: Delete, OldPath: "gone", Hunks: []Hunk{{OldStart: 1, OldCount: 1, Lines: []Line{{'-', "z", false}}}}},
		{Op: Rename, OldPath: "from x", NewPath: "to b/y"},
	}
	got, err := Parse(Render(files))
	if err != nil {
		t.Fatalf("%v in\n%s", err, Render(files))
	}
	if a, b := canonical(files), canonical(got); a != b {
		t.Errorf("round trip:\n%s\nwant\n%s", b, a)
	}
}

// canonical prints files without their Line numbers.
func canonical(files []*File) string {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "%s %q %q\n", f.Op, f.OldPath, f.NewPath)
		for _, h := range f.Hunks {
			fmt.Fprintf(&b, " @@ %d,%d %d,%d %q\n", h.OldStart, h.OldCount, h.NewStart, h.NewCount, h.Section)
			for _, l := range h.Lines {
				fmt.Fprintf(&b, "  %c%q %v\n", l.Kind, l.Text, l.NoEOL)
			}
		}
	}
	return b.String()
}
