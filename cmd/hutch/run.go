package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/permission/rules"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/tier"
)

type runFlags struct {
	tier    string
	root    string
	dir     string
	timeout time.Duration
	env     []string
	shell   string
	json    bool
	rules   string

	pol policyFlags    // isolated tier (and container, mapped)
	ctr containerFlags // container tier
	rem remoteFlags    // remote tier
}

func newRunCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run [flags] -- CMD [ARG...]",
		Short: "Run a command in a sandbox",
		Long: fmt.Sprintf(`Run a command in a sandbox and exit with its status.

The default tier is isolated: the command runs under a policy enforced by
the kernel (namespaces, Landlock, seccomp, no capabilities, limits). The
default policy reads the system's programs and libraries, writes nothing,
has no network and a private /tmp, has at most %d processes and threads
and half the host's memory (at most 8 GiB; %v here), and stops after 120
seconds; --read, --write, --deny, --network and the limit flags widen or
bound it (--pids unlimited and --memory unlimited lift those two limits),
and --policy FILE starts from a YAML policy instead.

Exit status: the command's own; 124 when it timed out; 125 when hutch could
not run it; 126 not executable; 127 not found; 128+N when killed by signal N.`, policy.DefaultProcesses, policy.DefaultMemory()),
		Example: `  hutch run -- uname -a
  hutch run --write . --memory 512M --cpu-time 30s -- make test
  hutch run --tier container --image debian:stable-slim --write . -- make test
  hutch run --tier local -- ls -la
  hutch run --tier remote --server http://127.0.0.1:7777 --token-file ~/.hutch-serve-token -- make test
  hutch run --tier remote --server-command 'ssh box hutch serve --stdio --write /srv/work' -- make test
  hutch run --tier local --timeout 5s -c 'make test | tail -n 20'
  hutch run --tier local --json --env GREETING=hi -- sh -c 'echo $GREETING'
  hutch run --tier local --rules rules.yaml -c 'npm test'`,
		RunE: func(c *cobra.Command, args []string) error { return runRun(c, f, args) },
	}
	fl := c.Flags()
	fl.SetInterspersed(false) // flags after CMD belong to CMD
	fl.StringVar(&f.tier, "tier", tier.Isolated, "where the command runs: isolated, container, local, virtual, remote")
	fl.StringVar(&f.root, "root", ".", "the sandbox root directory (local tier)")
	fl.StringVar(&f.dir, "dir", "", "where the command starts (local: inside the root; isolated: a readable path; default: the root, or the first --write path, or /tmp)")
	f.pol.register(fl)
	f.ctr.register(fl)
	f.rem.register(fl)
	fl.DurationVar(&f.timeout, "timeout", sandbox.DefaultTimeout, "stop the command and everything it started after this long")
	fl.StringArrayVar(&f.env, "env", nil, "add NAME=VALUE to the command's environment (repeatable)")
	fl.StringVarP(&f.shell, "shell", "c", "", "run this command line with /bin/sh -c instead of CMD ARG...")
	fl.BoolVar(&f.json, "json", false, "print one JSON object with the result instead of streaming output")
	fl.StringVar(&f.rules, "rules", "", "permission rules file: refuse the command when a shell rule denies it or asks about it (nobody can be asked here)")
	return c
}

func runRun(c *cobra.Command, f runFlags, args []string) error {
	cmd, err := buildCommand(f, args)
	if err != nil {
		return err
	}
	if err := checkRules(f.rules, cmd); err != nil {
		return err
	}
	cmd.Stdin = c.InOrStdin()
	if !f.json {
		cmd.Stdout, cmd.Stderr = c.OutOrStdout(), c.ErrOrStderr()
	}
	if f.tier != tier.Container && containerFlagsSet(c.Flags()) {
		return fmt.Errorf("--image and the other container flags apply to --tier container, not %s", f.tier)
	}
	if (f.tier == tier.Isolated || f.tier == tier.Container) && c.Flags().Changed("root") {
		return fmt.Errorf("--root applies to --tier local or virtual; in the %s tier give --write DIR --dir DIR", f.tier)
	}
	var res sandbox.Result
	switch f.tier {
	case tier.Isolated:
		res, err = runIsolated(c, f, cmd)
	case tier.Container:
		res, err = runContainer(c, f, cmd)
	default:
		res, err = runOpened(c, f, cmd)
	}
	if err != nil {
		return err
	}
	return report(c, f, res)
}

// runIsolated runs cmd once under the policy of the flags (its timeout
// the policy's unless --timeout is given).
func runIsolated(c *cobra.Command, f runFlags, cmd sandbox.Command) (sandbox.Result, error) {
	timeout := time.Duration(0)
	if c.Flags().Changed("timeout") {
		timeout = f.timeout
	}
	pol, err := f.pol.build(c.Flags(), f.dir, timeout)
	if err != nil {
		return sandbox.Result{}, err
	}
	if !c.Flags().Changed("timeout") {
		cmd.Timeout = 0 // the policy's
	}
	return isolated.Run(c.Context(), pol, cmd)
}

// runOpened runs cmd in a sandbox of the local or virtual tier (or says
// why the tier named cannot be opened).
func runOpened(c *cobra.Command, f runFlags, cmd sandbox.Command) (sandbox.Result, error) {
	if policyFlagsSet(c.Flags()) && f.tier != tier.Remote {
		return sandbox.Result{}, fmt.Errorf("--read, --write, --deny, --network, --policy and the limit flags apply to the isolated tier (or narrow a remote one), not %s", f.tier)
	}
	s := config.Settings{Tier: f.tier, Root: f.root}
	if err := f.rem.apply(c.Flags(), &s); err != nil {
		return sandbox.Result{}, err
	}
	if err := narrow(c.Flags(), &f.pol, &s); err != nil {
		return sandbox.Result{}, err
	}
	return execIn(c, s, cmd)
}

// report prints res as --json asks, or says on stderr why the command
// was stopped, and returns the command's exit status.
func report(c *cobra.Command, f runFlags, res sandbox.Result) error {
	if f.json {
		if err := json.NewEncoder(c.OutOrStdout()).Encode(res); err != nil {
			return err
		}
	} else if res.TimedOut {
		fmt.Fprintln(c.ErrOrStderr(), "hutch: timed out; every process it started was killed")
	} else if res.Limit != "" {
		fmt.Fprintf(c.ErrOrStderr(), "hutch: stopped by the %s limit\n", strings.ReplaceAll(res.Limit, "_", " "))
	}
	if st := res.Status(); st != 0 {
		return exitError{st}
	}
	return nil
}

// runContainer runs cmd once in a fresh container (removed afterwards
// unless --reconnect), with the policy flags mapped onto it when given.
func runContainer(c *cobra.Command, f runFlags, cmd sandbox.Command) (sandbox.Result, error) {
	opts, err := f.ctr.options()
	if err != nil {
		return sandbox.Result{}, err
	}
	s := config.Settings{Tier: tier.Container, Container: &opts}
	if policyFlagsSet(c.Flags()) {
		pol, err := f.pol.build(c.Flags(), f.dir, 0)
		if err != nil {
			return sandbox.Result{}, err
		}
		s.Isolation = &pol
	}
	return execIn(c, s, cmd)
}

// execIn runs cmd once in a sandbox opened from s, closed afterwards, and
// shows on stderr the notes of what the sandbox cannot enforce.
func execIn(c *cobra.Command, s config.Settings, cmd sandbox.Command) (sandbox.Result, error) {
	sb, notes, err := config.OpenSandbox(c.Context(), s)
	for _, n := range notes {
		fmt.Fprintln(c.ErrOrStderr(), "hutch: note: "+n)
	}
	if err != nil {
		return sandbox.Result{}, err
	}
	defer sb.Close()
	return sb.Exec(c.Context(), cmd)
}

// checkRules refuses cmd when the rules file at path denies it or asks
// about it ("" checks nothing).
func checkRules(path string, cmd sandbox.Command) error {
	if path == "" {
		return nil
	}
	set, err := rules.Load(path)
	if err != nil {
		return err
	}
	line := cmd.Shell
	if line == "" {
		line = rules.QuoteArgs(cmd.Args)
	}
	return set.CheckCommand(line)
}

func buildCommand(f runFlags, args []string) (sandbox.Command, error) {
	switch {
	case f.shell != "" && len(args) > 0:
		return sandbox.Command{}, fmt.Errorf("give either -c 'command line' or -- CMD [ARG...], not both")
	case f.shell == "" && len(args) == 0:
		return sandbox.Command{}, fmt.Errorf("no command: write hutch run [flags] -- CMD [ARG...] or hutch run -c 'command line'")
	case f.timeout <= 0:
		return sandbox.Command{}, fmt.Errorf("--timeout must be positive, got %v", f.timeout)
	}
	env, err := sandbox.ParseEnv(f.env)
	if err != nil {
		return sandbox.Command{}, err
	}
	cmd := sandbox.Command{Args: args, Shell: f.shell, Dir: f.dir, Env: env, Timeout: f.timeout}
	return cmd.Validate()
}
