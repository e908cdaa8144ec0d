package container

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/streamclient"
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
	link := filepath.Join(t.TempDir(), boundary.ContainerHelperName)
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := streamclient.Dial(context.Background(), exec.Command(link, "serve", root), "the helper on this host")
	if err != nil {
		t.Fatal(err)
	}
	// "true" stands in for the runtime: Close's removal is a no-op.
	s := &Sandbox{o: Options{WorkDir: root, Image: "local", Name: "local"}, prog: "true", id: "local", conn: sc, mode: ModeHelper}
	s.front()
	return s
}

func TestConformanceLocalHelper(t *testing.T) {
	sandboxtest.Run(t, localHelper, sandboxtest.Options{HostProcesses: true})
}

// A kill for one command never reaches the next one the same reaper runs:
// not the timeout's kill still under way when the command has ended, nor
// a cancel that comes after its command answered. (A clean-clone CI run
// saw "echo ok" killed 37 ms in, right after a command that timed out.)
func TestKillOfACommandSparesTheNext(t *testing.T) {
	sb := localHelper(t)
	defer sb.Close()
	ok := func(i int, what string) {
		t.Helper()
		r, err := sb.Exec(context.Background(), sandbox.Command{Shell: "echo ok", Timeout: 10 * time.Second})
		if err != nil || r.ExitCode != 0 || string(r.Stdout) != "ok\n" {
			t.Fatalf("round %d, after %s: %+v %v", i, what, r, err)
		}
	}
	for i := range 100 {
		// The timeout fires as the command ends by itself.
		_, _ = sb.Exec(context.Background(), sandbox.Command{Shell: "sleep 0.05", Timeout: 50 * time.Millisecond})
		ok(i, "a command timed out")
		// The caller gives up as the command ends: the cancel comes late.
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%8)*time.Millisecond)
		_, _ = sb.Exec(ctx, sandbox.Command{Shell: "true"})
		cancel()
		ok(i, "a call given up")
	}
}
