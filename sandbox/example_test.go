package sandbox_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
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

func ExampleParseEnv() {
	env, err := sandbox.ParseEnv([]string{"LANG=C.UTF-8", "OPTS=a=b", "EMPTY="})
	fmt.Println(env, err)

	_, err = sandbox.ParseEnv([]string{"NOVALUE"})
	fmt.Println(err)
	// Output:
	// map[EMPTY: LANG:C.UTF-8 OPTS:a=b] <nil>
	// invalid sandbox configuration: environment entry "NOVALUE" has no '=': write NAME=VALUE
}

func ExampleProbe() {
	sb := virtual.New(virtual.Options{})
	defer sb.Close()
	env := sandbox.Probe(context.Background(), sb, "python3")
	fmt.Printf("%q %d\n", env.Error, len(env.Commands))
	// Output:
	// "sandbox has no shell" 0
}
