package testenv

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// SourceTree writes, into dir, the tree the search benchmarks walk:
// files source-like Go files of about 4 KiB in dirs directories (pkgNNN),
// one in a hundred holding literal and about one function in twenty named
// ...Handler, and a node_modules of ignored more files that a .gitignore
// names. The same arguments always write the same bytes.
func SourceTree(dir string, files, dirs, ignored int, literal string) error {
	r := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("ctx err buf len result value index count path name data size offset limit state config handle reader writer token")
	file := func(i int) []byte {
		var sb strings.Builder
		fmt.Fprintf(&sb, "package p%d\n\nimport (\n\t\"fmt\"\n\t\"strings\"\n)\n\n", i%dirs)
		for n := 0; sb.Len() < 4000; n++ {
			w1, w2, w3 := words[r.IntN(len(words))], words[r.IntN(len(words))], words[r.IntN(len(words))]
			switch n % 7 {
			case 0:
				name := strings.ToUpper(w1[:1]) + w1[1:] + w2
				if r.IntN(20) == 0 {
					name += "Handler"
				}
				fmt.Fprintf(&sb, "\nfunc %s(%s string, %s int) error {\n", name, w2, w3)
			case 6:
				sb.WriteString("}\n")
			default:
				fmt.Fprintf(&sb, "\t%s := strings.TrimSpace(%s) // %s the %s\n", w1, w2, w3, w1)
			}
		}
		if i%100 == 7 {
			fmt.Fprintf(&sb, "// %s marks this file\n", literal)
		}
		return []byte(sb.String())
	}
	for i := range files {
		d := filepath.Join(dir, fmt.Sprintf("pkg%03d", i%dirs))
		if i < dirs {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.go", i)), file(i), 0o644); err != nil {
			return err
		}
	}
	for i := range ignored {
		d := filepath.Join(dir, "node_modules", fmt.Sprintf("m%02d", i%20))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("x%04d.js", i)), file(i+7), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("node_modules/\n*.log\n/build\n"), 0o644)
}
