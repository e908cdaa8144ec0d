package container_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
)

// TestReview6ReconnectWithoutHelperKeepsLimits (fails since e243935 and
// afd2858): a container made on the helper path no longer carries the
// CPU-time and open-files rlimits (the helper sets them per command). A
// later session that reconnects to it without the helper (NoHelper here;
// equally a program that does not call helper.Main, or a remote engine
// without Options.Helper) runs every command through `docker exec` with
// neither limit, silently: bringUp's helperLimits guard only covers a
// helper that failed to start, not s.helper == "". Either the limits hold
// or the session refuses; before the change both held.
func TestReview6ReconnectWithoutHelperKeepsLimits(t *testing.T) {
	needDocker(t)
	name := uniqueName("hutch-r6")
	lim := container.Options{Name: name, Reconnect: true, CPUTime: 2 * time.Second, OpenFiles: 64}
	sb1 := onHelper(t, newSB(t, lim))
	id := sb1.ID()
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() })
	_ = sb1.Close()

	lim.NoHelper = true
	sb2 := newSB(t, lim)
	r, err := sb2.Exec(bg, sandbox.Command{Shell: "grep -e 'Max cpu time' -e 'Max open files' /proc/self/limits | tr -s ' '", Timeout: 30 * time.Second})
	if err != nil {
		// Refused, as it must be: the container has neither limit. (It
		// was made with the helper: the config label differs.)
		if !errors.Is(err, sandbox.ErrConfig) || !strings.Contains(err.Error(), "reconnect with the options it was made with") {
			t.Errorf("reconnected without the helper: %v, want the refusal naming the fix", err)
		}
		return
	}
	out := string(r.Stdout)
	if !strings.Contains(out, "Max cpu time 2 3 seconds") || !strings.Contains(out, "Max open files 64 64 files") {
		t.Errorf("reconnected without the helper, the command runs with %q (mode %q), want CPU time 2:3 and 64 open files, or a refusal", out, mode(sb2))
	}
}

func mode(sb *container.Sandbox) container.Mode { m, _ := sb.Mode(); return m }
