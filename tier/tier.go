// Package tier opens a sandbox by tier name and reports which tiers this
// host supports. It is the one place that knows every tier, so front ends
// stay free of tier-specific wiring: package config opens the sandbox of
// "hutch run" and "hutch mcp" through it.
package tier

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/sandbox/remote"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
)

// Tier names.
const (
	Virtual   = "virtual"
	Local     = "local"
	Isolated  = "isolated"
	Container = "container"
	Remote    = "remote"
)

// Names lists every tier, narrowest first.
var Names = []string{Virtual, Local, Isolated, Container, Remote}

// Config is what opening a tier may use. Tiers ignore what they do not need.
type Config struct {
	// Root is the host directory for tiers that have one (local).
	Root string
	// Env is added to every command's base environment.
	Env map[string]string
	// Policy is the isolated tier's policy; nil is the default policy.
	// For the container tier, a policy (when set) is mapped onto Container
	// (container.FromPolicy): its paths become binds, its limits flags.
	Policy *policy.Policy
	// Container holds the container tier's options; Image is required.
	Container *container.Options
	// Remote reaches the remote tier's server (required there).
	Remote remote.Dialer
	// Note receives, one line each, what the tier cannot enforce of what
	// was asked (a container runtime's hardening gaps, a policy's nice
	// level). Front ends must show them: nothing is dropped silently.
	Note func(string)
}

// Open returns a sandbox of the named tier. An unknown name is an error
// matching sandbox.ErrConfig; a known tier this build or host cannot
// provide is an error matching sandbox.ErrUnsupported that says why.
func Open(ctx context.Context, name string, cfg Config) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch name {
	case Virtual:
		return virtual.New(virtual.Options{}), nil
	case Local:
		return opened(local.New(ctx, local.Options{Dir: cfg.Root, Env: cfg.Env}))
	case Isolated:
		pol := policy.Default()
		if cfg.Policy != nil {
			pol = *cfg.Policy
		}
		if cfg.Env != nil {
			pol.Env = tierkit.MergeEnv(map[string]string{"PATH": sandbox.DefaultPath}, pol.Env, cfg.Env)
		}
		return opened(isolated.New(ctx, isolated.Options{Policy: pol}))
	case Container:
		return openContainer(ctx, cfg)
	case Remote:
		if cfg.Remote == nil {
			return nil, fmt.Errorf("%w: the remote tier needs a server: --server URL or --server-command CMD", sandbox.ErrConfig)
		}
		return opened(remote.New(ctx, cfg.Remote, remote.Options{Env: cfg.Env}))
	}
	if st := Check(name); !st.Supported {
		return nil, st.err
	}
	return nil, fmt.Errorf("tier %s: %w", name, sandbox.ErrUnsupported)
}

// opened is a tier constructor's result as a sandbox.Sandbox: nil, not a
// nil pointer of the tier's type in a non-nil interface, when it failed.
func opened[S sandbox.Sandbox](sb S, err error) (sandbox.Sandbox, error) {
	if err != nil {
		return nil, err
	}
	return sb, nil
}

// Status says whether a tier can be used on this host, and if not, why and
// how to fix it.
type Status struct {
	Tier      string `json:"tier"`
	Supported bool   `json:"supported"`
	// Reason explains an unsupported tier (with the fix where there is
	// one), or notes how a supported one works.
	Reason string `json:"reason"`
	err    error
}

// Check reports the status of one tier.
func Check(name string) Status {
	st := Status{Tier: name, Supported: true}
	switch name {
	case Virtual:
		st.Reason = "in memory; no shell"
	case Local:
		if err := local.Check(); err != nil {
			st.Supported, st.err = false, err
		} else {
			st.Reason = "host directory; file tools guarded by os.Root; commands unconfined, run as PID 1 of a new PID namespace"
		}
	case Isolated:
		if err := isolated.Supported(); err != nil {
			st.Supported, st.err = false, err
		} else {
			st.Reason = "kernel isolation (namespaces, Landlock, seccomp, no capabilities, limits) under a policy; commands and file tools act inside"
		}
	case Container:
		if prog, err := exec.LookPath(container.Docker.Program()); err != nil {
			st.Supported = false
			st.err = fmt.Errorf("%w: the container tier drives docker (or podman, or Apple's container) through its CLI, and none is in PATH: install docker.io and start its engine", sandbox.ErrUnsupported)
		} else {
			st.Reason = "a hardened container (no network, no capabilities, no-new-privileges, read-only root, pids limit) through " + prog + "; tools act inside through hutch's helper; the engine is checked when a sandbox starts"
		}
	case Remote:
		st.Reason = "another machine, through hutch serve there (--server URL --token-file F, or --server-command 'ssh HOST hutch serve --stdio'); the served tier guards files and commands where they are"
	default:
		st.Supported = false
		st.err = fmt.Errorf("%w: unknown tier %q: choose one of %s", sandbox.ErrConfig, name, strings.Join(Names, ", "))
	}
	if st.err != nil {
		st.Reason = st.err.Error()
	}
	return st
}

// CheckAll reports every tier, in the order of Names.
func CheckAll() []Status {
	out := make([]Status, 0, len(Names))
	for _, n := range Names {
		out = append(out, Check(n))
	}
	return out
}

// Known reports whether name is a tier name.
func Known(name string) bool { return slices.Contains(Names, name) }

// openContainer builds the container tier's options (the policy mapped
// onto them when given) and reports what the runtime cannot enforce.
func openContainer(ctx context.Context, cfg Config) (sandbox.Sandbox, error) {
	if cfg.Container == nil || cfg.Container.Image == "" {
		return nil, fmt.Errorf("%w: the container tier needs an image (--image IMAGE); there is no default", sandbox.ErrConfig)
	}
	o := *cfg.Container
	var notes []string
	if cfg.Policy != nil {
		var err error
		if o, notes, err = container.FromPolicy(*cfg.Policy, o); err != nil {
			return nil, err
		}
	}
	if cfg.Env != nil {
		o.Env = tierkit.MergeEnv(o.Env, cfg.Env)
	}
	sb, err := container.New(ctx, o)
	if err != nil {
		return nil, err // not sb: a nil *container.Sandbox is no nil sandbox.Sandbox
	}
	if cfg.Policy == nil {
		notes = sb.HardeningGaps() // FromPolicy's notes hold them already
	}
	if n := sb.HelperNote(); n != "" {
		notes = append(notes, n)
	}
	if cfg.Note != nil {
		for _, n := range notes {
			cfg.Note(n)
		}
	}
	return sb, nil
}
