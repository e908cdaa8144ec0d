package tool_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/tool"
)

func countingRun(n *atomic.Int32) tool.CodeRunner {
	return func(ctx context.Context, p policy.Policy, cmd sandbox.Command) (sandbox.Result, error) {
		n.Add(1)
		return isolated.Run(ctx, p, cmd)
	}
}

// Declared python packages are installed once, in a sandbox, into the
// cache, and every run imports them; the same list again installs nothing.
func TestPackagesInstalledOnceAndImported(t *testing.T) {
	needIsolated(t)
	wheels := testenv.Wheel(t, "hutchdemo", "ANSWER = 42\n")
	cache := t.TempDir()
	var installs atomic.Int32
	pk := tool.CodePackages{Python: []string{"hutchdemo"}, Cache: cache, PipIndex: wheels}
	ip, err := tool.InstallPackages(bg, countingRun(&installs), policy.Default(), pk)
	must(t, err)
	if _, err := tool.InstallPackages(bg, countingRun(&installs), policy.Default(), pk); err != nil || installs.Load() != 1 {
		t.Errorf("the same list again: %v, %d installs (want 1)", err, installs.Load())
	}
	if ents, _ := filepath.Glob(filepath.Join(cache, "*partial*")); len(ents) != 0 {
		t.Errorf("partial installs left: %v", ents)
	}
	b := newCodeBed(t, permission.Config{Mode: permission.ReadOnly}, false)
	b.opts.Packages = ip
	b.ts = toolsetWith(t, tool.Options{Sandbox: b.ts.Sandbox(), Code: &b.opts}, permission.Config{Mode: permission.ReadOnly})
	r, out := b.run(t, map[string]any{"language": "python", "code": "import hutchdemo; print(hutchdemo.ANSWER)"})
	if out.IsError || strings.TrimSpace(r.Stdout) != "42" {
		t.Errorf("importing the installed package: %+v", out)
	}
	// The run reads the cache; it cannot change it.
	r, _ = b.run(t, map[string]any{"language": "shell", "code": "echo x > " + filepath.Join(ip.Dirs()[0], "hutchdemo.py") + " 2>/dev/null && echo CHANGED; true"})
	if strings.Contains(r.Stdout, "CHANGED") {
		t.Error("a run changed the package cache")
	}
}

// A failed install is an error naming the packages, and leaves nothing in
// the cache; a bad index is a configuration error.
func TestPackagesFailedInstallLeavesNothing(t *testing.T) {
	needIsolated(t)
	wheels := testenv.Wheel(t, "hutchdemo", "ANSWER = 42\n")
	cache := t.TempDir()
	var n atomic.Int32
	_, err := tool.InstallPackages(bg, countingRun(&n), policy.Default(), tool.CodePackages{Python: []string{"no-such-package-xyz"}, Cache: cache, PipIndex: wheels})
	if err == nil || !strings.Contains(err.Error(), "no-such-package-xyz") {
		t.Errorf("installing a missing package: %v", err)
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Errorf("a failed install left %v", ents)
	}
	for _, pk := range []tool.CodePackages{
		{Python: []string{"x"}, Cache: cache, PipIndex: "ftp://example.com/simple"},
		{Python: []string{"x"}, Cache: "relative/cache"},
		{JavaScript: []string{"x"}, Cache: cache, NPMRegistry: "not a url"},
	} {
		if _, err := tool.InstallPackages(bg, countingRun(&n), policy.Default(), pk); !errors.Is(err, tool.ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", pk, err)
		}
	}
}

// npm packages come from the registry npm is configured with here, through
// the sandbox's allow-list proxy, and a javascript run requires them.
func TestPackagesFromTheNPMRegistry(t *testing.T) {
	needIsolated(t)
	if _, err := exec.LookPath("npm"); err != nil {
		testenv.Missing(t, "npm (scripts/test.sh installs it)")
	}
	// The registry's host may resolve to a reserved range here (a proxy in
	// front of the registry), which the sandbox's proxy refuses unless
	// listed: list what it resolves to, as an operator would.
	out, err := exec.Command("npm", "config", "get", "registry").Output()
	must(t, err)
	u, err := url.Parse(strings.TrimSpace(string(out)))
	must(t, err)
	addrs, err := net.LookupHost(u.Hostname())
	if err != nil {
		testenv.Missing(t, "the npm registry %s (DNS: %v)", u.Hostname(), err)
	}
	var n atomic.Int32
	ip, err := tool.InstallPackages(bg, countingRun(&n), policy.Default(), tool.CodePackages{JavaScript: []string{"is-number@7.0.0"}, Cache: t.TempDir(), IndexAddresses: addrs})
	if err != nil {
		t.Fatal(err)
	}
	b := newCodeBed(t, permission.Config{Mode: permission.ReadOnly}, false)
	b.opts.Packages = ip
	b.ts = toolsetWith(t, tool.Options{Sandbox: b.ts.Sandbox(), Code: &b.opts}, permission.Config{Mode: permission.ReadOnly})
	r, res := b.run(t, map[string]any{"language": "javascript", "code": "console.log(require('is-number')(5), require('is-number')('x'))"})
	if res.IsError || strings.TrimSpace(r.Stdout) != "true false" {
		t.Errorf("requiring the installed package: %+v", res)
	}
}
