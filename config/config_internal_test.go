package config

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox/container"
	"github.com/hutchsandbox/hutch/tier"
)

// Close releases the last opened first, runs every step even when one
// fails, returns their errors, and releases nothing twice.
func TestCloseReleasesInReverseOrder(t *testing.T) {
	var order []string
	boom := errors.New("boom")
	b := &Built{}
	for _, name := range []string{"audit", "sandbox"} {
		b.onClose(func() error {
			order = append(order, name)
			if name == "sandbox" {
				return boom
			}
			return nil
		})
	}
	if err := b.Close(); !errors.Is(err, boom) {
		t.Errorf("Close = %v; want the sandbox's error", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if !slices.Equal(order, []string{"sandbox", "audit"}) {
		t.Errorf("closed %v; want sandbox, then audit", order)
	}
}

// The tier gets only the settings that apply to it: a container built
// from Container with Image and Runtime filling its gaps, and a policy for
// the isolated tier always (the default one when none is named) and for
// the container tier only when one is asked for, Root added as the
// writable start directory.
func TestTierConfigAppliesSettingsToTheirTier(t *testing.T) {
	flags := policy.Policy{Read: []string{"/opt"}}
	def := policy.Default()
	rooted := func(p policy.Policy) *policy.Policy {
		p = p.Extend(policy.Policy{Write: []string{"/w"}, Dir: "/w"})
		return &p
	}
	cases := []struct {
		name string
		s    Settings
		want tier.Config
	}{
		{"local", Settings{Tier: "local", Root: "/w"}, tier.Config{Root: "/w"}},
		{"isolated, default policy", Settings{Tier: "isolated"}, tier.Config{Policy: &def}},
		{"isolated with root", Settings{Tier: "isolated", Root: "/w"}, tier.Config{Root: "/w", Policy: rooted(def)}},
		{"isolated, policy flags and root", Settings{Tier: "isolated", Root: "/w", Isolation: &flags}, tier.Config{Root: "/w", Policy: rooted(flags)}},
		{"container, no policy", Settings{Tier: "container", Image: "img", Runtime: "podman"},
			tier.Config{Container: &container.Options{Image: "img", Runtime: "podman"}}},
		{"container flags win over image", Settings{Tier: "container", Image: "img", Container: &container.Options{Image: "flag"}},
			tier.Config{Container: &container.Options{Image: "flag"}}},
		{"container with root", Settings{Tier: "container", Image: "img", Root: "/w"},
			tier.Config{Root: "/w", Container: &container.Options{Image: "img"}, Policy: rooted(def)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := tierConfig(c.s)
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("tierConfig = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}
