package config

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hutchsandbox/hutch/internal/cfgerr"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/remote"
	"github.com/hutchsandbox/hutch/tier"
	"github.com/hutchsandbox/hutch/tool"
)

// CodeSettings turn on the run_code tool (the "code:" key): the sandbox
// every call runs in, the wider ones a call may ask a person for, and the
// host folders every run sees. Sandboxes are named in Settings.Sandboxes.
type CodeSettings struct {
	// Sandbox names the default sandbox (a key of Settings.Sandboxes).
	// Required.
	Sandbox string `yaml:"sandbox"`
	// EscalateTo names the sandboxes a call may ask for, one call at a
	// time, each approved by a person. Neither the default nor a name
	// twice.
	EscalateTo []string `yaml:"escalate_to"`
	// Mounts are host folders every run sees under $RUN_DIR/<name>.
	Mounts map[string]MountSpec `yaml:"mounts"`
	// Packages are installed once into a cache and read by every run
	// (isolated tier only).
	Packages *PackageSettings `yaml:"packages"`
}

// PackageSettings are run_code's declared packages (the "code.packages:"
// key); see tool.CodePackages for what each does.
type PackageSettings struct {
	Python     []string `yaml:"python"`
	JavaScript []string `yaml:"javascript"`
	// Cache is the package cache directory (relative: to Settings.Dir);
	// "" is the user's cache directory's hutch/packages.
	Cache string `yaml:"cache"`
	// PipIndex is an index URL or a directory of wheels (relative: to
	// Settings.Dir); "" is PyPI.
	PipIndex string `yaml:"pip_index"`
	// NPMRegistry is the registry URL; "" is npm's configured registry.
	NPMRegistry string `yaml:"npm_registry"`
	// IndexAddresses are private or reserved addresses the index's host
	// resolves to, allowed explicitly.
	IndexAddresses []string `yaml:"index_addresses"`
}

// codePackages is s's package settings as tool.CodePackages, with
// absolute paths; nil without packages.
func (s Settings) codePackages() (*tool.CodePackages, error) {
	ps := s.Code.Packages
	if ps == nil || len(ps.Python) == 0 && len(ps.JavaScript) == 0 {
		return nil, nil
	}
	if s.Tier != tier.Isolated {
		return nil, codeErr("packages are installed on the isolated tier only, not on the %s tier: bake them into the image instead", s.Tier)
	}
	dir, err := s.baseDir()
	if err != nil {
		return nil, codeErr("%v", err)
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) || strings.Contains(p, "://") {
			return p
		}
		return filepath.Join(dir, p)
	}
	cache := abs(ps.Cache)
	if cache == "" {
		uc, err := os.UserCacheDir()
		if err != nil {
			return nil, codeErr("packages: no cache directory (%v): set code.packages.cache", err)
		}
		cache = filepath.Join(uc, "hutch", "packages")
	}
	return &tool.CodePackages{Python: ps.Python, JavaScript: ps.JavaScript, Cache: cache, PipIndex: abs(ps.PipIndex),
		NPMRegistry: ps.NPMRegistry, IndexAddresses: ps.IndexAddresses}, nil
}

// InstallCodePackages installs the packages s declares for run_code (what
// "hutch code install" does, and New does on first use), and returns the
// installed sets' directories. Lists already in the cache are not
// installed again.
func InstallCodePackages(ctx context.Context, s Settings) ([]string, error) {
	if err := s.checkCodeTier(); err != nil {
		return nil, err
	}
	if s.Code == nil {
		return nil, codeErr("no code: section: nothing to install")
	}
	plan, err := s.checkCode()
	if err != nil {
		return nil, err
	}
	ip, err := s.installPackages(ctx, plan.pols[s.Code.Sandbox])
	if err != nil || ip == nil {
		return nil, err
	}
	return ip.Dirs(), nil
}

func (s Settings) installPackages(ctx context.Context, def policy.Policy) (*tool.InstalledPackages, error) {
	pk, err := s.codePackages()
	if err != nil || pk == nil {
		return nil, err
	}
	if err := isolated.Supported(); err != nil {
		return nil, err
	}
	return tool.InstallPackages(ctx, isolated.Run, def, *pk)
}

// MountSpec is one code mount: in YAML a path (read-only), or a mapping
// {path: P, rw: true}. A relative path is relative to Settings.Dir.
type MountSpec struct {
	Path     string
	Writable bool
}

// UnmarshalYAML takes either form, strictly.
func (m *MountSpec) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode && node.ShortTag() == "!!str" {
		m.Path = node.Value
		return nil
	}
	if node.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a mount is a path, or {path: PATH, rw: true}", node.Line)
	}
	for i := 0; i < len(node.Content); i += 2 {
		if k := node.Content[i].Value; k != "path" && k != "rw" {
			return fmt.Errorf("line %d: mount: unknown key %q (keys: path, rw)", node.Content[i].Line, k)
		}
	}
	var f struct {
		Path string `yaml:"path"`
		RW   bool   `yaml:"rw"`
	}
	if err := node.Decode(&f); err != nil {
		return err
	}
	m.Path, m.Writable = f.Path, f.RW
	return nil
}

// SandboxSpec is one named sandbox (a value of "sandboxes:"): a policy
// file's path (relative to Settings.Dir), or an inline policy in the
// policy-file grammar whose extends names another sandbox of
// Settings.Sandboxes (that wins) or a policy file.
type SandboxSpec struct {
	// File is the policy file's path; "" for an inline policy.
	File string
	// Inline is the inline policy when File is "".
	Inline policy.Spec
}

// UnmarshalYAML takes a path or a mapping of policy keys.
func (s *SandboxSpec) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode && node.ShortTag() == "!!str" && node.Value != "" {
		s.File = node.Value
		return nil
	}
	return s.Inline.UnmarshalYAML(node)
}

// codeErr is an ErrConfig error about the code settings.
func codeErr(format string, args ...any) error {
	return fmt.Errorf("%w: code: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// checkCodeTier fills the tier run_code defaults to, and refuses the
// tiers that cannot run it. s.Tier "" is still unset here.
func (s *Settings) checkCodeTier() error {
	if s.Code == nil {
		if len(s.Sandboxes) > 0 {
			return codeErr("sandboxes are named but code: is missing: add code: {sandbox: NAME} or remove sandboxes")
		}
		return nil
	}
	switch s.Tier {
	case "":
		s.Tier = tier.Isolated
	case tier.Virtual:
		return codeErr("run_code needs the isolated, container or remote tier: the virtual tier cannot run code")
	case tier.Local:
		return codeErr("run_code needs the isolated, container or remote tier: the local tier has no policy to enforce")
	case tier.Remote:
		if len(s.ServerCommand) > 0 {
			return codeErr("run_code on the remote tier needs --server URL: each call is a session of its own, narrowed by its sandbox; a --server-command's hutch serve has one policy")
		}
	case tier.Isolated, tier.Container:
	default:
		return codeErr("run_code needs the isolated, container or remote tier, not %q", s.Tier)
	}
	return nil
}

// baseDir is where relative paths of the settings are resolved: the
// settings file's directory, else the current directory.
func (s Settings) baseDir() (string, error) {
	if s.Dir != "" {
		return filepath.Abs(s.Dir)
	}
	return os.Getwd()
}

// resolveSandboxes builds every named sandbox's policy, as written (not
// normalized), and checks each one normalizes.
func (s Settings) resolveSandboxes() (map[string]policy.Policy, error) {
	dir, err := s.baseDir()
	if err != nil {
		return nil, codeErr("%v", err)
	}
	names := slices.Sorted(maps.Keys(s.Sandboxes))
	for _, n := range names {
		if err := tool.ValidSandboxName(n); err != nil {
			return nil, cfgerr.Under(ErrConfig, fmt.Errorf("sandboxes: %w", err))
		}
	}
	r := resolver{specs: s.Sandboxes, dir: dir, done: map[string]policy.Policy{}}
	for _, n := range names {
		p, err := r.resolve(n, nil)
		if err != nil {
			return nil, err
		}
		if _, err := p.Normalize(dir); err != nil {
			return nil, cfgerr.Under(ErrConfig, fmt.Errorf("sandbox %q: %w", n, err))
		}
	}
	return r.done, nil
}

type resolver struct {
	specs map[string]SandboxSpec
	dir   string
	done  map[string]policy.Policy
}

// resolve builds sandbox name; path is the chain of names extending it.
func (r resolver) resolve(name string, path []string) (policy.Policy, error) {
	if p, ok := r.done[name]; ok {
		return p, nil
	}
	if i := slices.Index(path, name); i >= 0 {
		return policy.Policy{}, codeErr("sandboxes extend in a cycle (%s): break it", strings.Join(append(path[i:], name), " -> "))
	}
	spec := r.specs[name]
	if spec.File == "" && spec.Inline.Line() == 0 {
		// YAML hands no decoder a null ("name: ~" or "name:"): without
		// this it would be the default policy, silently.
		return policy.Policy{}, codeErr("sandbox %q is empty: give a policy file's path, or policy keys ({} for the default policy)", name)
	}
	var p policy.Policy
	var err error
	if spec.File != "" {
		if p, err = policy.Load(r.abs(spec.File)); err != nil {
			return p, cfgerr.Under(ErrConfig, fmt.Errorf("sandbox %q: %w", name, err))
		}
	} else {
		base := policy.Default()
		switch ext := spec.Inline.Extends(); {
		case ext == "":
		case r.has(ext):
			if base, err = r.resolve(ext, append(path, name)); err != nil {
				return base, err
			}
		default:
			file := r.abs(ext)
			if _, statErr := os.Stat(file); statErr != nil && tool.ValidSandboxName(ext) == nil && filepath.Ext(ext) == "" {
				return base, codeErr("sandbox %q extends %q, which is neither a sandbox nor a policy file: name one of sandboxes, or a file's path", name, ext)
			}
			if base, err = policy.Load(file); err != nil {
				return base, cfgerr.Under(ErrConfig, fmt.Errorf("sandbox %q: extends: %w", name, err))
			}
		}
		if p, err = spec.Inline.Build(r.dir, base); err != nil {
			return p, cfgerr.Under(ErrConfig, fmt.Errorf("sandbox %q: %w", name, err))
		}
	}
	r.done[name] = p
	return p, nil
}

func (r resolver) has(name string) bool { _, ok := r.specs[name]; return ok }

func (r resolver) abs(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(r.dir, path)
}

// codePlan is what the code settings name, checked before anything opens.
type codePlan struct {
	pols   map[string]policy.Policy // every named sandbox, as written
	mounts map[string]tool.Mount
}

// checkCode checks the code settings (names, extends, escalations, that
// every sandbox normalizes, mounts) without opening anything.
func (s Settings) checkCode() (*codePlan, error) {
	c := s.Code
	if c == nil {
		return nil, nil
	}
	if c.Sandbox == "" {
		return nil, codeErr("code: needs sandbox: NAME, the default sandbox (one of sandboxes)")
	}
	pols, err := s.resolveSandboxes()
	if err != nil {
		return nil, err
	}
	if _, ok := pols[c.Sandbox]; !ok {
		return nil, codeErr("sandbox %q names no sandbox: add it to sandboxes, or name one of %s", c.Sandbox, sandboxNames(pols))
	}
	for i, n := range c.EscalateTo {
		switch {
		case n == c.Sandbox:
			return nil, codeErr("escalate_to names %q, the default sandbox: a call runs there without asking; remove it", n)
		case slices.Contains(c.EscalateTo[:i], n):
			return nil, codeErr("escalate_to names %q twice: list it once", n)
		}
		if _, ok := pols[n]; !ok {
			return nil, codeErr("escalate_to names %q, which names no sandbox: add it to sandboxes, or name one of %s", n, sandboxNames(pols))
		}
	}
	mounts, err := s.codeMounts()
	if err != nil {
		return nil, err
	}
	return &codePlan{pols: pols, mounts: mounts}, nil
}

// codeOptions builds run_code's options from checked settings of the
// isolated, container or remote tier: the policies, the runner, the mounts and the
// languages the default sandbox has. Escalations the host cannot run are
// left out, each with a note.
func (s Settings) codeOptions(ctx context.Context, plan *codePlan) (*tool.CodeOptions, []string, error) {
	c, pols := s.Code, plan.pols
	o := &tool.CodeOptions{Default: pols[c.Sandbox], Mounts: plan.mounts}
	var notes []string
	check := func(policy.Policy) ([]string, error) { return nil, nil }
	switch s.Tier {
	case tier.Container:
		base := *containerOptions(s)
		o.Run = containerRunner(base)
		check = func(p policy.Policy) ([]string, error) {
			_, n, err := container.FromPolicy(p, base)
			return n, err
		}
	case tier.Remote:
		d, err := remoteServer(s)
		if err != nil {
			return nil, nil, err
		}
		o.Run = remoteRunner(d, plan.mounts)
		check = func(p policy.Policy) ([]string, error) {
			_, err := remote.CodeNarrowing(p)
			return nil, err
		}
	default:
		if err := isolated.Supported(); err != nil {
			return nil, nil, fmt.Errorf("run_code's default sandbox %q: %w", c.Sandbox, err)
		}
		o.Run = isolated.Run
	}
	n, err := check(o.Default)
	if err != nil {
		return nil, nil, fmt.Errorf("run_code's default sandbox %q cannot run on the %s tier: %w", c.Sandbox, s.Tier, err)
	}
	for _, line := range n {
		notes = append(notes, fmt.Sprintf("run_code sandbox %q: %s", c.Sandbox, line))
	}
	for _, name := range c.EscalateTo {
		n, err := check(pols[name])
		if err != nil {
			notes = append(notes, fmt.Sprintf("run_code sandbox %q is left out (calls cannot ask for it): the %s tier cannot run it: %v", name, s.Tier, err))
			continue
		}
		for _, line := range n {
			notes = append(notes, fmt.Sprintf("run_code sandbox %q: %s", name, line))
		}
		if o.Escalations == nil {
			o.Escalations = map[string]policy.Policy{}
		}
		o.Escalations[name] = pols[name]
	}
	if o.Languages, err = tool.ProbeLanguages(ctx, *o); err != nil {
		return nil, nil, fmt.Errorf("run_code's default sandbox %q: %w", c.Sandbox, err)
	}
	if o.Packages, err = s.installPackages(ctx, o.Default); err != nil {
		return nil, nil, fmt.Errorf("run_code's packages: %w", err)
	}
	return o, notes, nil
}

// codeMounts are the code mounts with absolute paths.
func (s Settings) codeMounts() (map[string]tool.Mount, error) {
	if len(s.Code.Mounts) == 0 {
		return nil, nil
	}
	dir, err := s.baseDir()
	if err != nil {
		return nil, codeErr("%v", err)
	}
	out := map[string]tool.Mount{}
	for name, m := range s.Code.Mounts {
		if m.Path == "" {
			return nil, codeErr("mount %q has no path: give mounts: {%s: PATH}", name, name)
		}
		p := m.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		out[name] = tool.Mount{Path: filepath.Clean(p), Writable: m.Writable}
	}
	return out, nil
}

func sandboxNames(pols map[string]policy.Policy) string {
	if len(pols) == 0 {
		return "none (sandboxes is empty)"
	}
	return strings.Join(slices.Sorted(maps.Keys(pols)), ", ")
}

// remoteRunner runs each command in a session of its own on d's server,
// narrowed by the call's policy (remote.CodeNarrowing), its run
// directory and mounts copied there and back (Sandbox.RunCode); the
// session ends after it.
func remoteRunner(d remote.Server, mounts map[string]tool.Mount) tool.CodeRunner {
	var ms []remote.CodeMount
	var carried []string
	for _, name := range slices.Sorted(maps.Keys(mounts)) {
		ms = append(ms, remote.CodeMount{Name: name, Host: mounts[name].Path, Writable: mounts[name].Writable})
		carried = append(carried, mounts[name].Path)
	}
	return func(ctx context.Context, pol policy.Policy, cmd sandbox.Command) (sandbox.Result, error) {
		run := cmd.Env["RUN_DIR"]
		n, err := remote.CodeNarrowing(pol, append(carried, run)...)
		if err != nil {
			return sandbox.Result{}, err
		}
		d := d
		d.Narrow = n
		sb, err := remote.New(ctx, d, remote.Options{})
		if err != nil {
			return sandbox.Result{}, err
		}
		defer sb.Close()
		if cmd.Timeout == 0 {
			cmd.Timeout = pol.Timeout
		}
		if run == "" {
			return sb.Exec(ctx, cmd) // no run directory: the probe of interpreters
		}
		return sb.RunCode(ctx, cmd, run, ms)
	}
}

// containerRunner runs each command in a fresh container mapped from the
// call's policy onto base, and removes it after.
func containerRunner(base container.Options) tool.CodeRunner {
	return func(ctx context.Context, pol policy.Policy, cmd sandbox.Command) (sandbox.Result, error) {
		if cmd.Dir != "" {
			pol.Dir, cmd.Dir = cmd.Dir, ""
		}
		o, _, err := container.FromPolicy(pol, base)
		if err != nil {
			return sandbox.Result{}, err
		}
		sb, err := container.New(ctx, o)
		if err != nil {
			return sandbox.Result{}, err
		}
		defer sb.Close()
		if cmd.Timeout == 0 {
			cmd.Timeout = pol.Timeout
		}
		return sb.Exec(ctx, cmd)
	}
}
