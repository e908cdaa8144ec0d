package tool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// CodePackages are the packages run_code's code may import, per language,
// installed once into a cache directory and read by every run.
type CodePackages struct {
	// Python are pip requirement specifiers ("pandas", "numpy==2.1.0").
	Python []string
	// JavaScript are npm package specifiers ("lodash", "is-number@7").
	JavaScript []string
	// Cache is the directory the installed sets live in, one directory
	// per language and list. Required with any package.
	Cache string
	// PipIndex is where pip installs from: an http(s) index URL, the only
	// host the install may reach, or a local directory of wheels, read
	// with no network at all. "" is https://pypi.org/simple.
	PipIndex string
	// NPMRegistry is the npm registry's URL, the only host the install may
	// reach; "" is the registry npm is configured with on this host
	// (npm config get registry), and then npm's own cafile setting there
	// is passed to the install too.
	NPMRegistry string
	// IndexAddresses are addresses or ranges an index's host resolves to
	// that the sandbox's proxy would refuse as private or reserved (a
	// registry behind a company proxy): listed here, the install may reach
	// them. Never needed for a public index.
	IndexAddresses []string
}

// InstallTimeout bounds one language's package installation.
const InstallTimeout = 10 * time.Minute

// packageSet is one language's installed packages: where they are, and
// what a run needs to find them.
type packageSet struct {
	dir string
	env map[string]string
}

// InstallPackages installs p's packages, each language's list once: a list
// already in the cache (the same packages and index) is not installed
// again. Each installation runs in its own sandbox, built from base
// (normally the default code sandbox) through run, that writes only a new
// directory in the cache and reaches only the package index's host (or
// nothing, for a local wheel directory); the finished directory is moved
// into place whole, so a failed or interrupted install leaves nothing a run
// would read. It returns the installed sets, for CodeOptions.Packages.
func InstallPackages(ctx context.Context, run CodeRunner, base policy.Policy, p CodePackages) (*InstalledPackages, error) {
	out := &InstalledPackages{}
	if len(p.Python) == 0 && len(p.JavaScript) == 0 {
		return out, nil
	}
	if run == nil {
		return nil, fmt.Errorf("%w: installing packages needs a runner", ErrConfig)
	}
	if p.Cache == "" || !filepath.IsAbs(p.Cache) {
		return nil, fmt.Errorf("%w: the package cache %q must be an absolute directory", ErrConfig, p.Cache)
	}
	if err := os.MkdirAll(p.Cache, 0o755); err != nil {
		return nil, fmt.Errorf("package cache: %w", err)
	}
	if len(p.Python) > 0 {
		set, err := installPython(ctx, run, base, p)
		if err != nil {
			return nil, err
		}
		out.sets = append(out.sets, set)
	}
	if len(p.JavaScript) > 0 {
		set, err := installNPM(ctx, run, base, p)
		if err != nil {
			return nil, err
		}
		out.sets = append(out.sets, set)
	}
	return out, nil
}

// InstalledPackages are package sets InstallPackages made; every run_code
// run reads them (and nothing else of the cache).
type InstalledPackages struct {
	sets []packageSet
}

// Dirs are the installed sets' directories.
func (ip *InstalledPackages) Dirs() []string {
	var out []string
	for _, s := range ip.sets {
		out = append(out, s.dir)
	}
	return out
}

// apply widens a run's policy to read the sets and sets their variables.
func (ip *InstalledPackages) apply(pol policy.Policy, env map[string]string) policy.Policy {
	if ip == nil {
		return pol
	}
	for _, s := range ip.sets {
		pol = pol.Extend(policy.Policy{Read: []string{s.dir}})
		for k, v := range s.env {
			env[k] = v
		}
	}
	return pol
}

func installPython(ctx context.Context, run CodeRunner, base policy.Policy, p CodePackages) (packageSet, error) {
	index := p.PipIndex
	if index == "" {
		index = "https://pypi.org/simple"
	}
	args := []string{"python3", "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-warn-script-location", "--no-compile"}
	var widen policy.Policy
	if filepath.IsAbs(index) {
		args = append(args, "--no-index", "--find-links", index)
		widen.Read = []string{index}
	} else {
		host, err := indexHost(index)
		if err != nil {
			return packageSet{}, fmt.Errorf("%w: pip index: %v", ErrConfig, err)
		}
		args = append(args, "--index-url", index)
		widen.Hosts = append([]string{host}, p.IndexAddresses...)
	}
	set, err := install(ctx, run, base, widen, p.Cache, "python", index, p.Python, func(dir string) sandbox.Command {
		return sandbox.Command{Args: append(append(slices.Clone(args), "--target", dir, "--"), p.Python...),
			Env: map[string]string{"PIP_NO_CACHE_DIR": "1", "HOME": dir}}
	})
	set.env = map[string]string{"PYTHONPATH": set.dir}
	return set, err
}

func installNPM(ctx context.Context, run CodeRunner, base policy.Policy, p CodePackages) (packageSet, error) {
	registry, cafile := p.NPMRegistry, ""
	if registry == "" {
		out, err := exec.CommandContext(ctx, "npm", "config", "get", "registry").Output()
		if err != nil {
			return packageSet{}, fmt.Errorf("%w: no npm registry given, and npm config get registry failed: %v (set the registry, or install npm)", ErrConfig, err)
		}
		registry = strings.TrimSpace(string(out))
		if out, err := exec.CommandContext(ctx, "npm", "config", "get", "cafile").Output(); err == nil {
			if f := strings.TrimSpace(string(out)); filepath.IsAbs(f) {
				cafile = f
			}
		}
	}
	host, err := indexHost(registry)
	if err != nil {
		return packageSet{}, fmt.Errorf("%w: npm registry: %v", ErrConfig, err)
	}
	widen := policy.Policy{Hosts: append([]string{host}, p.IndexAddresses...)}
	if cafile != "" {
		widen.Read = []string{cafile}
	}
	set, err := install(ctx, run, base, widen, p.Cache, "javascript", registry, p.JavaScript, func(dir string) sandbox.Command {
		args := []string{"npm", "install", "--no-audit", "--no-fund", "--no-save", "--no-package-lock", "--ignore-scripts",
			"--prefix", dir, "--registry", registry, "--"}
		env := map[string]string{"npm_config_cache": filepath.Join(dir, ".npm"), "npm_config_update_notifier": "false", "HOME": dir}
		if cafile != "" {
			env["npm_config_cafile"] = cafile
		}
		return sandbox.Command{Args: append(args, p.JavaScript...), Env: env}
	})
	set.env = map[string]string{"NODE_PATH": filepath.Join(set.dir, "node_modules")}
	return set, err
}

// indexHost is the host:port an index URL names, for the install's
// network allow-list.
func indexHost(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
		return "", fmt.Errorf("%q is not an http(s) URL or an absolute directory", raw)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// install runs one language's installation into a fresh directory of the
// cache and moves it into place, unless that list is installed already.
func install(ctx context.Context, run CodeRunner, base, widen policy.Policy, cache, lang, index string, pkgs []string,
	cmd func(dir string) sandbox.Command) (packageSet, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s", lang, index)
	for _, p := range pkgs {
		fmt.Fprintf(h, "\x00%s", p)
	}
	final := filepath.Join(cache, lang+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	set := packageSet{dir: final}
	if fi, err := os.Lstat(final); err == nil && fi.IsDir() {
		return set, nil
	}
	tmp, err := os.MkdirTemp(cache, lang+"-partial-")
	if err != nil {
		return set, fmt.Errorf("package cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	pol := base.Extend(widen).Extend(policy.Policy{Write: []string{tmp}, Dir: tmp, Timeout: InstallTimeout})
	c := cmd(tmp)
	c.Dir = tmp
	res, err := run(ctx, pol, c)
	if err != nil {
		return set, fmt.Errorf("installing %s packages: %w", lang, err)
	}
	if res.ExitCode != 0 || res.TimedOut {
		how := fmt.Sprintf("exit %d", res.ExitCode)
		if res.TimedOut {
			how = fmt.Sprintf("timed out after %v", InstallTimeout)
		}
		return set, fmt.Errorf("installing %s packages %s failed (%s): %s", lang, strings.Join(pkgs, " "), how, lastLine(string(res.Stderr)+string(res.Stdout)))
	}
	if err := os.Rename(tmp, final); err != nil {
		if fi, serr := os.Lstat(final); serr == nil && fi.IsDir() {
			return set, nil // another install of the same list won the race
		}
		return set, fmt.Errorf("package cache: %w", err)
	}
	return set, nil
}

// lastLine is the gist of a failed install's output: its last three
// lines that say "error", else its last line.
func lastLine(s string) string {
	var errs []string
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for _, l := range lines {
		if l = strings.TrimSpace(l); strings.Contains(strings.ToLower(l), "error") {
			errs = append(errs, l)
		}
	}
	if len(errs) == 0 {
		errs = lines[len(lines)-1:]
	}
	return Truncate(strings.Join(errs[max(0, len(errs)-3):], " | "), 1, 600)
}
