// Package archtest checks the import arrows between hutch's host side and
// the inside of a sandbox (see TestImportArrows).
package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hutchsandbox/hutch"

// inside are the inside-only packages: the helper roles and the programs
// of system calls that build and confine a sandbox. Only package helper
// (the public entry points) and they themselves import them.
var inside = []string{
	module + "/internal/session",
	module + "/internal/sysprog",
	module + "/internal/containerhelper",
}

// shared are the packages both sides import. They import no inside-only
// package and no tier.
var shared = []string{
	module + "/internal/wire",
	module + "/internal/boundary",
	module + "/internal/hostfs",
	module + "/internal/seccomp",
	module + "/internal/streamserver",
}

// isTier reports whether path is a tier or a front end, which the inside
// of a sandbox must not depend on: sandbox/<tier> (the package sandbox
// itself is the contract, and allowed), tier, mcpserver and cmd.
func isTier(path string) bool {
	rest, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return false
	}
	for _, top := range []string{"tier", "mcpserver"} {
		if rest == top || strings.HasPrefix(rest, top+"/") {
			return true
		}
	}
	return strings.HasPrefix(rest, "sandbox/") || strings.HasPrefix(rest, "cmd/")
}

type pkg struct {
	ImportPath                         string
	Imports, TestImports, XTestImports []string
	Deps                               []string
}

// listModule is every package of the module as go list shows it.
func listModule(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Deps", module+"/...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return pkgs
}

// The import arrows, so that the inside of a sandbox carries no tier and
// the host side reaches the inside only through package helper's entry
// points (Main, Ready, RunOnce):
//
//   - no package but helper and the inside-only packages imports an
//     inside-only package (directly, in its code or its tests);
//   - no inside-only or shared package, nor helper, depends on a tier
//     (sandbox/<tier>, tier, mcpserver, cmd), even indirectly;
//   - no shared package depends on an inside-only package.
func TestImportArrows(t *testing.T) {
	pkgs := listModule(t)
	found := map[string]bool{}
	for _, p := range pkgs {
		found[p.ImportPath] = true
	}
	for _, want := range append(append([]string{module + "/helper"}, inside...), shared...) {
		if !found[want] {
			t.Errorf("go list does not show %s: update this test's lists", want)
		}
	}
	for _, p := range pkgs {
		path := p.ImportPath
		isInside := slices.Contains(inside, path)
		isShared := slices.Contains(shared, path)
		if path != module+"/helper" && !isInside {
			for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
				if slices.Contains(inside, imp) {
					t.Errorf("%s imports the inside-only %s: reach it through package helper", path, imp)
				}
			}
		}
		if path == module+"/helper" || isInside || isShared {
			for _, d := range p.Deps {
				if isTier(d) {
					t.Errorf("%s depends on the tier %s: the inside imports no tier", path, d)
				}
				if isShared && slices.Contains(inside, d) {
					t.Errorf("the shared %s depends on the inside-only %s", path, d)
				}
			}
		}
	}
}
