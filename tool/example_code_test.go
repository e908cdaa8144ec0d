package tool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/tool"
)

// run_code with a default sandbox that reads the project and two wider
// ones the model may ask for; the person approves one call.
func ExampleCodeOptions() {
	ctx := context.Background()
	project, _ := os.MkdirTemp("", "project-")
	defer os.RemoveAll(project)

	readProject := policy.Default().Extend(policy.Policy{Read: []string{project}, Dir: project})
	code := tool.CodeOptions{
		Default: readProject,
		Escalations: map[string]policy.Policy{
			"workspace": readProject.Extend(policy.Policy{Write: []string{project}}),
			"online":    readProject.Extend(policy.Policy{Hosts: []string{"pypi.org"}}),
		},
		Run: isolated.Run, // a fresh isolated sandbox per call
	}
	code.Languages, _ = tool.ProbeLanguages(ctx, code)

	// The person: shown each escalated call, approves this one.
	asker := func(_ context.Context, req permission.Request) (bool, error) {
		fmt.Println("asked about sandbox", req.Escalation)
		return true, nil
	}
	gate, _ := permission.New(permission.Config{Mode: permission.Ask, Asker: asker})
	files, _ := local.New(ctx, local.Options{Dir: project})
	defer files.Close()
	ts, _ := tool.New(tool.Options{Sandbox: files, Gate: gate, Code: &code})

	run := func(args string) {
		out, _ := ts.Call(ctx, "run_code", json.RawMessage(args))
		var r tool.CodeResult
		_ = json.Unmarshal([]byte(out.Text), &r)
		fmt.Printf("exit %d: %s", r.ExitCode, r.Stdout)
	}
	write := `"language": "shell", "code": "echo hi > notes.txt && echo written || echo refused"`
	run(`{` + write + `}`) // the default sandbox: cannot change the project
	run(`{` + write + `, "sandbox": "workspace", "reason": "save the notes"}`)
	data, _ := os.ReadFile(filepath.Join(project, "notes.txt"))
	fmt.Printf("notes.txt: %s", data)
	// Output:
	// exit 0: refused
	// asked about sandbox workspace
	// exit 0: written
	// notes.txt: hi
}
