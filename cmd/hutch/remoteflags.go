package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/tier"
)

// remoteFlags reach the remote tier's server, shared by run, mcp and
// check.
type remoteFlags struct {
	server, tokenFile, command string
	ca, cert, key              string
}

var remoteFlagNames = []string{"server", "token-file", "server-command", "server-ca", "client-cert", "client-key"}

func (r *remoteFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&r.server, "server", "", "remote: the URL of hutch serve --listen (http://HOST:PORT or https://HOST:PORT)")
	fl.StringVar(&r.tokenFile, "token-file", "", "remote: the file holding that server's bearer token (mode 0600)")
	fl.StringVar(&r.ca, "server-ca", "", "remote: PEM file of the CAs an https server's certificate must chain to (default: the system's)")
	fl.StringVar(&r.cert, "client-cert", "", "remote: client certificate (PEM) for a server that asks for one (hutch serve --tls-client-ca)")
	fl.StringVar(&r.key, "client-key", "", "remote: the client certificate's key (PEM)")
	fl.StringVar(&r.command, "server-command", "", "remote: a program and its arguments, separated by spaces (no quoting), whose stdin and stdout reach hutch serve --stdio, e.g. 'ssh box hutch serve --stdio'")
}

// apply puts the flags the user gave into s (the remote tier only; its
// root is the server's, so --root is dropped unless given).
func (r *remoteFlags) apply(fl *pflag.FlagSet, s *config.Settings) error {
	set := slices.ContainsFunc(remoteFlagNames, fl.Changed)
	if s.Tier != tier.Remote {
		if set {
			return fmt.Errorf("--server, --token-file, --server-command and the client TLS flags apply to --tier remote, not %s", s.Tier)
		}
		return nil
	}
	if !fl.Changed("root") {
		s.Root = ""
	}
	if fl.Changed("server") {
		s.Server = r.server
	}
	if fl.Changed("token-file") {
		s.ServerTokenFile = r.tokenFile
	}
	for _, f := range []struct {
		name string
		dst  *string
		v    string
	}{{"server-ca", &s.ServerCA, r.ca}, {"client-cert", &s.ServerCert, r.cert}, {"client-key", &s.ServerKey, r.key}} {
		if fl.Changed(f.name) {
			*f.dst = f.v
		}
	}
	if fl.Changed("server-command") {
		s.ServerCommand = strings.Fields(r.command)
		if len(s.ServerCommand) == 0 {
			return fmt.Errorf("--server-command is empty: give the program that reaches hutch serve --stdio")
		}
	}
	return nil
}

// narrow puts the policy flags, when given, into s as the remote
// session's narrowing of the server's policy (see policyFlags.narrowing).
func narrow(fl *pflag.FlagSet, pf *policyFlags, s *config.Settings) error {
	if s.Tier != tier.Remote || !policyFlagsSet(fl) {
		return nil
	}
	n, err := pf.narrowing(fl)
	if err != nil {
		return err
	}
	s.ServerNarrow = &n
	return nil
}
