package container_test

import (
	"context"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/sandbox/container"
)

// goneOwner is an owner label naming a process of this boot and PID
// namespace that has exited.
func goneOwner(t *testing.T) string {
	t.Helper()
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	start, err := boundary.ProcessStart(c.Process.Pid)
	_ = c.Process.Kill()
	_ = c.Wait()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(container.Owner(), ":")
	return strings.Join([]string{f[0], f[1], strconv.Itoa(c.Process.Pid), strconv.FormatUint(start, 10)}, ":")
}

// labelled starts a bare container on rt with the labels (KEY=VALUE),
// removed when t ends, and returns its name.
func labelled(t *testing.T, rt container.Runtime, labels ...string) string {
	t.Helper()
	name := uniqueName("hutch-gc")
	args := []string{"run", "-d", "--name", name}
	for _, l := range labels {
		args = append(args, "--label", l)
	}
	args = append(args, testImage, "sleep", "600")
	if out, err := exec.Command(rt.Program(), args...).CombinedOutput(); err != nil {
		t.Fatalf("%s run: %v %s", rt, err, out)
	}
	t.Cleanup(func() {
		rm := []string{"rm", "-f", name}
		if rt == container.Podman {
			rm = []string{"rm", "-f", "-t", "0", name}
		}
		_ = exec.Command(rt.Program(), rm...).Run()
	})
	return name
}

func exists(t *testing.T, rt container.Runtime, name string) bool {
	t.Helper()
	out, err := exec.Command(rt.Program(), "ps", "-a", "-q", "--filter", "name=^"+name+"$").CombinedOutput()
	if err != nil {
		t.Fatalf("%s ps: %v %s", rt, err, out)
	}
	return strings.TrimSpace(string(out)) != ""
}

// GC removes exactly the containers whose owning hutch is gone — never a
// Reconnect one (no owner label), another program's, one whose owner runs,
// or one whose owner it cannot see — on docker and podman; and a
// sandbox's start sweeps them too.
func TestGCRemovesOnlyOrphans(t *testing.T) {
	self := container.Owner()
	if self == "" {
		t.Fatal("no owner for this process")
	}
	f := strings.Split(self, ":")
	for _, rt := range []container.Runtime{container.Docker, container.Podman} {
		t.Run(string(rt), func(t *testing.T) {
			if rt == container.Podman {
				needPodman(t)
			} else {
				needDocker(t)
			}
			hutch := func(owner string) []string {
				l := []string{container.LabelID + "=x", container.LabelRuntime + "=" + string(rt)}
				if owner != "" {
					l = append(l, container.LabelOwner+"="+owner)
				}
				return l
			}
			cases := []struct {
				name   string
				labels []string
				gone   bool
			}{
				{"owner exited", hutch(goneOwner(t)), true},
				{"owner running", hutch(self), false},
				{"reconnect (no owner)", hutch(""), false},
				{"another program's", nil, false},
				{"owner label without hutch's runtime label", []string{container.LabelOwner + "=" + goneOwner(t)}, false},
				{"another boot", hutch("00000000-0000-0000-0000-000000000000:" + strings.Join(f[1:], ":")), false},
				{"another PID namespace", hutch(f[0] + ":1:" + f[2] + ":" + f[3]), false},
				{"malformed owner", hutch("pid 1"), false},
			}
			names := make([]string, len(cases))
			for i, c := range cases {
				names[i] = labelled(t, rt, c.labels...)
			}
			dry, err := container.GC(bg, container.GCOptions{Runtime: rt, DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			removed, err := container.GC(bg, container.GCOptions{Runtime: rt})
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range cases {
				listed := slices.ContainsFunc(removed, func(o container.Orphan) bool { return o.Name == names[i] })
				listedDry := slices.ContainsFunc(dry, func(o container.Orphan) bool { return o.Name == names[i] })
				there := exists(t, rt, names[i])
				switch {
				case !c.gone && (listed || listedDry || !there):
					t.Errorf("%s: removed %v (dry run %v), still there %v; want it left alone", c.name, listed, listedDry, there)
				case c.gone && there:
					t.Errorf("%s: still there after GC (listed %v, dry run %v)", c.name, listed, listedDry)
				case c.gone && !listed:
					// Another sweeper got there first: a sandbox start's
					// background sweep (this binary's, or another hutch's
					// on this machine) removes the same orphans.
					t.Logf("%s: removed by another sweep before this GC (dry run listed it: %v)", c.name, listedDry)
				}
			}
			// The next start of a sandbox sweeps an orphan too.
			orphan := labelled(t, rt, hutch(goneOwner(t))...)
			o := container.Options{Image: testImage, Runtime: rt, Helper: staticHelper(t)}
			sb, err := container.New(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			if err := sb.Start(bg); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); exists(t, rt, orphan); time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("a sandbox's start did not sweep an orphan within 30 s")
				}
			}
		})
	}
}
