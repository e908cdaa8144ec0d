package remote_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/remote"
)

// RunCode runs a command prepared for a run directory here on the
// server: the run directory and the mounts go there, the command's paths
// name the copy, and what it wrote comes back — into the run directory,
// into a writable mount — but never into a read-only mount's folder; the
// server's copy is gone afterwards.
func TestRunCodeCarriesTheRunDirectory(t *testing.T) {
	for _, tier := range tiers {
		t.Run(tier, func(t *testing.T) {
			served := t.TempDir()
			sb := serveTier(t, tier, served)
			defer sb.Close()
			run, rw, ro := t.TempDir(), t.TempDir(), t.TempDir()
			write := func(p, s string) {
				t.Helper()
				if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(filepath.Join(run, "input.txt"), "IN")
			write(filepath.Join(run, "script.sh"), `cd "$RUN_DIR" && cat input.txt && echo out > out.txt && echo w > rw/new.txt && echo x > ro/changed.txt && cat ro/given.txt && pwd`)
			write(filepath.Join(ro, "given.txt"), "GIVEN")
			if err := os.Symlink(rw, filepath.Join(run, "rw")); err != nil { // as run_code links its mounts
				t.Fatal(err)
			}
			cmd := sandbox.Command{Args: []string{"/bin/sh", filepath.Join(run, "script.sh")}, Env: map[string]string{"RUN_DIR": run}, Dir: run}
			res, err := sb.RunCode(bg, cmd, run, []remote.CodeMount{{Name: "rw", Host: rw, Writable: true}, {Name: "ro", Host: ro}})
			if err != nil {
				t.Fatal(err)
			}
			out := string(res.Stdout)
			if res.ExitCode != 0 || !strings.HasPrefix(out, "INGIVEN") || !strings.Contains(out, sb.Root()+"/.hutch-run-") || strings.Contains(out, run) {
				t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			for p, want := range map[string]string{filepath.Join(run, "out.txt"): "out\n", filepath.Join(rw, "new.txt"): "w\n"} {
				if b, err := os.ReadFile(p); err != nil || string(b) != want {
					t.Errorf("%s: %q %v, want %q", p, b, err, want)
				}
			}
			if _, err := os.Stat(filepath.Join(ro, "changed.txt")); err == nil {
				t.Error("a read-only mount's folder changed here")
			}
			if _, err := os.Lstat(filepath.Join(run, "ro")); err == nil {
				t.Error("the read-only mount's copy came back into the run directory")
			}
			if ents, err := os.ReadDir(served); err != nil || len(ents) != 0 {
				t.Errorf("the server's copy is left: %v %v", ents, err)
			}
		})
	}
}

// CodeNarrowing asks the server for the run's network always, for its
// limits only where they differ from the default policy's, and refuses
// paths, which would be the server's.
func TestCodeNarrowing(t *testing.T) {
	def := policy.Default()
	n, err := remote.CodeNarrowing(def)
	if err != nil || n.Network != policy.NetworkNone || n.Limits != (policy.Limits{}) || n.Timeout != 0 || len(n.Read)+len(n.Write)+len(n.Deny) != 0 {
		t.Errorf("the default policy: %+v, %v", n, err)
	}
	p := def.Extend(policy.Policy{Network: policy.NetworkAllow, Hosts: []string{"pypi.org"}, Limits: policy.Limits{Processes: 64}, Write: []string{"/run/x"}})
	if n, err := remote.CodeNarrowing(p, "/run/x"); err != nil || n.Network != policy.NetworkAllow || len(n.Hosts) != 1 || n.Limits.Processes != 64 {
		t.Errorf("a narrower sandbox with its run directory: %+v, %v", n, err)
	}
	if _, err := remote.CodeNarrowing(p); err == nil || !strings.Contains(err.Error(), "write /run/x") {
		t.Errorf("a path of this machine: %v", err)
	}
}
