package sandbox_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hutchsandbox/hutch/sandbox"
)

func ExampleClean() {
	for _, p := range []string{"src/./main.go", "src//pkg/", "/work/src/x.go", "/work", "../etc/passwd", "/workspace/x", "a\x00b"} {
		rel, err := sandbox.Clean("/work", p)
		switch {
		case errors.Is(err, sandbox.ErrEscape):
			fmt.Printf("%q: escape\n", p)
		case errors.Is(err, sandbox.ErrInvalidPath):
			fmt.Printf("%q: invalid\n", p)
		default:
			fmt.Printf("%q -> %q\n", p, rel)
		}
	}
	// Output:
	// "src/./main.go" -> "src/main.go"
	// "src//pkg/" -> "src/pkg"
	// "/work/src/x.go" -> "src/x.go"
	// "/work" -> "."
	// "../etc/passwd": escape
	// "/workspace/x": escape
	// "a\x00b": invalid
}

func ExampleCleanPattern() {
	pat, dirsOnly, err := sandbox.CleanPattern("/work", "/work/src/**/")
	fmt.Println(pat, dirsOnly, err)
	_, _, err = sandbox.CleanPattern("/work", "src/{a,b")
	fmt.Println(err)
	// Output:
	// src/** true <nil>
	// invalid path
}

func ExampleTailBuffer() {
	b := &sandbox.TailBuffer{Max: 8}
	fmt.Fprint(b, "line one\n")
	fmt.Fprint(b, "line two\n")
	fmt.Printf("%q total=%d truncated=%v\n", b.Bytes(), b.Total(), b.Truncated())

	// A multi-byte character cut by the limit is dropped whole.
	u := &sandbox.TailBuffer{Max: 5}
	u.Write([]byte("prix: 5€"))
	fmt.Printf("%q\n", u.Bytes())
	// Output:
	// "ine two\n" total=18 truncated=true
	// " 5€"
}

func ExampleParseEnv() {
	env, err := sandbox.ParseEnv([]string{"LANG=C.UTF-8", "OPTS=a=b", "EMPTY="})
	fmt.Println(sandbox.EnvList(env), err)

	_, err = sandbox.ParseEnv([]string{"NOVALUE"})
	fmt.Println(err)
	// Output:
	// [EMPTY= LANG=C.UTF-8 OPTS=a=b] <nil>
	// invalid sandbox configuration: environment entry "NOVALUE" has no '=': write NAME=VALUE
}

func ExampleMergeEnv() {
	base := map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/work"}
	call := map[string]string{"PATH": "/opt/bin", "DEBUG": "1"}
	fmt.Println(strings.Join(sandbox.EnvList(sandbox.MergeEnv(base, call)), " "))
	// Output:
	// DEBUG=1 HOME=/work PATH=/opt/bin
}

func ExampleParseProbe() {
	var env sandbox.Environment
	sandbox.ParseProbe("locale=C.UTF-8\ncmd=python3\t/usr/bin/python3\tPython 3.11.7\ncmd=sh\t/bin/sh\t\n", &env)
	fmt.Println(env.Locale, env.Commands["python3"].Version, env.Commands["sh"].Path)
	// Output:
	// C.UTF-8 3.11.7 /bin/sh
}
