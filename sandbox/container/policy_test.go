package container

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"

	"github.com/hutchsandbox/hutch/policy"
)

func TestFromPolicy(t *testing.T) {
	w, r := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(w, ".env"), []byte("SECRET=1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(w, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	p := policy.Default()
	p.Read = append(p.Read, r, filepath.Join(w, "sub"))
	p.Write = []string{w}
	p.Deny = append(p.Deny, filepath.Join(w, ".env"), filepath.Join(w, "secrets"), filepath.Join(w, "missing"))
	p.Network = policy.NetworkAll
	p.Dir = w
	p.Nice = 5
	p.Env = map[string]string{"LANG": "C.UTF-8"}
	p.Limits = policy.Limits{Memory: 256 << 20, Processes: 100, CPUTime: 30 * time.Second, FileSize: 1 << 30, OpenFiles: 512}
	o, notes, err := FromPolicy(p, Options{Image: "img", Name: "pol"})
	if err != nil {
		t.Fatal(err)
	}
	wantBinds := []Bind{{Source: w, Target: w, Writable: true}, {Source: r, Target: r}}
	if !slices.Equal(o.Binds, wantBinds) {
		t.Errorf("binds %+v, want %+v", o.Binds, wantBinds)
	}
	wantMasks := []Mask{{Target: filepath.Join(w, ".env"), File: true}, {Target: filepath.Join(w, "secrets")}}
	if !slices.Equal(o.Masks, wantMasks) {
		t.Errorf("masks %+v, want %+v", o.Masks, wantMasks)
	}
	if o.Network != "all" || o.WorkDir != w || o.Memory != 256<<20 || o.PidsLimit != 100 || o.CPUTime != 30*time.Second ||
		o.FileSize != 1<<30 || o.OpenFiles != 512 || o.Env["LANG"] != "C.UTF-8" {
		t.Errorf("options %+v", o)
	}
	if !slices.Contains(notes, "nice 5: a container has no per-command priority; not applied") ||
		!slices.Contains(notes, "network: all (not isolated)") {
		t.Errorf("notes %q", notes)
	}
	got := strings.Join(o.RunArgs("pol", "", true), " ")
	want := "--network bridge --cap-drop ALL --security-opt no-new-privileges --read-only --tmpfs /tmp:rw,nosuid,nodev " +
		"--pids-limit 100 --memory 268435456 --ulimit cpu=30:31 --ulimit fsize=1073741824:1073741824 --ulimit nofile=512:512 " +
		"--mount type=bind,source=" + w + ",target=" + w + " --mount type=bind,source=" + r + ",target=" + r + ",readonly " +
		"--mount type=bind,source=/dev/null,target=" + w + "/.env,readonly --mount type=tmpfs,target=" + w + "/secrets,readonly " +
		"-w " + w + " "
	if !strings.Contains(got, want) {
		t.Errorf("run argv\n %s\nlacks\n %s", got, want)
	}
	if _, _, err := FromPolicy(policy.Policy{Network: "some"}, Options{Image: "img"}); err == nil {
		t.Error("a bad policy must fail")
	}
	// An allow-list is neither dropped to none nor widened to all.
	if _, _, err := FromPolicy(policy.Default().Extend(policy.Policy{Hosts: []string{"pypi.org"}}), Options{Image: "img"}); !errors.Is(err, sandbox.ErrConfig) ||
		!strings.Contains(err.Error(), "isolated tier") {
		t.Errorf("an allow-list policy: %v, want a configuration error naming the isolated tier", err)
	}
}

// The default policy's process and memory limits become the container's;
// a policy that lifts them (policy.Unlimited) gets no process limit at all
// (NoPidsLimit, not the container's own default of 512) and no memory
// limit, never a -1 passed to the runtime.
func TestFromPolicyMapsTheDefaultLimitsAndUnlimited(t *testing.T) {
	const u = policy.Unlimited
	for _, c := range []struct {
		name   string
		l      policy.Limits
		pids   int
		memory int64
	}{
		{"the default's", policy.Limits{}, policy.DefaultProcesses, int64(policy.DefaultMemory())},
		{"unlimited", policy.Limits{Processes: u, Memory: u}, NoPidsLimit, 0},
		{"numbers", policy.Limits{Processes: 200, Memory: 1 << 30}, 200, 1 << 30},
	} {
		o, _, err := FromPolicy(policy.Default().Extend(policy.Policy{Limits: c.l}), Options{Image: "img"})
		if err != nil || o.PidsLimit != c.pids || o.Memory != c.memory {
			t.Errorf("%s: pids %d, memory %d, %v; want %d and %d", c.name, o.PidsLimit, o.Memory, err, c.pids, c.memory)
		}
	}
}
