package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/internal/bearer"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/server"
	"github.com/hutchsandbox/hutch/tier"
)

type serveFlags struct {
	stdio                  bool
	listen                 string
	tokenFile              string
	tlsCert, tlsKey, tlsCA string
	insecure               bool
	maxSessions            int
	idle                   time.Duration
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	var s config.Settings
	var pf policyFlags
	var cf containerFlags
	c := &cobra.Command{
		Use:   "serve (--stdio | --listen ADDR) [flags]",
		Short: "Serve a sandbox to hutch on another machine (the remote tier)",
		Long: `Serve a sandbox of this machine to a hutch elsewhere, whose remote tier then
acts here: files and commands are the served tier's own, guarded here.

--stdio serves one session on standard input and output, for a program that
carries them (ssh HOST hutch serve --stdio, kubectl exec -i POD -- hutch serve
--stdio, docker exec -i). --listen ADDR serves sessions over the network:
every request needs "Authorization: Bearer TOKEN" with the token in
--token-file (written there, mode 0600, when missing), or a client
certificate (--tls-client-ca). ADDR is loopback unless --tls-cert/--tls-key
are given or --insecure says clear text is meant. A client may narrow the
policy (fewer paths, no network, lower limits), never widen it.

The default tier is isolated under the default policy, widened by the policy
flags; --tier local or container serves those.`,
		Example: `  hutch serve --stdio --write /srv/work
  ssh box hutch serve --stdio --write /srv/work        # from the client, via --server-command
  hutch serve --listen 127.0.0.1:7777 --token-file ~/.hutch-serve-token --write /srv/work
  hutch serve --listen 0.0.0.0:7777 --tls-cert cert.pem --tls-key key.pem --token-file t --write /srv/work`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !c.Flags().Changed("tier") {
				s.Tier = tier.Isolated
			}
			if err := applyTierFlags(c.Flags(), &s, &pf, &cf); err != nil {
				return err
			}
			return runServe(c.Context(), f, s, c.InOrStdin(), c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	fl := c.Flags()
	fl.BoolVar(&f.stdio, "stdio", false, "serve one session on standard input and output")
	fl.StringVar(&f.listen, "listen", "", "serve sessions on ADDR (host:port; a bare :port binds 127.0.0.1)")
	fl.StringVar(&f.tokenFile, "token-file", "", "with --listen: the bearer token clients must send (a missing file gets a new token, mode 0600)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "with --listen: serve TLS with this certificate (PEM)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "with --listen: the certificate's key (PEM)")
	fl.StringVar(&f.tlsCA, "tls-client-ca", "", "with --listen and TLS: require client certificates signed by these CAs (PEM); the token is then optional")
	fl.BoolVar(&f.insecure, "insecure", false, "with --listen: allow clear text on an address other machines can reach")
	fl.IntVar(&f.maxSessions, "max-sessions", server.DefaultMaxSessions, "with --listen: at most N sessions at once")
	fl.DurationVar(&f.idle, "idle-timeout", server.DefaultIdleTimeout, "with --listen: close a session that has had no connection this long")
	fl.StringVar(&s.Tier, "tier", tier.Isolated, "what to serve: isolated, local, container or virtual")
	fl.StringVar(&s.Root, "root", "", "the sandbox root (local: required; isolated, container: the writable start directory)")
	pf.register(fl)
	cf.register(fl)
	return c
}

func runServe(ctx context.Context, f serveFlags, s config.Settings, in io.Reader, out, logw io.Writer) error {
	note := func(m string) { fmt.Fprintln(logw, "hutch: serve: note: "+m) }
	switch {
	case f.stdio == (f.listen != ""):
		return errors.New("give --stdio or --listen ADDR (one of them)")
	case f.stdio && (f.tokenFile != "" || f.tlsCert != "" || f.tlsKey != "" || f.tlsCA != "" || f.insecure):
		return errors.New("--token-file, --tls-* and --insecure apply to --listen; over --stdio the program that carries the stream (ssh, kubectl) authenticates")
	}
	open, err := config.ServeOpener(s, note)
	if err != nil {
		return err
	}
	if f.stdio {
		sb, served, err := open(ctx, policy.Narrowing{})
		if err != nil {
			return err
		}
		defer sb.Close()
		return server.ServeStream(ctx, in, out, sb, served)
	}
	cfg := server.Config{Open: open, MaxSessions: f.maxSessions, IdleTimeout: f.idle, Log: logw}
	if cfg.TLS, err = serveTLS(f); err != nil {
		return err
	}
	if f.tokenFile == "" && (cfg.TLS == nil || cfg.TLS.ClientAuth != tls.RequireAndVerifyClientCert) {
		return errors.New("--listen needs --token-file FILE (or TLS with --tls-client-ca)")
	}
	// The address first: a refused one writes no token.
	ln, err := server.ListenAddr(f.listen, cfg, f.insecure)
	if err != nil {
		return err
	}
	defer ln.Close()
	if f.tokenFile != "" {
		token, created, err := bearer.Load(f.tokenFile)
		if err != nil {
			return err
		}
		cfg.Token = token
		if created {
			note("wrote a new token to " + f.tokenFile + " (mode 0600); give the client that file (--token-file)")
		}
	}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	fmt.Fprintf(logw, "hutch: serve: %s tier on %s://%s/ (at most %d sessions)\n", s.Tier, scheme, ln.Addr(), cfg.MaxSessions)
	return server.Serve(ctx, ln, cfg)
}

// serveTLS is the TLS configuration the flags ask for, or nil.
func serveTLS(f serveFlags) (*tls.Config, error) {
	if f.tlsCert == "" && f.tlsKey == "" {
		if f.tlsCA != "" {
			return nil, errors.New("--tls-client-ca needs --tls-cert and --tls-key")
		}
		return nil, nil
	}
	if f.tlsCert == "" || f.tlsKey == "" {
		return nil, errors.New("give --tls-cert and --tls-key together")
	}
	cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate in it", f.tlsCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
