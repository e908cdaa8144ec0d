package local

import (
	"context"
	"fmt"
	"maps"

	"github.com/hutchsandbox/hutch/internal/cfgerr"
	"github.com/hutchsandbox/hutch/internal/hostfs"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Options configure a local sandbox.
type Options struct {
	// Dir is the sandbox root: a directory that must exist.
	Dir string
	// Env is added to every command's base environment (PATH, HOME, LANG);
	// Command.Env overrides it.
	Env map[string]string
	// Protect and Unprotect change the file tools' protected paths, kept
	// read-only below Dir at any depth (policy.DefaultProtected: .git/hooks,
	// .vscode, shell rc files...), as policy.Policy's fields of the same
	// names do. The local tier's commands are not confined: only the file
	// tools keep them.
	Protect, Unprotect []string
}

// Sandbox is a host directory. Create one with New; it is safe for
// concurrent use. Its file operations are hostfs's.
type Sandbox struct {
	*hostfs.FS
	env map[string]string
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// New opens opts.Dir (which must exist and be a directory) as a sandbox
// root. It does not block; ctx is there for the shape every tier shares.
// Errors match sandbox.ErrConfig.
func New(ctx context.Context, opts Options) (*Sandbox, error) {
	var protected []string
	files, err := hostfs.New(opts.Dir, func() error {
		var err error
		if protected, err = policy.ProtectedPaths(opts.Protect, opts.Unprotect); err != nil {
			return cfgerr.Under(sandbox.ErrConfig, err)
		}
		for k, v := range opts.Env {
			if err := sandbox.CheckEnvVar(k, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	files.Protect(protected)
	// A copy: the caller's map changing later must not reach commands
	// (nor skip the checks above).
	return &Sandbox{FS: files, env: maps.Clone(opts.Env)}, nil
}

// Supports reports read, write, glob, stat and manage, and shell when this host can
// run commands with full process-tree cleanup (see Check).
func (s *Sandbox) Supports(c sandbox.Feature) bool {
	switch c {
	case sandbox.FeatureRead, sandbox.FeatureWrite, sandbox.FeatureGlob, sandbox.FeatureStat, sandbox.FeatureManage:
		return true
	case sandbox.FeatureShell:
		return Check() == nil
	}
	return false
}

// Instructions tells a model where it runs and what is guarded.
func (s *Sandbox) Instructions() string {
	return fmt.Sprintf("You run on the host machine, in %s. File tools are guarded to %s; "+
		"the shell is not confined: it runs on the real host with this user's permissions.", s.Root(), s.Root())
}
