package permission_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hutchsandbox/hutch/permission"
)

func Example() {
	ctx := context.Background()
	g, _ := permission.New(permission.Config{Mode: permission.ReadOnly, Allow: []permission.Capability{permission.Write}})

	d, _ := g.Check(ctx, permission.Request{Capability: permission.Shell, Detail: "rm -rf /"})
	fmt.Println(d.Allowed, d.Reason)
	d, _ = g.Check(ctx, permission.Request{Capability: permission.Write, Detail: "notes.md"})
	fmt.Println(d.Allowed, d.By)
	fmt.Println(g.NeverAllows(permission.Shell), g.NeverAllows(permission.Write))
	// Output:
	// false shell denied in read_only mode
	// true allow
	// true false
}

func ExampleStore() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "hutch-approvals-")
	defer os.RemoveAll(dir)
	store, _ := permission.OpenStore(filepath.Join(dir, "approvals.db"))
	g, _ := permission.New(permission.Config{Mode: permission.Approve, Store: store})
	call := permission.Request{Capability: permission.Shell, Detail: "make deploy", Tool: "shell", Args: []byte(`{"command":"make deploy"}`)}

	_, err := g.Check(ctx, call)
	var pending *permission.ApprovalRequiredError
	fmt.Println(errors.As(err, &pending))

	_, _ = store.Decide(ctx, pending.ID, true) // a person approves, perhaps in another process
	d, _ := g.Check(ctx, call)
	fmt.Println(d.Allowed)
	_, err = g.Check(ctx, call) // the approval covered one call
	fmt.Println(errors.Is(err, permission.ErrApprovalRequired))
	// Output:
	// true
	// true
	// true
}
