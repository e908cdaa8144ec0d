package config

import (
	"context"
	"fmt"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/server"
	"github.com/hutchsandbox/hutch/tier"
)

// ServeOpener is what `hutch serve` opens for each session: a sandbox of
// s.Tier (isolated when empty) from s's tier settings, narrowed as the
// session asks. Only a tier under a policy (isolated, or container with
// one) can be narrowed; asking a narrowing of another is refused. The
// remote tier is refused: a server does not chain to another. note
// receives what a sandbox cannot enforce of what was asked. Errors of the
// settings themselves come at once (the policy file is read, the first
// sandbox is not opened).
func ServeOpener(s Settings, note func(string)) (server.Opener, error) {
	if s.Tier == "" {
		s.Tier = tier.Isolated
	}
	if s.Tier == tier.Remote {
		return nil, fmt.Errorf("%w: hutch serve serves isolated, container, local or virtual, not remote", ErrConfig)
	}
	if err := s.checkTier(); err != nil {
		return nil, err
	}
	if err := s.checkLocalRoot(); err != nil {
		return nil, err
	}
	var base *policy.Policy
	if tc, err := tierConfig(s); err != nil {
		return nil, err
	} else if tc.Policy != nil {
		if _, err := tc.Policy.Normalize(""); err != nil {
			return nil, err
		}
		base = tc.Policy
	}
	return func(ctx context.Context, n policy.Narrowing) (sandbox.Sandbox, server.Served, error) {
		one := s
		served := server.Served{Tier: s.Tier}
		switch {
		case base != nil:
			pol, err := base.Narrow(n)
			if err != nil {
				return nil, served, err
			}
			one.Isolation, one.PolicyFile, one.Root = &pol, "", ""
			served.Summary = pol.Summary()
		case !n.IsZero():
			return nil, served, fmt.Errorf("%w: the %s tier this server serves has no policy to narrow: ask nothing, or serve the isolated tier", policy.ErrWiden, s.Tier)
		}
		sb, notes, err := openTier(ctx, one)
		for _, m := range notes {
			note(m)
		}
		return sb, served, err
	}, nil
}
