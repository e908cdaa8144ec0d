package tool_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
	"github.com/hutchsandbox/hutch/tool"
)

// benchCode is a toolset whose run_code runs in the default policy, on the
// isolated tier (bench/run_code.sh compares it with bubblewrap and hutch
// run).
func benchCode(b *testing.B) *tool.Toolset {
	if err := isolated.Supported(); err != nil {
		b.Skip(err)
	}
	opts := tool.CodeOptions{Default: policy.Default(), Run: isolated.Run, RunDirs: b.TempDir()}
	langs, err := tool.ProbeLanguages(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	opts.Languages = langs
	g, _ := permission.New(permission.Config{Mode: permission.ReadOnly})
	ts, err := tool.New(tool.Options{Sandbox: virtual.New(virtual.Options{}), Gate: g, Code: &opts})
	if err != nil {
		b.Fatal(err)
	}
	return ts
}

func benchRunCode(b *testing.B, args string) {
	ts := benchCode(b)
	for b.Loop() {
		out, err := ts.Call(context.Background(), "run_code", json.RawMessage(args))
		var r tool.CodeResult
		if err != nil || out.IsError || json.Unmarshal([]byte(out.Text), &r) != nil || r.ExitCode != 0 {
			b.Fatalf("run_code: %+v %v", out, err)
		}
	}
}

func BenchmarkRunCodePython(b *testing.B) {
	benchRunCode(b, `{"language": "python", "code": "print(1)"}`)
}

func BenchmarkRunCodeShell(b *testing.B) {
	benchRunCode(b, `{"language": "shell", "code": "true"}`)
}

// BenchmarkIsolatedRunTrue is the one-shot run under run_code, alone: what
// run_code adds is the difference.
func BenchmarkIsolatedRunTrue(b *testing.B) {
	if err := isolated.Supported(); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		r, err := isolated.Run(context.Background(), policy.Default(), sandbox.Command{Args: []string{"/bin/true"}})
		if err != nil || r.ExitCode != 0 {
			b.Fatal(r, err)
		}
	}
}
