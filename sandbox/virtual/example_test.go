package virtual_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
)

func Example() {
	ctx := context.Background()
	sb := virtual.New(virtual.Options{})
	defer sb.Close()

	_ = sb.Write(ctx, "notes/today.md", []byte("# hello\n"))
	data, _ := sb.Read(ctx, "/notes/today.md") // absolute paths are inside the root "/"
	files, _ := sb.Glob(ctx, "**/*.md")
	fmt.Printf("%q %q\n", data, files)

	_, err := sb.Read(ctx, "../etc/passwd")
	fmt.Println(errors.Is(err, sandbox.ErrEscape))

	_, err = sb.Exec(ctx, sandbox.Command{Shell: "ls"})
	fmt.Println(err, sb.Supports(sandbox.FeatureShell))
	// Output:
	// "# hello\n" ["notes/today.md"]
	// true
	// virtual sandbox has no shell: not supported by this sandbox false
}
