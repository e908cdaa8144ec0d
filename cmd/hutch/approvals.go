package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/permission"
)

func newApprovalsCmd() *cobra.Command {
	var store string
	c := &cobra.Command{
		Use:   "approvals",
		Short: "List, approve or deny pending requests of approve mode",
		// A mistyped subcommand ("deni") is an error, not the help and
		// exit 0 that a script would take for a decision made.
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	var audit string
	c.PersistentFlags().StringVar(&store, "store", "", "the approval store file (as given to hutch mcp --store)")
	c.PersistentFlags().StringVar(&audit, "audit", "", "append approve and deny decisions to this audit log (as given to hutch mcp --audit)")
	_ = c.MarkPersistentFlagRequired("store")

	var asJSON, all bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List pending requests (--all: every request)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := permission.OpenExistingStore(store)
			if err != nil {
				return err
			}
			statuses := []permission.Status{permission.StatusPending}
			if all {
				statuses = nil
			}
			items, err := s.List(c.Context(), statuses...)
			if err != nil {
				return err
			}
			out := c.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(items)
			}
			if len(items) == 0 {
				fmt.Fprintln(out, "no pending requests")
				return nil
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSTATUS\tCAPABILITY\tTOOL\tDETAIL\tCREATED\tARGUMENTS")
			for _, a := range items {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Status, permission.Printable(string(a.Capability)), permission.Printable(a.Tool), permission.Printable(a.Detail), a.CreatedAt.Local().Format("2006-01-02 15:04:05"), listedArguments(a))
			}
			return w.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	list.Flags().BoolVar(&all, "all", false, "include decided and used requests")

	decide := func(use, short string, approve bool) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				s, err := permission.OpenExistingStore(store)
				if err != nil {
					return err
				}
				var log *permission.AuditLog
				if audit != "" {
					// Opened first: a decision that cannot be logged is
					// not made.
					if log, err = permission.OpenAudit(audit); err != nil {
						return err
					}
					defer log.Close()
				}
				a, err := s.Decide(c.Context(), args[0], approve)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.OutOrStdout(), "%s %s: %s (%s); it covers the next identical call, once, within the server's decision TTL (24h unless --decision-ttl)\n", a.Status, a.ID, permission.Printable(string(a.Capability)), permission.Printable(a.Detail))
				if log != nil {
					if err := log.RecordDecided(a); err != nil {
						return fmt.Errorf("%s %s, but writing it to the audit log failed: %w", a.Status, a.ID, err)
					}
				}
				return nil
			},
		}
	}
	check := &cobra.Command{
		Use:   "check",
		Short: "Read the whole store and say whether it is whole (exit 0) or what is damaged",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := permission.OpenExistingStore(store)
			if err != nil {
				return err
			}
			n, open, err := s.Check(c.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "approval store %s is whole: %d requests, %d waiting for a decision or a call\n", s.Path(), n, open)
			return nil
		},
	}
	c.AddCommand(list, decide("approve", "Approve one pending request", true), decide("deny", "Deny one pending request", false), check)
	return c
}

// maxListedArguments bounds the arguments a row of approvals list shows.
const maxListedArguments = 200

// listedArguments is a's arguments as approvals list shows them: every
// argument decides what the call does (a shell tool's stdin, a write's
// content, a timeout), and the detail names only the main one. Cut at
// maxListedArguments bytes, saying how long they are (approvals list
// --json shows them whole); always one printable line.
func listedArguments(a permission.Approval) string {
	s := string(a.Arguments)
	if len(s) > maxListedArguments {
		n := len(s)
		if a.ArgumentsBytes > n {
			n = a.ArgumentsBytes
		}
		s = fmt.Sprintf("%s... (%d bytes: --json shows them)", s[:maxListedArguments], n)
	}
	return permission.Printable(s)
}
