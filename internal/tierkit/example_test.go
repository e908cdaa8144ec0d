package tierkit_test

import (
	"fmt"
	"strings"

	"github.com/hutchsandbox/hutch/internal/tierkit"
)

func ExampleTailBuffer() {
	b := &tierkit.TailBuffer{Max: 8}
	fmt.Fprint(b, "line one\n")
	fmt.Fprint(b, "line two\n")
	fmt.Printf("%q total=%d truncated=%v\n", b.Bytes(), b.Total(), b.Truncated())

	// A multi-byte character cut by the limit is dropped whole.
	u := &tierkit.TailBuffer{Max: 5}
	u.Write([]byte("prix: 5€"))
	fmt.Printf("%q\n", u.Bytes())
	// Output:
	// "ine two\n" total=18 truncated=true
	// " 5€"
}

func ExampleMergeEnv() {
	base := map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/work"}
	call := map[string]string{"PATH": "/opt/bin", "DEBUG": "1"}
	fmt.Println(strings.Join(tierkit.EnvList(tierkit.MergeEnv(base, call)), " "))
	// Output:
	// DEBUG=1 HOME=/work PATH=/opt/bin
}
