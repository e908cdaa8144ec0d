package patch

import (
	"fmt"
	"strings"
)

// Render writes files as a git patch that Parse reads back to the same
// files (but for their Line numbers): "diff --git" headers, "new file
// mode", "deleted file mode" and rename lines, "--- a/" and "+++ b/"
// names (C-quoted as git quotes them when they hold unusual bytes), then
// the hunks.
func Render(files []*File) []byte {
	var b strings.Builder
	for _, f := range files {
		oldName, newName := f.OldPath, f.NewPath
		switch f.Op {
		case Add:
			oldName = newName
		case Delete:
			newName = oldName
		}
		fmt.Fprintf(&b, "diff --git %s %s\n", quote("a/"+oldName), quote("b/"+newName))
		switch f.Op {
		case Add:
			b.WriteString("new file mode 100644\n")
		case Delete:
			b.WriteString("deleted file mode 100644\n")
		case Rename:
			fmt.Fprintf(&b, "rename from %s\nrename to %s\n", quote(f.OldPath), quote(f.NewPath))
		}
		if len(f.Hunks) == 0 {
			continue
		}
		from, to := "a/"+f.OldPath, "b/"+f.NewPath
		switch f.Op {
		case Add:
			from = devNull
		case Delete:
			to = devNull
		}
		fmt.Fprintf(&b, "--- %s\n+++ %s\n", headerName(from), headerName(to))
		for _, h := range f.Hunks {
			fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@", h.OldStart, h.OldCount, h.NewStart, h.NewCount)
			if h.Section != "" {
				b.WriteString(" " + h.Section)
			}
			b.WriteByte('\n')
			for _, l := range h.Lines {
				b.WriteByte(l.Kind)
				b.WriteString(l.Text)
				b.WriteByte('\n')
				if l.NoEOL {
					b.WriteString("\\ No newline at end of file\n")
				}
			}
		}
	}
	return []byte(b.String())
}

// headerName is a name for a ---/+++ line: quoted when it must be, and
// followed by a tab when it holds a space, as git does.
func headerName(name string) string {
	q := quote(name)
	if q == name && strings.ContainsRune(name, ' ') {
		return name + "\t"
	}
	return q
}

// quote C-quotes name as git does when it holds a control character, a
// byte past ASCII, a quote or a backslash; else returns it as it is.
func quote(name string) string {
	needs := false
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			needs = true
			break
		}
	}
	if !needs {
		return name
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\v':
			b.WriteString(`\v`)
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
