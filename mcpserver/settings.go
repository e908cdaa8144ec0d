package mcpserver

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
	"github.com/hutchsandbox/hutch/tier"
	"github.com/hutchsandbox/hutch/tool"
)

// Settings are the knobs of "hutch mcp", from flags or a YAML file with the
// same keys.
type Settings struct {
	Tier       string   `yaml:"tier"`
	Root       string   `yaml:"root"`
	Mode       string   `yaml:"mode"`
	Allow      []string `yaml:"allow"`
	FetchAllow []string `yaml:"fetch_allow"`
	SearchURL  string   `yaml:"search_url"`
	Store      string   `yaml:"store"`
	// DecisionTTL is how long a person's decision covers its call
	// ("24h", the default when empty; "0": no expiry).
	DecisionTTL string `yaml:"decision_ttl"`
	Audit       string `yaml:"audit"`
	HTTP        string `yaml:"http"`
	// HTTPTokenFile holds the bearer token HTTP clients must send (a new
	// one is written there when the file is missing); see HTTPToken.
	HTTPTokenFile string `yaml:"http_token_file"`
	// HTTPNoAuth serves HTTP without a token: an explicit opt-out.
	HTTPNoAuth bool `yaml:"http_no_auth"`
	// PolicyFile is the isolated tier's YAML policy (default: the default
	// policy); Root, when set, is added to it as the writable start
	// directory.
	PolicyFile string `yaml:"policy"`
	// Isolation, when set (from command-line flags), is the isolated
	// tier's policy, before Root is added; for the container tier it is
	// mapped onto the container (its paths become binds).
	Isolation *policy.Policy `yaml:"-"`
	// Image and Runtime choose the container tier's image (required) and
	// runtime (docker, podman or apple).
	Image   string `yaml:"image"`
	Runtime string `yaml:"runtime"`
	// Container, when set (from command-line flags), holds every container
	// option; Image and Runtime above fill it when it lacks them.
	Container *container.Options `yaml:"-"`
}

// LoadSettings reads a YAML settings file strictly: unknown keys and
// trailing documents are errors matching sandbox.ErrConfig.
func LoadSettings(path string) (Settings, error) {
	var s Settings
	if err := policy.DecodeYAMLFile(path, &s); err != nil {
		return s, fmt.Errorf("%w: config %v", sandbox.ErrConfig, err)
	}
	return s, nil
}

// Open builds the server's Config from settings: the sandbox, the gate (in
// ask mode its Asker is Asker), the approval store, the audit log, fetch
// and search. close releases what was opened; call it when the server
// stops. Errors match sandbox.ErrConfig or sandbox.ErrUnsupported.
func Open(ctx context.Context, s Settings) (cfg Config, close func(), err error) {
	var closers []func() error
	close = func() {
		for _, c := range closers {
			_ = c()
		}
	}
	defer func() {
		if err != nil {
			close()
		}
	}()
	if s.Tier == "" {
		s.Tier = tier.Virtual
	}
	// Settings for another tier are refused, never ignored (a policy file
	// that would not apply would leave the shell unconfined).
	if (s.PolicyFile != "" || s.Isolation != nil) && s.Tier != tier.Isolated && s.Tier != tier.Container {
		return cfg, close, fmt.Errorf("%w: a policy (policy, --policy and the policy flags) applies to the isolated or container tier, not %s", sandbox.ErrConfig, s.Tier)
	}
	if (s.Image != "" || s.Runtime != "" || s.Container != nil) && s.Tier != tier.Container {
		return cfg, close, fmt.Errorf("%w: image, runtime and the container flags apply to the container tier, not %s", sandbox.ErrConfig, s.Tier)
	}
	if s.Tier == tier.Local {
		// The MCP client picks the server's working directory (often "/"),
		// so the local tier's root must be named, and never be "/".
		if s.Root == "" {
			return cfg, close, fmt.Errorf("%w: the local tier needs --root DIR (the directory file tools are guarded to)", sandbox.ErrConfig)
		}
		if abs, err := filepath.Abs(s.Root); err == nil && abs == "/" {
			return cfg, close, fmt.Errorf("%w: refusing --root /: it would guard file tools to the whole filesystem; name the workspace directory", sandbox.ErrConfig)
		}
	}
	mode, err := permission.ParseMode(s.Mode)
	if err != nil {
		return cfg, close, err
	}
	allow, err := permission.ParseCapabilities(strings.Join(s.Allow, ","))
	if err != nil {
		return cfg, close, err
	}
	gcfg := permission.Config{Mode: mode, Allow: allow}
	if mode == permission.Ask {
		gcfg.Asker = Asker
	}
	if s.Store != "" {
		// Absolute, so the approving command the server prints works from
		// any directory, not only from the one the MCP client started it in.
		if s.Store, err = filepath.Abs(s.Store); err != nil {
			return cfg, close, fmt.Errorf("%w: store: %v", sandbox.ErrConfig, err)
		}
		if gcfg.Store, err = permission.OpenStore(s.Store); err != nil {
			return cfg, close, err
		}
		cfg.StorePath = s.Store
	}
	if s.DecisionTTL != "" {
		if gcfg.Store == nil {
			return cfg, close, fmt.Errorf("%w: decision_ttl applies to an approval store (--store FILE)", sandbox.ErrConfig)
		}
		d, err := time.ParseDuration(s.DecisionTTL)
		if err != nil {
			return cfg, close, fmt.Errorf("%w: decision TTL %q is not a duration (write 24h, 30m, or 0 for no expiry)", sandbox.ErrConfig, s.DecisionTTL)
		}
		if err := gcfg.Store.SetDecisionTTL(d); err != nil {
			return cfg, close, err
		}
	}
	if s.Audit != "" {
		if gcfg.Audit, err = permission.OpenAudit(s.Audit); err != nil {
			return cfg, close, fmt.Errorf("%w: %v", sandbox.ErrConfig, err)
		}
		closers = append(closers, gcfg.Audit.Close)
	}
	gate, err := permission.New(gcfg)
	if err != nil {
		return cfg, close, err
	}
	tcfg := tier.Config{Root: s.Root, Note: func(n string) { cfg.Notes = append(cfg.Notes, n) }}
	if s.Tier == tier.Container {
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
		tcfg.Container = &o
	}
	if s.Tier == tier.Isolated || s.Tier == tier.Container && (s.Isolation != nil || s.PolicyFile != "" || s.Root != "") {
		pol := policy.Default()
		switch {
		case s.Isolation != nil:
			pol = *s.Isolation
		case s.PolicyFile != "":
			if pol, err = policy.Load(s.PolicyFile); err != nil {
				return cfg, close, err
			}
		}
		if s.Root != "" {
			pol = pol.Extend(policy.Policy{Write: []string{s.Root}, Dir: s.Root})
		}
		tcfg.Policy = &pol
	}
	sb, err := tier.Open(ctx, s.Tier, tcfg)
	if err != nil {
		return cfg, close, err
	}
	closers = append(closers, sb.Close)
	cfg.Tools = tool.Options{Sandbox: sb, Gate: gate}
	if len(s.FetchAllow) > 0 {
		if cfg.Tools.Fetcher, err = tool.NewFetcher(tool.FetchPolicy{Allow: s.FetchAllow}); err != nil {
			return cfg, close, err
		}
	}
	if s.SearchURL != "" {
		if u, perr := url.Parse(s.SearchURL); perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cfg, close, fmt.Errorf("%w: search URL %q: want http(s)://host[:port][/path] of a SearXNG instance", sandbox.ErrConfig, s.SearchURL)
		}
		cfg.Tools.Search = tool.SearXNG{BaseURL: s.SearchURL}
	}
	return cfg, close, nil
}
