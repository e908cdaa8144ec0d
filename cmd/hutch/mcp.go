package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/mcpserver"
	"github.com/hutchsandbox/hutch/tier"
)

func newMCPCmd() *cobra.Command {
	var s config.Settings
	var configFile string
	var pf policyFlags
	var cf containerFlags
	var codef codeFlags
	var rf remoteFlags
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve hutch's tools over the Model Context Protocol (stdio, or --http ADDR)",
		Long: `Serve hutch's tools (read_file, glob, write_file, edit_file, apply_patch, shell,
fetch, web_search) to an MCP client. Which tools are listed depends on the tier and the
permission mode: a tool the agent could never use is not offered.

Settings come from flags, or from a YAML file (--config) with the same keys
(tier, root, mode, allow, fetch_allow, search_url, store, decision_ttl, audit, rules, http,
http_token_file, http_no_auth, policy, image, runtime, code, sandboxes); flags
given on the command line win.

run_code runs code in a fresh sandbox per call, on the isolated tier unless
--tier container: --code-sandbox FILE is the policy every call runs in
(named "default"), each --escalate-to NAME=FILE a wider one a call may ask a
person for. These flags replace a settings file's code and sandboxes keys
wholly (its code mounts are kept).

Over --http every request needs "Authorization: Bearer TOKEN". The token is
read from --http-token-file (written there, mode 0600, when the file is
missing), or made fresh and printed on stderr.`,
		Example: `  hutch mcp --tier local --root ~/project --mode ask
  hutch mcp --tier local --root . --mode approve --store ~/.local/state/hutch/approvals.db --audit ~/.local/state/hutch/audit.jsonl
  hutch mcp --tier local --root . --rules ~/.config/hutch/rules.yaml --audit ~/.local/state/hutch/audit.jsonl
  hutch mcp --http 127.0.0.1:8765 --http-token-file ~/.hutch-token --tier local --root . --mode auto
  hutch mcp --tier container --image debian:stable-slim --root . --mode auto
  hutch mcp --tier remote --server http://127.0.0.1:7777 --token-file ~/.hutch-serve-token --mode ask
  hutch mcp --mode ask --code-sandbox project.yaml --escalate-to online=online.yaml`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			settings := s
			if configFile != "" {
				file, err := config.Load(configFile)
				if err != nil {
					return err
				}
				settings = overlay(file, s, c.Flags())
			} else if !c.Flags().Changed("tier") {
				settings.Tier = "" // virtual, or isolated for run_code
			}
			if err := codef.apply(&settings, c.Flags()); err != nil {
				return err
			}
			if settings.Code != nil && settings.Tier == "" {
				settings.Tier = tier.Isolated
			}
			if err := applyTierFlags(c.Flags(), &settings, &pf, &cf); err != nil {
				return err
			}
			if err := rf.apply(c.Flags(), &settings); err != nil {
				return err
			}
			return serveMCP(c.Context(), settings, c.InOrStdin(), c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	f := c.Flags()
	f.StringVar(&s.Tier, "tier", "virtual", "where tools act: virtual, local, isolated, container (--root is then the writable start directory) or remote (--server or --server-command)")
	f.StringVar(&s.Root, "root", "", "the sandbox root directory (required for the local tier)")
	f.StringVar(&s.Mode, "mode", "read_only", "permission mode: read_only, auto, ask, approve")
	f.StringSliceVar(&s.Allow, "allow", nil, "capabilities allowed in any mode (comma-separated: write,shell,fetch,search)")
	f.StringSliceVar(&s.FetchAllow, "fetch-allow", nil, "hosts fetch may reach (comma-separated: host[:port], *.example.com for subdomains, an IP or CIDR range; a name resolving to a private address also needs that address listed)")
	f.StringVar(&s.SearchURL, "search-url", "", "SearXNG instance for web_search (its JSON API)")
	f.StringVar(&s.Store, "store", "", "approval store file (required in approve mode)")
	f.StringVar(&s.DecisionTTL, "decision-ttl", "", "how long a person's approve or deny covers its call in approve mode (default 24h; 0: no expiry)")
	f.StringVar(&s.Audit, "audit", "", "append every permission decision to this file as JSON lines")
	f.StringVar(&s.Rules, "rules", "", "permission rules file (allow, ask and deny rules applied before the mode; see hutch rules --help)")
	f.StringVar(&s.HTTP, "http", "", "serve the streamable HTTP transport on ADDR (host:port; a bare :port binds 127.0.0.1) instead of stdio")
	f.StringVar(&s.HTTPTokenFile, "http-token-file", "", "with --http: the bearer token clients must send (a missing file gets a new token, mode 0600); default: a fresh token printed on stderr")
	f.BoolVar(&s.HTTPNoAuth, "http-no-auth", false, "with --http: accept requests without a token (anyone who can reach the address can use every tool)")
	f.StringVar(&configFile, "config", "", "read settings from this YAML file")
	pf.register(f)
	cf.register(f)
	codef.register(f)
	rf.register(f)
	return c
}

// overlay returns file settings with every flag the user set on top.
func overlay(file, flags config.Settings, set *pflag.FlagSet) config.Settings {
	pick := func(name string, dst *string, v string) {
		if set.Changed(name) {
			*dst = v
		}
	}
	pick("tier", &file.Tier, flags.Tier)
	pick("root", &file.Root, flags.Root)
	pick("mode", &file.Mode, flags.Mode)
	pick("search-url", &file.SearchURL, flags.SearchURL)
	pick("store", &file.Store, flags.Store)
	pick("decision-ttl", &file.DecisionTTL, flags.DecisionTTL)
	pick("audit", &file.Audit, flags.Audit)
	pick("rules", &file.Rules, flags.Rules)
	pick("http", &file.HTTP, flags.HTTP)
	pick("http-token-file", &file.HTTPTokenFile, flags.HTTPTokenFile)
	if set.Changed("http-no-auth") {
		file.HTTPNoAuth = flags.HTTPNoAuth
	}
	if set.Changed("allow") {
		file.Allow = flags.Allow
	}
	if set.Changed("fetch-allow") {
		file.FetchAllow = flags.FetchAllow
	}
	return file
}

func serveMCP(ctx context.Context, s config.Settings, in io.Reader, out, logw io.Writer) error {
	// The server keeps little live memory but the SDK makes garbage on
	// every message (tens of KiB of decode buffers): collecting at 4x the
	// live heap instead of 2x halves GC work for a few MiB. GOGC wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	token, tokenNote, err := mcpserver.HTTPToken(mcpserver.HTTPAuth{Addr: s.HTTP, TokenFile: s.HTTPTokenFile, NoAuth: s.HTTPNoAuth})
	if err != nil {
		return err
	}
	s.Asker = mcpserver.Asker
	b, err := config.New(ctx, s)
	if err != nil {
		return err
	}
	err = serveOpen(ctx, b, s.HTTP, token, tokenNote, in, out, logw)
	_ = b.Close()
	// SIGINT or SIGTERM is a clean stop, said on one line once the calls
	// running have ended (their commands killed) and the sandbox is closed.
	var stop stopSignal
	if errors.As(context.Cause(ctx), &stop) {
		fmt.Fprintf(logw, "hutch: mcp: %v\n", stop)
		return nil
	}
	return err
}

// serveOpen serves what b built on in and out (the process's own standard
// streams through StdioTransport, and its poller), or on HTTP at addr,
// until the client goes away (stdio) or ctx ends.
func serveOpen(ctx context.Context, b *config.Built, addr, token, tokenNote string, in io.Reader, out, logw io.Writer) error {
	for _, n := range b.Notes {
		fmt.Fprintln(logw, "hutch: note: "+n)
	}
	if tokenNote != "" { // for the operator only, never in the tools' notes
		fmt.Fprintln(logw, "hutch: note: "+tokenNote)
	}
	cfg := mcpserver.Config{Tools: b.Tools, StorePath: b.StorePath, Version: version()}
	if addr == "" {
		// GOMAXPROCS is left as the runtime sets it: clients send calls
		// in parallel (four globs at once, a read during a glob), and one
		// scheduler thread made them take turns.
		if in == io.Reader(os.Stdin) && out == io.Writer(os.Stdout) {
			return mcpserver.ServeStdio(ctx, cfg)
		}
		// Other streams (a test's): never the process's own, which
		// StdioTransport would make non-blocking under the rest of it.
		return mcpserver.Serve(ctx, cfg, &mcpserver.LineTransport{In: in, Out: out})
	}
	return mcpserver.ServeHTTP(ctx, cfg, addr, token, logw)
}

// applyTierFlags puts the container and policy flags the user gave into
// settings (for the remote tier the policy flags are the session's
// narrowing), refusing them for a tier they do not apply to.
func applyTierFlags(fl *pflag.FlagSet, settings *config.Settings, pf *policyFlags, cf *containerFlags) error {
	if containerFlagsSet(fl) {
		if settings.Tier != tier.Container {
			return fmt.Errorf("--image and the other container flags apply to --tier container")
		}
		o, err := cf.options()
		if err != nil {
			return err
		}
		settings.Container = &o
	}
	if settings.Tier == tier.Remote {
		return narrow(fl, pf, settings)
	}
	if policyFlagsSet(fl) {
		if settings.Tier != tier.Isolated && settings.Tier != tier.Container {
			return fmt.Errorf("--read, --write, --deny, --network, --policy and the limit flags apply to --tier isolated or container (or narrow --tier remote)")
		}
		if pf.file == "" {
			pf.file = settings.PolicyFile
		}
		pol, err := pf.build(fl, "", 0)
		if err != nil {
			return err
		}
		settings.Isolation = &pol
	}
	return nil
}
