package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/permission/rules"
	"github.com/hutchsandbox/hutch/permission/rules/ruleimport"
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
                                      fetch (a URL or host[:port]), search, or tool (a name)
  hutch rules import --from SOURCE FILE... [-o OUT] [--policy-out FILE]
                                      turn Codex, Claude Code, sandbox-runtime or Gemini CLI
                                      rules into a rules file (and a policy file)`,
	}
	c.AddCommand(newRulesImportCmd())
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

// newRulesImportCmd is hutch rules import: package ruleimport does the
// work; this wires its flags.
func newRulesImportCmd() *cobra.Command {
	var from, out, policyOut, root string
	var force, fullAccess bool
	c := &cobra.Command{
		Use:   "import --from codex|claude|srt|gemini FILE...",
		Short: "Turn another tool's permission rules into a hutch rules file (and policy file)",
		Long: `Reads FILE... in the format of --from and writes hutch's rules file to -o OUT
(standard output without -o) and, where the files say something about the
sandbox, a policy file to --policy-out FILE. Standard error says what mapped,
one line for each item that did not (or maps with another meaning, with its
file:line), the mode the files suggest, and a summary. docs/permissions.md
("Importing rules") lists what maps, source by source.

  codex   .rules files (Starlark prefix_rule, network_rule) and config.toml
          (sandbox_mode, [sandbox_workspace_write], approval_policy)
  claude  settings files; the scope is told by the path: managed-settings.json,
          .claude/settings.local.json, .claude/settings.json (~/.claude/ is the
          user's), any other name as claude --settings FILE
  srt     sandbox-runtime settings (a policy only: give --policy-out)
  gemini  policy .toml files ([[rule]])`,
		Example: "  hutch rules import --from claude .claude/settings.json .claude/settings.local.json -o rules.yaml\n" +
			"  hutch rules import --from codex ~/.codex/rules/default.rules ~/.codex/config.toml -o rules.yaml --policy-out policy.yaml\n" +
			"  hutch rules import --from srt ~/.srt-settings.json --policy-out policy.yaml",
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			src := ruleimport.Source(from)
			switch {
			case from == "":
				return errors.New("rules import: --from is required: codex, claude, srt or gemini")
			case src == ruleimport.SRT && policyOut == "":
				return errors.New("rules import: sandbox-runtime settings describe a sandbox, not rules: give --policy-out FILE")
			}
			// Refuse an existing output before anything is written.
			for _, o := range []string{out, policyOut} {
				if o == "" || force {
					continue
				}
				if _, err := os.Lstat(o); err == nil {
					return fmt.Errorf("rules import: %s exists: pass --force to replace it, or name another file", o)
				}
			}
			res, err := ruleimport.Import(src, args, ruleimport.Options{Root: root, FullAccess: fullAccess, Force: force})
			if res != nil {
				res.Print(c.ErrOrStderr())
			}
			if err != nil {
				return err
			}
			if out != "" {
				if err := ruleimport.WriteRules(out, res.Rules, force); err != nil {
					return err
				}
			} else if src != ruleimport.SRT || len(res.Rules) > 0 {
				data, err := rules.Marshal(res.Rules)
				if err != nil {
					return err
				}
				c.OutOrStdout().Write(data)
			}
			switch {
			case res.Policy != nil && policyOut != "":
				return ruleimport.WritePolicy(policyOut, *res.Policy, force)
			case res.Policy != nil:
				fmt.Fprintln(c.ErrOrStderr(), "policy: the files describe the sandbox too; give --policy-out FILE to write it as a hutch policy")
			case policyOut != "":
				fmt.Fprintf(c.ErrOrStderr(), "policy: the files say nothing about the sandbox; %s not written\n", policyOut)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&from, "from", "", "the format of FILE...: codex, claude, srt or gemini")
	f.StringVarP(&out, "output", "o", "", "write the rules file here (default: standard output)")
	f.StringVar(&policyOut, "policy-out", "", "write the sandbox policy the files imply here")
	f.StringVar(&root, "root", "", "the sandbox root path rules are relative to (default: the current directory; for claude, the project of a project settings file)")
	f.BoolVar(&force, "force", false, "replace existing outputs, and import Codex rules whose examples fail")
	f.BoolVar(&fullAccess, "full-access", false, "map Codex's sandbox_mode danger-full-access to hutch's widest policy instead of refusing it")
	return c
}
