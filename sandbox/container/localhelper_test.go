package container

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

// localHelper runs the helper's stream server on this host, rooted at a
// fresh directory, and wraps it as a Sandbox on the fast path: the
// protocol, the server and the reapers, without any container engine (and
// under the race detector when the tests run with -race).
func localHelper(t *testing.T) sandbox.Sandbox {
	t.Helper()
	if !helper.Ready() {
		t.Fatal("TestMain must call helper.Main")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), helper.ContainerHelperName)
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := dial(context.Background(), link, []string{"serve", root}, root)
	if err != nil {
		t.Fatal(err)
	}
	// "true" stands in for the runtime: Close's removal is a no-op.
	return &Sandbox{o: Options{WorkDir: root, Image: "local", Name: "local"}, prog: "true", id: "local", conn: sc, mode: ModeHelper}
}

func TestConformanceLocalHelper(t *testing.T) {
	sandboxtest.Run(t, localHelper, sandboxtest.Options{HostProcesses: true})
}
