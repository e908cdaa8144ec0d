// Package config builds what a front end of hutch needs — the sandbox of a
// tier, the permission gate with its approval store and audit log, the
// fetcher and the search backend — from [Settings], which come from flags
// or a YAML file ([Load]). The CLI ("hutch run", "hutch mcp") and the MCP
// server's front end use it, so that each of them only wires flags to it
// and serves what it built.
//
// [New] builds everything a tool front end serves and returns it as a
// [Built], whose Close releases what was opened; [OpenSandbox] opens the
// sandbox alone, for a front end that runs commands without tools.
// Problems with the settings themselves are errors matching [ErrConfig];
// the packages it calls report theirs with their own sentinels
// ([permission.ErrConfig], [policy.ErrConfig], [tool.ErrConfig],
// [sandbox.ErrConfig]), and every one of them matches [cfgerr.ErrAny], so
// a front end tells a usage error from a failure with one test.
//
// The package builds; it does not serve. The MCP server (package
// mcpserver) serves a [Built]'s Tools, and passes its own asker for ask
// mode in [Settings].Asker.
package config

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/hutchsandbox/hutch/internal/cfgerr"
	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox/container"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/tier"
	"github.com/hutchsandbox/hutch/tool"
)

// ErrConfig is matched by every error about the settings themselves (a
// setting for another tier, a missing root, a malformed duration or URL, a
// settings file that does not parse). It matches cfgerr.ErrAny too.
var ErrConfig = cfgerr.New("invalid settings")

// Settings are the knobs of a front end ("hutch mcp", "hutch run"), from
// flags or a YAML file with the same keys. The zero value is the virtual
// tier in read_only mode with no store, no audit log, no fetch and no
// search.
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
	// Rules is a rules file (package permission/rules): allow, ask and
	// deny rules the gate applies before its mode. A file that cannot be
	// loaded is an error matching permission.ErrConfig (a relative path
	// is relative to the current directory, as store and audit are).
	Rules string `yaml:"rules"`
	// HTTP, HTTPTokenFile and HTTPNoAuth are the MCP server's transport
	// settings (the address to serve, the bearer token's file, an explicit
	// opt-out of authentication). New does not read them; the server's
	// front end passes them to the server.
	HTTP          string `yaml:"http"`
	HTTPTokenFile string `yaml:"http_token_file"`
	HTTPNoAuth    bool   `yaml:"http_no_auth"`
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
	// Server or ServerCommand reach the remote tier's `hutch serve`:
	// Server a --listen URL (http://HOST:PORT, https://HOST:PORT) with
	// the bearer token in ServerTokenFile; ServerCommand a program and
	// its arguments whose stdin and stdout reach `hutch serve --stdio`
	// (ssh, kubectl exec -i, docker exec -i). Exactly one, for the
	// remote tier only.
	Server          string   `yaml:"server"`
	ServerTokenFile string   `yaml:"server_token_file"`
	ServerCommand   []string `yaml:"server_command"`
	// ServerCA is the PEM file of the CAs an https Server's certificate
	// must chain to (default: the system's); ServerCert and ServerKey a
	// client certificate for a server that asks for one (mutual TLS; the
	// token is then optional).
	ServerCA   string `yaml:"server_ca"`
	ServerCert string `yaml:"server_cert"`
	ServerKey  string `yaml:"server_key"`
	// ServerNarrow, when set (from the policy flags), is what a Server
	// session asks of the server's policy: never more (the server
	// refuses a widening, naming it). A ServerCommand's server takes its
	// policy on its own command line.
	ServerNarrow *policy.Narrowing `yaml:"-"`
	// Asker decides privileged actions in ask mode (the MCP server passes
	// its own, which asks the person through the client); it is not used
	// in other modes. Nil in ask mode denies every privileged action.
	Asker permission.Asker `yaml:"-"`
	// Code, when set, turns on the run_code tool (the isolated tier when
	// Tier is empty; the virtual and local tiers refuse it).
	Code *CodeSettings `yaml:"code"`
	// Sandboxes are the named sandboxes Code chooses from: a policy file's
	// path, or an inline policy (see SandboxSpec).
	Sandboxes map[string]SandboxSpec `yaml:"sandboxes"`
	// Dir is where relative paths of Sandboxes and Code.Mounts are
	// resolved: Load sets it to the settings file's directory; "" is the
	// current directory.
	Dir string `yaml:"-"`
	// File is the settings file Load read ("" when none): New notes it
	// when it lies inside a path the agent may change (see
	// checkGoverningFiles).
	File string `yaml:"-"`
}

// Load reads a YAML settings file strictly: unknown keys, values of the
// wrong type and trailing documents are errors matching ErrConfig that name
// the file. Load checks no values; New does.
func Load(path string) (Settings, error) {
	var s Settings
	if err := policy.DecodeYAMLFile(path, &s); err != nil {
		return s, fmt.Errorf("%w: config %v", ErrConfig, err)
	}
	s.Dir, s.File = filepath.Dir(path), path
	return s, nil
}

// Built is what New opened for a front end. Close it when the front end
// stops; until then it is safe to share between sessions (as its parts
// are).
type Built struct {
	// Tools is the template of every session's toolset: Sandbox and Gate
	// always, Fetcher only with fetch_allow, Search only with search_url,
	// Code only with code.
	Tools tool.Options
	// StorePath is the approval store's absolute path ("" without a
	// store), for the approving command a front end shows the person.
	StorePath string
	// Notes are what the sandbox cannot enforce of what was asked, one
	// line each; a front end must show them to the operator.
	Notes []string

	closers []func() error
}

// New checks s and opens, in this order, the approval store and the audit
// log, the gate, the sandbox of s.Tier (virtual when empty), the fetcher
// and the search backend. When a step fails, what earlier steps opened is
// closed before New returns the error, so a failed New leaks nothing.
//
// Besides OpenSandbox's checks, New refuses the local tier without a root,
// or rooted at "/": its file tools would reach the whole filesystem, and
// an MCP client, not the person, picks the working directory.
//
// With s.Code, New builds run_code's options (Built.Tools.Code): the tier
// is isolated when s.Tier is empty (virtual and local are refused), every
// named sandbox is checked (its name, its extends, that it normalizes),
// the default sandbox must run on this host, an escalation that cannot is
// left out with a note in Built.Notes, the default sandbox's languages
// are probed with ctx (which runs one command in it), and declared
// packages are installed unless the cache has them (InstallCodePackages).
func New(ctx context.Context, s Settings) (_ *Built, err error) {
	if err := s.checkCodeTier(); err != nil {
		return nil, err
	}
	if s.Tier == "" {
		s.Tier = tier.Virtual
	}
	if err := s.checkTier(); err != nil {
		return nil, err
	}
	if err := s.checkLocalRoot(); err != nil {
		return nil, err
	}
	plan, err := s.checkCode()
	if err != nil {
		return nil, err
	}
	governNotes, err := s.checkGoverningFiles(plan)
	if err != nil {
		return nil, err
	}
	b := &Built{}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	if b.Tools.Gate, err = b.openGate(s); err != nil {
		return nil, err
	}
	if b.Tools.Sandbox, b.Notes, err = openTier(ctx, s); err != nil {
		return nil, err
	}
	b.Notes = append(b.Notes, governNotes...)
	b.onClose(b.Tools.Sandbox.Close)
	if b.Tools.Fetcher, err = fetcher(s); err != nil {
		return nil, err
	}
	if b.Tools.Search, err = search(s); err != nil {
		return nil, err
	}
	if plan != nil {
		var notes []string
		if b.Tools.Code, notes, err = s.codeOptions(ctx, plan); err != nil {
			return nil, err
		}
		b.Notes = append(b.Notes, notes...)
		// run_code's isolated one-shots end their teardown in the
		// background: Close waits for it (isolated.Drain).
		b.onClose(DrainOneShots)
	}
	return b, nil
}

// drainPatience bounds how long DrainOneShots waits.
const drainPatience = 5 * time.Second

// DrainOneShots waits, five seconds at most, until the isolated
// one-shots this process ran are torn down and the groups made ahead for
// later ones removed (isolated.Drain): what a front end does before it
// exits, and Close with run_code. A teardown stuck longer is left (its
// groups for a later sandbox's sweep), with the deadline's error.
func DrainOneShots() error {
	ctx, cancel := context.WithTimeout(context.Background(), drainPatience)
	defer cancel()
	return isolated.Drain(ctx)
}

// onClose adds a release step, run by Close before the ones added earlier.
func (b *Built) onClose(f func() error) { b.closers = append(b.closers, f) }

// Close releases what New opened, the last opened first (the sandbox
// before the audit log), and returns their errors joined; with run_code,
// it first waits (a few seconds at most) for its isolated one-shots to be
// torn down (isolated.Drain). Calls after the first do nothing.
func (b *Built) Close() error {
	var errs []error
	for _, f := range slices.Backward(b.closers) {
		errs = append(errs, f())
	}
	b.closers = nil
	return errors.Join(errs...)
}

// checkLocalRoot refuses a local tier without a root, or rooted at "/".
func (s Settings) checkLocalRoot() error {
	if s.Tier != tier.Local {
		return nil
	}
	// The MCP client picks the server's working directory (often "/"),
	// so the local tier's root must be named, and never be "/".
	if s.Root == "" {
		return fmt.Errorf("%w: the local tier needs --root DIR (the directory file tools are guarded to)", ErrConfig)
	}
	if abs, err := filepath.Abs(s.Root); err == nil && abs == "/" {
		return fmt.Errorf("%w: refusing --root /: it would guard file tools to the whole filesystem; name the workspace directory", ErrConfig)
	}
	return nil
}
