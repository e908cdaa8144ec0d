package tool_test

// Review 7: approvals and the sandbox they bind to. A test that fails on
// the current code demonstrates a defect and says what the right behaviour
// is; a passing one pins a behaviour checked and found correct.

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox/container"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/tool"
)

// DEFECT: tool.Scope is "type:Root()", and a container sandbox's Root is
// its working directory inside the container ("/workspace" by default), so
// two container servers sharing one approval store — one binding a
// throwaway checkout at /workspace, the other the user's real project, or
// another image, or a remote engine — have the same scope: an approval a
// person gave for "rm -rf ." in the first is claimed by the identical call
// in the second. Permission's doc promises "one given for one workspace
// never covers a call in another that shares the store". Right behaviour:
// the container scope names what the calls reach — image, engine, and the
// binds' host sources (or a digest of the normalized options).
func TestReview7ContainerScopeNamesTheWorkspace(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	mk := func(o container.Options) string {
		o.Program, o.NoHelper = "/bin/true", true // New starts nothing
		sb, err := container.New(o)
		if err != nil {
			t.Fatal(err)
		}
		return tool.Scope(sb)
	}
	base := container.Options{Image: "debian:stable-slim", Binds: []container.Bind{{Source: a, Target: "/workspace", Writable: true}}}
	s0 := mk(base)
	for name, o := range map[string]container.Options{
		"other host directory": {Image: base.Image, Binds: []container.Bind{{Source: b, Target: "/workspace", Writable: true}}},
		"other image":          {Image: "alpine:3", Binds: base.Binds},
		"other engine":         {Image: base.Image, Binds: base.Binds, Engine: container.Engine{Host: "ssh://me@build"}},
	} {
		if s := mk(o); s == s0 {
			t.Errorf("%s: same approval scope %q", name, s)
		}
	}
}

// Local sandboxes: an approval given for one root never lets the same call
// through in another root sharing the store, and the arguments approved are
// the decoded ones (differently cased or duplicated keys cannot show the
// approver one path and write another).
func TestReview7ApprovalBoundToRootAndDecodedArgs(t *testing.T) {
	store, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(t, permission.Config{Mode: permission.Approve, Store: store})
	ts := func(dir string) *tool.Toolset {
		sb, err := local.New(dir, local.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sb.Close() })
		s, err := tool.New(tool.Options{Sandbox: sb, Gate: g})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	tsA, tsB := ts(dirA), ts(dirB)
	raw := json.RawMessage(`{"path":"decoy.txt","PATH":"x.txt","content":"v"}`)
	_, err = tsA.Call(bg, "write_file", raw)
	var ar *permission.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("want approval required, got %v", err)
	}
	a, err := store.Get(bg, ar.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Detail != "x.txt" || string(a.Arguments) != `{"content":"v","path":"x.txt"}` {
		t.Fatalf("the person is shown %q %s; want what the tool will do", a.Detail, a.Arguments)
	}
	if _, err := store.Decide(bg, ar.ID, true); err != nil {
		t.Fatal(err)
	}
	// Root B: not covered.
	if _, err := tsB.Call(bg, "write_file", json.RawMessage(`{"path":"x.txt","content":"v"}`)); !errors.Is(err, permission.ErrApprovalRequired) {
		t.Fatalf("another root: %v; want approval required", err)
	}
	if _, err := os.Stat(filepath.Join(dirB, "x.txt")); err == nil {
		t.Fatal("the approval for root A wrote in root B")
	}
	// Root A, plainly spelled: covered, once.
	out, err := tsA.Call(bg, "write_file", json.RawMessage(`{"content":"v","path":"x.txt"}`))
	if err != nil || out.IsError {
		t.Fatalf("approved call: %+v %v", out, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dirA, "x.txt")); string(b) != "v" {
		t.Fatalf("file holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(dirA, "decoy.txt")); err == nil {
		t.Fatal("the decoy path was written")
	}
}
