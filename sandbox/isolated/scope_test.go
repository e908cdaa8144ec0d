package isolated_test

import (
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// An approval's scope names the policy, not only the start directory: the
// same call under a wider policy is not covered by one given under a
// narrower one.
func TestScope(t *testing.T) {
	e := newEnv(t)
	scope := func(p policy.Policy) string {
		sb, err := isolated.New(bg, isolated.Options{Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		if s := sb.Scope(); !strings.HasSuffix(s, " "+sb.Root()) {
			t.Errorf("scope %q does not end with the start directory %s", s, sb.Root())
		}
		return sb.Scope()
	}
	s0 := scope(e.pol)
	if again := scope(e.pol); again != s0 {
		t.Errorf("the same policy has two scopes: %q and %q", s0, again)
	}
	for name, p := range map[string]policy.Policy{
		"network all":   e.pol.Extend(policy.Policy{Network: policy.NetworkAll}),
		"more to write": e.pol.Extend(policy.Policy{Write: []string{e.outside}}),
		"no write":      policy.Default().Extend(policy.Policy{Read: []string{e.work}, Dir: e.work}),
	} {
		if s := scope(p); s == s0 {
			t.Errorf("%s: same scope %q", name, s)
		}
	}
}
