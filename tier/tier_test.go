package tier_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/tier"
)

// The test binary is also the isolated tier's helper.
func TestMain(m *testing.M) {
	helper.Main()
	os.Exit(m.Run())
}

var bg = context.Background()

// What cannot be opened says so in one line, typed: an unknown name
// (naming the tiers there are), a tier not built (unsupported), the
// container tier without an image, the local tier without a root, a
// context already done.
func TestOpenRefuses(t *testing.T) {
	done, cancel := context.WithCancel(bg)
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		tier string
		cfg  tier.Config
		is   error
		want string
	}{
		{"unknown tier", bg, "vm", tier.Config{}, sandbox.ErrConfig, "choose one of virtual, local, isolated, container, remote"},
		{"empty name", bg, "", tier.Config{}, sandbox.ErrConfig, `unknown tier ""`},
		{"remote without a server", bg, tier.Remote, tier.Config{}, sandbox.ErrConfig, "--server URL or --server-command"},
		{"container without image", bg, tier.Container, tier.Config{}, sandbox.ErrConfig, "needs an image (--image IMAGE)"},
		{"container with an empty image", bg, tier.Container, tier.Config{Container: &container.Options{}}, sandbox.ErrConfig, "needs an image"},
		{"local without root", bg, tier.Local, tier.Config{}, sandbox.ErrConfig, ""},
		{"context done", done, tier.Virtual, tier.Config{}, context.Canceled, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb, err := tier.Open(c.ctx, c.tier, c.cfg)
			if sb != nil {
				sb.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%v; want one line matching %v with %q", err, c.is, c.want)
			}
		})
	}
}

// Each tier the host supports opens by name, and its sandbox works:
// a file written reads back; where there is a shell, a command sees the
// environment the config adds.
func TestOpenEveryTier(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct {
		tier string
		cfg  tier.Config
	}{
		{tier.Virtual, tier.Config{}},
		{tier.Local, tier.Config{Root: root, Env: map[string]string{"HUTCH_TIER_TEST": "local"}}},
		{tier.Isolated, tier.Config{Env: map[string]string{"HUTCH_TIER_TEST": "isolated"}}},
	} {
		t.Run(c.tier, func(t *testing.T) {
			if st := tier.Check(c.tier); !st.Supported {
				testenv.Missing(t, "the %s tier: %s", c.tier, st.Reason)
			}
			sb, err := tier.Open(bg, c.tier, c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			if err := sb.Write(bg, "f.txt", []byte("hello")); err != nil {
				t.Fatal(err)
			}
			if b, err := sb.Read(bg, "f.txt"); err != nil || string(b) != "hello" {
				t.Fatalf("read back: %q %v", b, err)
			}
			if !sb.Supports(sandbox.FeatureShell) {
				return
			}
			r, err := sb.Exec(bg, sandbox.Command{Shell: `echo "$HUTCH_TIER_TEST $(command -v sh)"`})
			if err != nil || strings.TrimSpace(string(r.Stdout)) == "" || !strings.HasPrefix(string(r.Stdout), c.tier+" /") {
				t.Errorf("the command's environment: %q %v (want %q and sh in PATH)", r.Stdout, err, c.tier)
			}
		})
	}
}

// The isolated tier opens under the policy given, not the default one:
// a path the given policy does not list is not there.
func TestOpenIsolatedTakesThePolicy(t *testing.T) {
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "the isolated tier: %v", err)
	}
	shown, hidden := t.TempDir(), t.TempDir()
	pol := policy.Default().Extend(policy.Policy{Read: []string{shown}})
	sb, err := tier.Open(bg, tier.Isolated, tier.Config{Policy: &pol})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	r, err := sb.Exec(bg, sandbox.Command{Shell: "test -d " + shown + " && echo shown; test -e " + hidden + " || echo hidden"})
	if err != nil || string(r.Stdout) != "shown\nhidden\n" {
		t.Errorf("%q %v", r.Stdout, err)
	}
}

// A container tier opened with a policy reports, through Note, what the
// runtime cannot enforce of it (here a nice level), one line each.
func TestOpenContainerNotesWhatItCannotEnforce(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		testenv.Missing(t, "docker")
	}
	pol := policy.Default()
	pol.Nice = 5
	var notes []string
	sb, err := tier.Open(bg, tier.Container, tier.Config{Policy: &pol, Container: &container.Options{Image: "hutch-test-busybox"},
		Note: func(s string) { notes = append(notes, s) }})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "nice 5") && !strings.Contains(n, "\n") }) {
		t.Errorf("notes %q name no nice level", notes)
	}
}

// Check and CheckAll report every tier in the order of Names, an
// unsupported one with its reason; Known knows exactly those names.
func TestCheckReportsEveryTier(t *testing.T) {
	all := tier.CheckAll()
	if len(all) != len(tier.Names) {
		t.Fatalf("%d statuses for %d tiers", len(all), len(tier.Names))
	}
	for i, st := range all {
		if st.Tier != tier.Names[i] || st.Reason == "" || !tier.Known(st.Tier) {
			t.Errorf("status %d: %+v", i, st)
		}
	}
	if st := tier.Check(tier.Remote); !st.Supported || !strings.Contains(st.Reason, "hutch serve") {
		t.Errorf("remote: %+v", st)
	}
	if st := tier.Check("vm"); st.Supported || !strings.Contains(st.Reason, "unknown tier") || tier.Known("vm") {
		t.Errorf("unknown: %+v", st)
	}
	if st := tier.Check(tier.Virtual); !st.Supported {
		t.Errorf("virtual: %+v", st)
	}
}
