package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/sandbox/container"
)

func newGCCmd() *cobra.Command {
	var o container.GCOptions
	var runtime string
	c := &cobra.Command{
		Use:   "gc",
		Short: "Remove the containers of hutch processes that are gone",
		Long: `Remove hutch's orphaned containers: those whose owning hutch process (named
by the hutch.sandbox.owner label) ran on this machine since its last boot,
in this PID namespace, and has exited. A killed hutch's container normally
goes away by itself within seconds; this removes what did not. Reconnect
containers (--reconnect), containers of other programs, and those whose
owner this machine cannot see are never touched. Prints one line per
container removed (with --dry-run, per container it would remove).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o.Runtime = container.Runtime(runtime)
			removed, err := container.GC(c.Context(), o)
			verb := "removed"
			if o.DryRun {
				verb = "would remove"
			}
			for _, r := range removed {
				fmt.Fprintf(c.OutOrStdout(), "%s %s (%.12s): %s\n", verb, r.Name, r.ID, r.Why)
			}
			return err
		},
	}
	fl := c.Flags()
	fl.StringVar(&runtime, "runtime", "", "docker (default) or podman")
	fl.StringVar(&o.Engine.Context, "engine-context", "", "docker context or podman connection to use")
	fl.StringVar(&o.Engine.Host, "engine-host", "", "docker daemon address or podman service URL")
	fl.BoolVar(&o.DryRun, "dry-run", false, "list the orphans without removing them")
	return c
}
