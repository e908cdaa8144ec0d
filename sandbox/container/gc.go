package container

import (
	"context"
	"fmt"
	"strings"
)

// GCOptions select the engine GC looks at.
type GCOptions struct {
	// Runtime is docker (the default) or podman. Apple's runtime has no
	// owner labels to go by.
	Runtime Runtime
	// Program is the runtime's program, a path or a name looked up in
	// PATH; "" means the runtime's own.
	Program string
	// Engine is the engine the program talks to.
	Engine Engine
	// RuntimeArgs are extra global flags for the program.
	RuntimeArgs []string
	// DryRun lists the orphans without removing them.
	DryRun bool
}

// Orphan is a container of hutch's whose owning process is gone.
type Orphan struct {
	ID   string // the container's id
	Name string // its name (also its LabelID)
	Why  string // how its owner is known gone
}

// GC removes hutch's orphaned containers: those carrying hutch's owner
// label (LabelOwner, which every container has but a Reconnect one)
// whose owner was a process of this machine's current boot, in this PID
// namespace, that has exited. Containers without the label — other
// programs', Reconnect ones, ones older versions of hutch made — and
// those whose owner this process cannot see (another machine, boot or
// PID namespace) are never touched. It returns what it removed (with
// DryRun, what it would remove); errors match sandbox.ErrConfig for bad
// options, and otherwise carry the runtime's message.
func GC(ctx context.Context, opts GCOptions) ([]Orphan, error) {
	o := Options{Runtime: opts.Runtime, Program: opts.Program, Engine: opts.Engine, RuntimeArgs: opts.RuntimeArgs}
	switch o.Runtime {
	case "":
		o.Runtime = Docker
	case Docker, Podman:
	case Apple:
		return nil, configErr("gc: Apple's container runtime is not supported (its containers carry no owner label)")
	default:
		return nil, configErr("gc: unknown runtime %q: choose docker or podman", o.Runtime)
	}
	prog, err := o.program()
	if err != nil {
		return nil, err
	}
	s := &Sandbox{o: o, prog: prog}
	orphans, err := s.orphans(ctx)
	if err != nil || opts.DryRun {
		return orphans, err
	}
	return s.remove(ctx, orphans)
}

// remove removes the orphans and returns those it removed (or found
// gone already), stopping at the first failure.
func (s *Sandbox) remove(ctx context.Context, orphans []Orphan) ([]Orphan, error) {
	var removed []Orphan
	for _, c := range orphans {
		if _, err := s.run(ctx, nil, s.o.RemoveArgs(c.ID)...); err != nil && !removedAlready(err) {
			return removed, fmt.Errorf("gc: removing container %s: %w", c.Name, err)
		}
		removed = append(removed, c)
	}
	return removed, nil
}

// orphans lists the containers of s's runtime and engine that carry
// hutch's owner label naming a process known to have exited.
func (s *Sandbox) orphans(ctx context.Context) ([]Orphan, error) {
	out, err := s.run(ctx, nil, s.o.OwnedArgs()...)
	if err != nil {
		return nil, fmt.Errorf("gc: listing hutch's containers: %w", err)
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		return nil, nil
	}
	out, err = s.run(ctx, nil, s.o.OwnerArgs(ids...)...)
	if err != nil && !strings.Contains(strings.ToLower(err.Error()), "no such") {
		return nil, fmt.Errorf("gc: reading the owners of hutch's containers: %w", err)
	}
	var orphans []Orphan
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] == "" {
			continue
		}
		if gone, why := ownerGone(f[2]); gone {
			orphans = append(orphans, Orphan{ID: f[0], Name: strings.TrimPrefix(f[1], "/"), Why: why})
		}
	}
	return orphans, nil
}

// sweep removes the orphans of this sandbox's runtime and engine (see
// GC), as a sandbox's start does in the background; failures are
// dropped (the next start, or `hutch gc`, tries again).
func (s *Sandbox) sweep(ctx context.Context) {
	if orphans, err := s.orphans(ctx); err == nil {
		_, _ = s.remove(ctx, orphans)
	}
}
