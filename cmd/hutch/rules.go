package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/permission/rules"
)

func newRulesCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "rules",
		Short: "Check a permission rules file, and try calls against it",
		Long: `A rules file holds allow, ask and deny rules the permission gate applies
before its mode (hutch mcp --rules FILE, hutch run --rules FILE); see
docs/permissions.md.

  hutch rules check FILE              load FILE and list its rules, or say what is wrong
  hutch rules test FILE KIND ARG      what the rules say of one call: KIND is shell (ARG a
                                      command line), read or write (a path below the root),
                                      fetch (a URL or host[:port]), search, or tool (a name)`,
	}
	c.AddCommand(&cobra.Command{
		Use:   "check FILE",
		Short: "Load a rules file and list its rules",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			set, err := rules.Load(args[0])
			if err != nil {
				return err
			}
			for _, r := range set.Rules() {
				fmt.Fprintf(c.OutOrStdout(), "%s: %s\n", r.Origin, r)
			}
			fmt.Fprintf(c.OutOrStdout(), "%d rules, all valid\n", len(set.Rules()))
			return nil
		},
	})
	c.AddCommand(&cobra.Command{
		Use:     "test FILE KIND ARG",
		Short:   "Print what a rules file says of one call",
		Example: "  hutch rules test rules.yaml shell 'npm test && rm -rf /'\n  hutch rules test rules.yaml read config/prod.env\n  hutch rules test rules.yaml fetch https://registry.npmjs.org/x",
		Args:    cobra.ExactArgs(3),
		RunE: func(c *cobra.Command, args []string) error {
			set, err := rules.Load(args[0])
			if err != nil {
				return err
			}
			req, err := rules.TestRequest(rules.Kind(args[1]), args[2])
			if err != nil {
				return err
			}
			m, ok := set.Match(req)
			if !ok {
				fmt.Fprintln(c.OutOrStdout(), "no rule: the permission mode decides")
				return nil
			}
			fmt.Fprintf(c.OutOrStdout(), "%s by %s\n", m.Verdict, m.Rule)
			return nil
		},
	})
	return c
}
