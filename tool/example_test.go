package tool_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
	"github.com/hutchsandbox/hutch/tool"
)

func Example() {
	ctx := context.Background()
	gate, _ := permission.New(permission.Config{Mode: permission.Auto})
	ts, _ := tool.New(tool.Options{Sandbox: virtual.New(virtual.Options{}), Gate: gate})
	var names []string
	for _, t := range ts.Tools() {
		names = append(names, t.Name)
	}
	fmt.Println(strings.Join(names, " "))

	out, _ := ts.Call(ctx, "write_file", []byte(`{"path": "hello.txt", "content": "hi\n"}`))
	fmt.Println(out.Text)
	out, _ = ts.Call(ctx, "read_file", []byte(`{"path": "../etc/passwd"}`))
	fmt.Println(out.IsError, out.Text)
	// Output:
	// read_file glob grep list write_file edit_file apply_patch move delete mkdir
	// {"ok":true,"path":"hello.txt","bytes":3}
	// true read ../etc/passwd: path escapes the sandbox root (paths must stay inside the sandbox root)
}
