package main

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// "hutch mcp --code-sandbox f --escalate-to workspace=g" builds run_code
// (on the isolated tier, though --tier's default is virtual) and serves
// until stdin ends.
func TestMCPCodeFlagsBuild(t *testing.T) {
	if err := isolated.Supported(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	f := writeFile(t, filepath.Join(dir, "f.yaml"), "read: ["+dir+"]\ndir: "+dir+"\n")
	g := writeFile(t, filepath.Join(dir, "g.yaml"), "extends: f.yaml\nwrite: ["+dir+"]\n")
	code, _, errOut := hutch(t, "", "mcp", "--code-sandbox", f, "--escalate-to", "workspace="+g)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q; want 0", code, errOut)
	}

	// In process: the settings the flags make build with the names given.
	var cf codeFlags
	set := pflag.NewFlagSet("mcp", pflag.ContinueOnError)
	cf.register(set)
	if err := set.Parse([]string{"--code-sandbox", f, "--escalate-to", "workspace=" + g}); err != nil {
		t.Fatal(err)
	}
	s := config.Settings{Code: &config.CodeSettings{Sandbox: "other"}, Sandboxes: map[string]config.SandboxSpec{"other": {File: "x"}}}
	if err := cf.apply(&s, set); err != nil {
		t.Fatal(err)
	}
	b, err := config.New(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := b.Tools.Code
	if got := slices.Collect(maps.Keys(c.Escalations)); !slices.Equal(got, []string{"workspace"}) || c.Default.Dir != dir {
		t.Errorf("escalations %v, default dir %q; want [workspace], %s (the flags replace the file's code)", got, c.Default.Dir, dir)
	}
}

// A bad --code-sandbox or --escalate-to value is a one-line error (exit
// 125) that says what to give.
func TestMCPCodeFlagsBadValues(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, filepath.Join(dir, "f.yaml"), "read: ["+dir+"]\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--code-sandbox", f, "--escalate-to", "workspace"}, "give NAME=FILE"},
		{[]string{"--code-sandbox", f, "--escalate-to", "=" + f}, "give NAME=FILE"},
		{[]string{"--code-sandbox", f, "--escalate-to", "w="}, "give NAME=FILE"},
		{[]string{"--code-sandbox", f, "--escalate-to", "w=" + f, "--escalate-to", "w=" + f}, `"w" twice`},
		{[]string{"--code-sandbox", f, "--escalate-to", "default=" + f}, "--code-sandbox's name"},
		{[]string{"--code-sandbox", f, "--escalate-to", "Wide=" + f}, `sandbox name "Wide"`},
		{[]string{"--escalate-to", "w=" + f}, "needs --code-sandbox"},
		{[]string{"--code-sandbox", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"--code-sandbox", f, "--tier", "local", "--root", dir}, "the local tier has no policy to enforce"},
	} {
		code, _, errOut := hutch(t, "", append([]string{"mcp"}, c.args...)...)
		if code != 125 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%q: exit %d, stderr %q; want 125 and %q on one line", c.args, code, errOut, c.want)
		}
	}
}
