package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/remote"
	"github.com/hutchsandbox/hutch/tier"
)

func newCheckCmd() *cobra.Command {
	var asJSON bool
	var root, tierName string
	var rf remoteFlags
	c := &cobra.Command{
		Use:   "check",
		Short: "Show which sandbox tiers this host supports, and the local environment",
		Long: `Show which sandbox tiers this host supports, the isolated tier's layers, the
default policy and the local environment. With --tier remote and --server
(or --server-command), check that server instead: whether it is reachable,
whether it takes the token, what tier and policy it serves.`,
		Example: `  hutch check
  hutch check --tier remote --server http://127.0.0.1:7777 --token-file ~/.hutch-serve-token`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if tierName != "" || slices.ContainsFunc(remoteFlagNames, c.Flags().Changed) {
				if tierName != tier.Remote {
					return fmt.Errorf("--tier %q: check takes --tier remote (with --server or --server-command), or no --tier for this host", tierName)
				}
				s := config.Settings{Tier: tier.Remote}
				if err := rf.apply(c.Flags(), &s); err != nil {
					return err
				}
				return checkRemote(c, s, asJSON)
			}
			def := policy.Default()
			report := struct {
				Tiers         []tier.Status       `json:"tiers"`
				Layers        []isolated.Layer    `json:"isolation_layers"`
				HelperNote    string              `json:"container_helper_note,omitempty"`
				DefaultPolicy defaultPolicy       `json:"default_policy"`
				Environment   sandbox.Environment `json:"environment"`
			}{Tiers: tier.CheckAll(), Layers: isolated.Layers(), HelperNote: container.DefaultHelperNote(),
				DefaultPolicy: defaultPolicy{Processes: def.Limits.Processes, Memory: def.Limits.Memory, Summary: def.Summary()}}
			sb, err := tier.Open(c.Context(), tier.Local, tier.Config{Root: root})
			if err != nil {
				report.Environment.Error = err.Error()
			} else {
				defer sb.Close()
				report.Environment = sandbox.Probe(c.Context(), sb)
			}
			out := c.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(report)
			}
			for _, st := range report.Tiers {
				state := "supported"
				if !st.Supported {
					state = "not supported"
				}
				fmt.Fprintf(out, "%-10s %-14s %s\n", st.Tier, state, st.Reason)
			}
			if report.HelperNote != "" {
				fmt.Fprintf(out, "note: %s\n", report.HelperNote)
			}
			fmt.Fprintln(out, "\nisolated tier layers:")
			for _, l := range report.Layers {
				state := "active"
				if !l.Active {
					state = "inactive"
				}
				fmt.Fprintf(out, "  %-26s %-9s %s\n", l.Name, state, l.Detail)
			}
			fmt.Fprintf(out, "\ndefault policy (hutch run, hutch mcp --tier isolated):\n  %s\n", report.DefaultPolicy.Summary)
			fmt.Fprintf(out, "  at most %d processes and threads, %v of memory (half the host's memory, at most 8 GiB); lift them with --pids unlimited and --memory unlimited\n",
				report.DefaultPolicy.Processes, report.DefaultPolicy.Memory)
			env := report.Environment
			fmt.Fprintf(out, "\nlocal environment (root %s):\n", root)
			printEnvironment(out, env)
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	c.Flags().StringVar(&root, "root", ".", "root directory for the local environment probe")
	c.Flags().StringVar(&tierName, "tier", "", "remote: check a hutch serve (with --server or --server-command)")
	rf.register(c.Flags())
	return c
}

// remoteReport is what hutch check --tier remote says of a server.
type remoteReport struct {
	Server        string               `json:"server"`
	Reachable     bool                 `json:"reachable"`
	Authenticated bool                 `json:"authenticated"`
	Tier          string               `json:"tier,omitempty"`
	Root          string               `json:"root,omitempty"`
	Instructions  string               `json:"instructions,omitempty"`
	Environment   *sandbox.Environment `json:"environment,omitempty"`
	Error         string               `json:"error,omitempty"`
}

// checkRemote opens a session on the server of s, reports what it
// serves, probes its environment, and closes the session. An unreachable
// or refusing server is reported (and is the command's error).
func checkRemote(c *cobra.Command, s config.Settings, asJSON bool) error {
	rep := remoteReport{Server: s.Server}
	if rep.Server == "" {
		rep.Server = strings.Join(s.ServerCommand, " ")
	}
	sb, _, err := config.OpenSandbox(c.Context(), s)
	switch {
	case errors.Is(err, remote.ErrRefused):
		rep.Reachable, rep.Error = true, err.Error()
	case err != nil:
		rep.Error = err.Error()
	default:
		defer sb.Close()
		rep.Reachable, rep.Authenticated = true, true
		if r, ok := sb.(*remote.Sandbox); ok {
			rep.Tier = r.Tier()
		}
		rep.Root, rep.Instructions = sb.Root(), sb.Instructions()
		env := sandbox.Probe(c.Context(), sb)
		rep.Environment = &env
	}
	out := c.OutOrStdout()
	if asJSON {
		if err := json.NewEncoder(out).Encode(rep); err != nil {
			return err
		}
	} else {
		yes := map[bool]string{true: "yes", false: "no"}
		fmt.Fprintf(out, "server         %s\nreachable      %s\nauthenticated  %s\n", rep.Server, yes[rep.Reachable], yes[rep.Authenticated])
		if rep.Authenticated {
			fmt.Fprintf(out, "tier           %s\nroot           %s\n%s\n", rep.Tier, rep.Root, rep.Instructions)
			printEnvironment(out, *rep.Environment)
		}
	}
	if rep.Error != "" {
		return errors.New(rep.Error)
	}
	return nil
}

// printEnvironment prints a probe's answer: the commands found, the
// locale, and what the sandbox cannot guarantee.
func printEnvironment(out io.Writer, env sandbox.Environment) {
	for _, g := range env.Gaps {
		fmt.Fprintf(out, "  cannot guarantee: %s\n", g)
	}
	if env.Error != "" {
		fmt.Fprintf(out, "  could not probe: %s\n", env.Error)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(env.Commands)) {
		ci := env.Commands[name]
		fmt.Fprintf(out, "  %-8s %-10s %s\n", name, orDash(ci.Version), ci.Path)
	}
	fmt.Fprintf(out, "  locale   %s\n", orDash(env.Locale))
}

// defaultPolicy is what hutch check reports of policy.Default: its
// limits, and the whole policy in words.
type defaultPolicy struct {
	Processes int         `json:"processes"`
	Memory    policy.Size `json:"memory"`
	Summary   string      `json:"summary"`
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print hutch's version",
		Args:  cobra.NoArgs,
		Run: func(c *cobra.Command, _ []string) {
			fmt.Fprintf(c.OutOrStdout(), "hutch %s (%s, %s/%s)\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}

// version is the module version, or "devel" plus the VCS revision when
// built from a checkout.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	v := "devel"
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			v += " " + s.Value[:min(12, len(s.Value))]
		}
	}
	return strings.TrimSpace(v)
}
