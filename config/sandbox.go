package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/hutchsandbox/hutch/internal/bearer"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
	"github.com/hutchsandbox/hutch/sandbox/remote"
	"github.com/hutchsandbox/hutch/tier"
)

// OpenSandbox opens the sandbox of s.Tier, which must name a tier (an empty
// name is an error here; New reads it as virtual), from the tier settings
// of s: Root, PolicyFile or Isolation, Image, Runtime and Container. It
// returns the notes of what the sandbox cannot enforce of what was asked,
// which the caller must show. Close the sandbox when done.
//
// Settings for another tier are refused (ErrConfig), never ignored: a
// policy that would not apply would leave the shell unconfined. Errors of
// the tier itself match sandbox.ErrConfig or sandbox.ErrUnsupported.
// OpenSandbox reads nothing of the gate, fetch or search settings.
func OpenSandbox(ctx context.Context, s Settings) (sandbox.Sandbox, []string, error) {
	if err := s.checkTier(); err != nil {
		return nil, nil, err
	}
	return openTier(ctx, s)
}

// checkTier refuses settings that apply to another tier than s.Tier.
func (s Settings) checkTier() error {
	if (s.PolicyFile != "" || s.Isolation != nil) && s.Tier != tier.Isolated && s.Tier != tier.Container {
		return fmt.Errorf("%w: a policy (policy, --policy and the policy flags) applies to the isolated or container tier, not %s", ErrConfig, s.Tier)
	}
	if (s.Image != "" || s.Runtime != "" || s.Container != nil) && s.Tier != tier.Container {
		return fmt.Errorf("%w: image, runtime and the container flags apply to the container tier, not %s", ErrConfig, s.Tier)
	}
	tlsSet := s.ServerCA != "" || s.ServerCert != "" || s.ServerKey != ""
	remoteSet := s.Server != "" || s.ServerTokenFile != "" || len(s.ServerCommand) > 0 || tlsSet || s.ServerNarrow != nil
	switch {
	case remoteSet && s.Tier != tier.Remote:
		return fmt.Errorf("%w: server, server_token_file, server_command and a session's narrowing apply to the remote tier, not %s", ErrConfig, s.Tier)
	case s.Tier != tier.Remote:
	case s.Server != "" && len(s.ServerCommand) > 0:
		return fmt.Errorf("%w: the remote tier takes --server URL or --server-command CMD, not both", ErrConfig)
	case s.Server == "" && len(s.ServerCommand) == 0:
		return fmt.Errorf("%w: the remote tier needs --server URL (with --token-file) or --server-command 'ssh HOST hutch serve --stdio'", ErrConfig)
	case (s.ServerCert == "") != (s.ServerKey == ""):
		return fmt.Errorf("%w: give --client-cert and --client-key together", ErrConfig)
	case s.Server != "" && s.ServerTokenFile == "" && s.ServerCert == "":
		return fmt.Errorf("%w: --server %s needs --token-file FILE, the server's token (or a client certificate: --client-cert, --client-key)", ErrConfig, s.Server)
	case len(s.ServerCommand) > 0 && s.ServerNarrow != nil:
		return fmt.Errorf("%w: the policy flags narrow a --server URL's session; a --server-command's hutch serve --stdio takes them on its own command line", ErrConfig)
	case len(s.ServerCommand) > 0 && (s.ServerTokenFile != "" || tlsSet):
		return fmt.Errorf("%w: --token-file and the TLS flags apply to --server URL; a --server-command authenticates itself (ssh, kubectl)", ErrConfig)
	case tlsSet && !strings.HasPrefix(s.Server, "https://"):
		return fmt.Errorf("%w: --server-ca, --client-cert and --client-key need an https:// server, not %s", ErrConfig, s.Server)
	case s.PolicyFile != "" || s.Isolation != nil || s.Root != "":
		return fmt.Errorf("%w: the remote tier's policy and root are the server's: give them to hutch serve", ErrConfig)
	}
	return nil
}

// openTier opens the sandbox of checked settings and collects its notes.
func openTier(ctx context.Context, s Settings) (sandbox.Sandbox, []string, error) {
	var notes []string
	tcfg, err := tierConfig(s)
	if err != nil {
		return nil, nil, err
	}
	tcfg.Note = func(n string) { notes = append(notes, n) }
	sb, err := tier.Open(ctx, s.Tier, tcfg)
	if err != nil {
		return nil, nil, err
	}
	return sb, notes, nil
}

// tierConfig is what tier.Open needs of s: the root, the container's
// options and the policy, each only for the tiers that use it.
func tierConfig(s Settings) (tier.Config, error) {
	tcfg := tier.Config{Root: s.Root}
	if s.Tier == tier.Remote {
		d, err := remoteDialer(s)
		if err != nil {
			return tcfg, err
		}
		tcfg.Remote = d
	}
	if s.Tier == tier.Container {
		tcfg.Container = containerOptions(s)
	}
	if s.Tier == tier.Isolated || s.Tier == tier.Container && (s.Isolation != nil || s.PolicyFile != "" || s.Root != "") {
		pol, err := isolationPolicy(s)
		if err != nil {
			return tcfg, err
		}
		tcfg.Policy = &pol
	}
	return tcfg, nil
}

// containerOptions is s.Container (or none) with Image and Runtime filled
// from s where it lacks them.
func containerOptions(s Settings) *container.Options {
	o := container.Options{}
	if s.Container != nil {
		o = *s.Container
	}
	if o.Image == "" {
		o.Image = s.Image
	}
	if o.Runtime == "" {
		o.Runtime = container.Runtime(s.Runtime)
	}
	return &o
}

// isolationPolicy is s.Isolation, or the policy file, or the default
// policy, with Root added as the writable start directory when set.
func isolationPolicy(s Settings) (policy.Policy, error) {
	pol := policy.Default()
	switch {
	case s.Isolation != nil:
		pol = *s.Isolation
	case s.PolicyFile != "":
		var err error
		if pol, err = policy.Load(s.PolicyFile); err != nil {
			return pol, err
		}
	}
	if s.Root != "" {
		pol = pol.Extend(policy.Policy{Write: []string{s.Root}, Dir: s.Root})
	}
	return pol, nil
}

// remoteDialer is how the remote tier reaches its server: the URL with the
// token read from its file, or the command.
func remoteDialer(s Settings) (remote.Dialer, error) {
	if len(s.ServerCommand) > 0 {
		return remote.Command(s.ServerCommand[0], s.ServerCommand[1:]...), nil
	}
	return remoteServer(s)
}

// remoteServer is the Server dialer of s.Server: its token read from its
// file, its TLS settings loaded.
func remoteServer(s Settings) (remote.Server, error) {
	d := remote.Server{URL: s.Server}
	if s.ServerNarrow != nil {
		d.Narrow = *s.ServerNarrow
	}
	if s.ServerTokenFile != "" {
		token, err := bearer.ReadFile(s.ServerTokenFile)
		if err != nil {
			return d, fmt.Errorf("%w: --token-file: %v", ErrConfig, err)
		}
		d.Token = token
	}
	if s.ServerCA != "" || s.ServerCert != "" {
		d.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if s.ServerCA != "" {
		pem, err := os.ReadFile(s.ServerCA)
		if err != nil {
			return d, fmt.Errorf("%w: --server-ca: %v", ErrConfig, err)
		}
		d.TLS.RootCAs = x509.NewCertPool()
		if !d.TLS.RootCAs.AppendCertsFromPEM(pem) {
			return d, fmt.Errorf("%w: --server-ca %s: no PEM certificate in it", ErrConfig, s.ServerCA)
		}
	}
	if s.ServerCert != "" {
		cert, err := tls.LoadX509KeyPair(s.ServerCert, s.ServerKey)
		if err != nil {
			return d, fmt.Errorf("%w: --client-cert/--client-key: %v", ErrConfig, err)
		}
		d.TLS.Certificates = []tls.Certificate{cert}
	}
	return d, nil
}
