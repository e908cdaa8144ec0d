package rules_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/permission/rules"
)

// Load a rules file and build a read_only gate that runs npm test without
// asking and never reads .env.
func Example() {
	dir, _ := os.MkdirTemp("", "rules")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "rules.yaml")
	os.WriteFile(path, []byte(`rules:
  - allow: shell npm test *
  - deny: shell rm -rf *
  - deny: read *.env
    reason: secrets stay out of the model
`), 0o644)

	set, err := rules.Load(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	gate, err := permission.New(permission.Config{Mode: permission.ReadOnly, Rules: set})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, r := range []permission.Request{
		{Capability: permission.Shell, Tool: "shell", Command: "npm test --silent"},
		{Capability: permission.Shell, Tool: "shell", Command: "npm test && rm -rf /"},
		{Capability: permission.Shell, Tool: "shell", Command: "make"},
		{Capability: permission.Read, Tool: "read_file", Paths: []string{"config/prod.env"}},
	} {
		d, _ := gate.Check(ctx, r)
		fmt.Println(d.Allowed, d.By, filepath.Base(d.Rule))
	}
	// Output:
	// true rule rules.yaml:2: allow shell npm test *
	// false rule rules.yaml:3: deny shell rm -rf *
	// false mode .
	// false rule rules.yaml:4: deny read *.env
}
