package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/hutchsandbox/hutch/internal/cfgerr"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/netproxy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Network says what network a command has.
type Network string

// Network settings.
const (
	NetworkNone Network = "none" // a private network namespace with only loopback
	NetworkAll  Network = "all"  // the host's network
	// NetworkAllow keeps the private network namespace; its only way out is
	// hutch's filtering proxy (package netproxy), which lets through the
	// hosts in Policy.Hosts and no entry of Policy.DenyHosts.
	NetworkAllow Network = "allow"
)

// Limits bound a command's resources. Zero is a limit not set: none, in a
// policy of its own, and to Extend "keep the narrower policy's" (Default
// sets Memory and Processes). Unlimited, in Memory or Processes, is no
// limit asked for explicitly, which lifts the default's.
type Limits struct {
	// Memory is the most memory the sandbox may use (a cgroup limit where
	// available, else RLIMIT_DATA per process, which does not count shared
	// memory: see DefaultMemory).
	Memory Size
	// CPUTime is the CPU time each process may use.
	CPUTime time.Duration
	// Processes is how many processes (and threads) may exist at once.
	Processes int
	// FileSize is the largest file a process may write.
	FileSize Size
	// OpenFiles is how many files each process may hold open.
	OpenFiles int
}

// Policy is what a sandboxed command may do. Paths are absolute host paths.
// The zero value is not useful; start from Default.
type Policy struct {
	// Read lists paths the command may read (and execute).
	Read []string
	// Write lists paths it may change; each is readable too.
	Write []string
	// Deny lists paths it may not touch at all, even inside a readable or
	// writable path: a denied directory appears empty, a denied file
	// unreadable. Deny wins.
	Deny []string
	// Protect lists paths, relative to each writable path and to the
	// start directory, that stay read-only there even though their
	// directory is writable (see Protected): they are added to
	// DefaultProtected, and an entry listed here stays protected whatever
	// Unprotect says.
	Protect []string
	// Unprotect lifts the protection of DefaultProtected entries: each
	// entry removes the protected entries it names or holds (".git"
	// removes ".git/hooks" and ".git/config"); one that removes nothing
	// is an error, never ignored.
	Unprotect []string
	// Network is none (the default), all, or allow (only Hosts, through
	// the filtering proxy).
	Network Network
	// Hosts are the network allow-list entries (netproxy's grammar:
	// host[:port], *.example.com, an IP address or a CIDR range). Listing
	// any makes the network "allow" unless it is set otherwise.
	Hosts []string
	// DenyHosts are entries refused even when Hosts matches: deny wins.
	DenyHosts []string
	// Dir is where the command starts ("" is the first writable path, else
	// the private /tmp).
	Dir string
	// Timeout stops the command and everything it started (0: 120 s).
	Timeout time.Duration
	Limits  Limits
	// Nice is the scheduling priority adjustment (0 to 19; higher is
	// nicer).
	Nice int
	// Env is the command's whole environment when set; nil means PATH,
	// HOME and LANG only.
	Env map[string]string
}

// ErrConfig matches every error about a policy that cannot be applied as
// written: an unknown key, a relative or malformed path, a bad limit. The
// message names the setting and the fix.
var ErrConfig = cfgerr.New("invalid policy")

// SystemPaths are what the default policy reads: the system's programs and
// libraries. Paths missing on a host are skipped when enforcing.
var SystemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// SystemSecrets are the well-known places under SystemPaths of secrets
// only root may read: passwords, host and TLS keys, keytabs, VPN and
// network credentials, daemons' keys. The default policy denies them:
// when hutch runs as root, the sandbox's root is the host's root (without
// capabilities, but still the owner). It is a list, not a walk: another
// root-only file under SystemPaths stays readable to a sandbox of a hutch
// running as root (docs/security.md).
var SystemSecrets = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
	"/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key", "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_dsa_key",
	"/etc/ssl/private", "/etc/pki/tls/private", "/etc/security/opasswd",
	"/etc/krb5.keytab", "/etc/credstore", "/etc/credstore.encrypted",
	"/etc/wireguard", "/etc/NetworkManager/system-connections", "/etc/ipsec.secrets", "/etc/ipsec.d/private",
	"/etc/ppp/chap-secrets", "/etc/ppp/pap-secrets", "/etc/openvpn", "/etc/letsencrypt/archive", "/etc/letsencrypt/keys",
	"/etc/docker/key.json", "/etc/libvirt/secrets", "/etc/default/cacerts",
}

// DefaultProtected are the paths every policy keeps read-only inside
// its writable paths (Policy.Protected): what a command could plant there
// to run later outside any sandbox — git's hooks and configuration
// (core.fsmonitor, core.hooksPath, a commondir that points git at other
// hooks), shell start-up files, git's and ripgrep's user configuration,
// and editors' and agents' project settings (tasks, MCP servers, hooks).
var DefaultProtected = []string{
	".git/hooks", ".git/config", ".git/commondir", ".gitmodules",
	".bashrc", ".bash_profile", ".bash_login", ".zshrc", ".zprofile", ".zshenv", ".profile",
	".gitconfig", ".ripgreprc", ".mcp.json",
	".vscode", ".idea", ".claude", ".codex", ".gemini",
}

// Protected is the policy's list of protected paths, relative to each
// writable path (and to the start directory): DefaultProtected and
// Protect, less what Unprotect removes (never an entry Protect lists).
// Inside a writable path these stay read-only: a command cannot write,
// create, rename or remove them, nor can the file tools (where the tier
// can enforce it: see docs/security.md).
func (p Policy) Protected() []string {
	return protectedList(cleanEntries(p.Protect), cleanEntries(p.Unprotect))
}

func protectedList(protect, unprotect []string) []string {
	var out []string
	for _, e := range union(DefaultProtected, protect) {
		if slices.Contains(protect, e) || !slices.ContainsFunc(unprotect, func(u string) bool { return within(e, u) }) {
			out = append(out, e)
		}
	}
	return out
}

// ProtectedNote says, for a model, which protected paths stay read-only
// in a tier's writable directories and how far that reaches (what is
// "sandbox" or "container": what started). created says whether the
// tier also keeps commands from making those that were missing (the
// isolated tier's supervisor, the container helper's).
func ProtectedNote(protected []string, what string, created bool) string {
	keep := "commands cannot change those that existed at the top of a writable directory, or of the start directory, when the " + what + " started"
	if created {
		keep = "at the top of a writable directory, or of the start directory, commands can neither change them nor make those that were missing when the " + what + " started"
	}
	return fmt.Sprintf("Protected paths stay read-only in the writable directories: %s (the file tools refuse them at any depth; %s).", showPaths(protected), keep)
}

// ProtectedPaths is the protected list of a tier that takes no policy
// (the local tier, the container tier's options): DefaultProtected and
// protect, less what unprotect removes, checked as Normalize checks a
// policy's (errors match ErrConfig).
func ProtectedPaths(protect, unprotect []string) ([]string, error) {
	p, err := Policy{Protect: protect, Unprotect: unprotect}.normalizeProtected()
	if err != nil {
		return nil, err
	}
	return p.Protected(), nil
}

// normalizeProtected checks and cleans the protected-path lists.
func (p Policy) normalizeProtected() (Policy, error) {
	var err error
	if p.Protect, err = checkProtected("protect", p.Protect); err != nil {
		return p, err
	}
	if p.Unprotect, err = checkProtected("unprotect", p.Unprotect); err != nil {
		return p, err
	}
	for _, u := range p.Unprotect {
		all := union(DefaultProtected, p.Protect)
		if !slices.ContainsFunc(all, func(e string) bool { return within(e, u) }) {
			return p, configErr("unprotect %s: no protected path is there or below it (protected: %s)", ShowPath(u), strings.Join(all, ", "))
		}
	}
	return p, nil
}

// cleanEntries is a protected-path list as Normalize leaves it (no
// trailing slash), for a policy not normalized yet.
func cleanEntries(in []string) []string {
	out := make([]string, 0, len(in))
	for _, e := range in {
		if c := path.Clean(e); c != "." {
			out = append(out, c)
		}
	}
	return out
}

// checkProtected validates a protected-path list (what: "protect" or
// "unprotect") and cleans it: relative paths below a writable path, not
// ".", "..", absolute, or holding a comma (the container runtimes'
// mount syntax).
func checkProtected(what string, in []string) ([]string, error) {
	var out []string
	for _, e := range in {
		c := path.Clean(e)
		switch {
		case e == "" || strings.IndexByte(e, 0) >= 0 || !utf8.ValidString(e) || strings.ContainsAny(e, ",\n"):
			return nil, configErr("%s entry %q: give a path relative to the writable directories, such as .vscode or .git/hooks", what, e)
		case path.IsAbs(e) || c == "." || c == ".." || strings.HasPrefix(c, "../"):
			return nil, configErr("%s entry %q is not below a writable directory: give a relative path such as .vscode or .git/hooks", what, e)
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Default reads the system's programs and libraries (not $HOME, /root,
// /home, /srv, /opt, /var, /run or the host's /tmp; not the root-only
// SystemSecrets), writes nothing, has no network, gets a private empty
// /tmp, has at most DefaultProcesses processes and DefaultMemory of
// memory, and stops after 120 seconds. A policy extending it lifts a
// limit with Unlimited, or changes it with a number.
func Default() Policy {
	return Policy{
		Read:    slices.Clone(SystemPaths),
		Deny:    slices.Clone(SystemSecrets),
		Network: NetworkNone,
		Timeout: sandbox.DefaultTimeout,
		Limits:  Limits{Processes: DefaultProcesses, Memory: DefaultMemory()},
	}
}

// Extend returns p widened by q: paths are added, and every setting q sets
// (network, directory, timeout, each limit, nice, env entries) replaces p's.
// A limit of 0 is not set, and keeps p's; Unlimited is set, and lifts it.
func (p Policy) Extend(q Policy) Policy {
	out := p
	out.Read = union(p.Read, q.Read)
	out.Write = union(p.Write, q.Write)
	out.Deny = union(p.Deny, q.Deny)
	out.Protect = union(p.Protect, q.Protect)
	out.Unprotect = union(p.Unprotect, q.Unprotect)
	out.Hosts = union(p.Hosts, q.Hosts)
	out.DenyHosts = union(p.DenyHosts, q.DenyHosts)
	switch {
	case q.Network == NetworkAll || q.Network == NetworkNone:
		// An explicit none or all replaces any allow-list; host entries
		// given with it are kept, for Normalize to refuse (never dropped
		// silently).
		out.Network, out.Hosts, out.DenyHosts = q.Network, slices.Clone(q.Hosts), slices.Clone(q.DenyHosts)
	case q.Network != "":
		out.Network = q.Network
	case len(q.Hosts) > 0 && out.Network != NetworkAll:
		out.Network = NetworkAllow
	}
	if q.Dir != "" {
		out.Dir = q.Dir
	}
	if q.Timeout != 0 {
		out.Timeout = q.Timeout
	}
	if q.Limits.Memory != 0 {
		out.Limits.Memory = q.Limits.Memory
	}
	if q.Limits.CPUTime != 0 {
		out.Limits.CPUTime = q.Limits.CPUTime
	}
	if q.Limits.Processes != 0 {
		out.Limits.Processes = q.Limits.Processes
	}
	if q.Limits.FileSize != 0 {
		out.Limits.FileSize = q.Limits.FileSize
	}
	if q.Limits.OpenFiles != 0 {
		out.Limits.OpenFiles = q.Limits.OpenFiles
	}
	if q.Nice != 0 {
		out.Nice = q.Nice
	}
	if q.Env != nil {
		out.Env = tierkit.MergeEnv(p.Env, q.Env)
	}
	return out
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// Normalize cleans paths (made absolute against cwd), fills defaults
// (network none, timeout 120 s, the start directory) and validates. Errors
// match ErrConfig and name the fix.
func (p Policy) Normalize(cwd string) (Policy, error) {
	var err error
	for _, list := range []*[]string{&p.Read, &p.Write, &p.Deny} {
		if *list, err = cleanPaths(*list, cwd); err != nil {
			return p, err
		}
	}
	if p, err = p.normalizeProtected(); err != nil {
		return p, err
	}
	if slices.Contains(p.Read, "/") || slices.Contains(p.Write, "/") {
		return p, configErr("policy path / is the whole host filesystem: list the directories the command needs")
	}
	if p.Dir != "" {
		d, err := cleanPaths([]string{p.Dir}, cwd)
		if err != nil {
			return p, err
		}
		p.Dir = d[0]
	}
	if err := p.normalizeNetwork(); err != nil {
		return p, err
	}
	if p.Timeout == 0 {
		p.Timeout = sandbox.DefaultTimeout
	}
	l := p.Limits
	neg := negativeLimit(l)
	switch {
	case p.Timeout < 0:
		return p, configErr("timeout %v is negative", p.Timeout)
	case neg != "":
		return p, configErr("%s", neg)
	case l.Memory > 0 && l.Memory < 16<<20:
		return p, configErr("memory limit %v is too small to start a program: give at least 16 MiB", l.Memory)
	case l.CPUTime != 0 && l.CPUTime < time.Second:
		return p, configErr("cpu time limit %v: the kernel counts whole seconds; give at least 1s", l.CPUTime)
	case l.Processes > maxProcesses:
		return p, configErr("process limit %d is more than any kernel allows (%d)", l.Processes, maxProcesses)
	case l.Processes > 0 && l.Processes < minProcesses:
		return p, configErr("process limit %d is too small to start a command: give at least %d", l.Processes, minProcesses)
	case l.OpenFiles > maxOpenFiles:
		return p, configErr("open-files limit %d is more than any kernel allows (%d)", l.OpenFiles, maxOpenFiles)
	case l.OpenFiles != 0 && l.OpenFiles < minOpenFiles:
		return p, configErr("open-files limit %d is too small to start a command: give at least %d", l.OpenFiles, minOpenFiles)
	case p.Nice < 0 || p.Nice > 19:
		return p, configErr("nice %d: give 0 (normal) to 19 (lowest priority)", p.Nice)
	}
	for k, v := range p.Env {
		if err := sandbox.CheckEnvVar(k, v); err != nil {
			return p, cfgerr.Under(ErrConfig, err)
		}
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return p, configErr("environment variable %q=%q is not valid UTF-8", k, v)
		}
	}
	if p.Dir == "" {
		p.Dir = "/tmp"
		if len(p.Write) > 0 {
			p.Dir = p.Write[0]
		}
	}
	if p.Dir != "/tmp" && !p.CanRead(p.Dir) {
		if i := slices.IndexFunc(p.Deny, func(d string) bool { return within(p.Dir, d) }); i >= 0 {
			// Deny wins: adding it with --read or --write would not help.
			return p, configErr("start directory %s is denied (by %s): remove that deny or start elsewhere", ShowPath(p.Dir), ShowPath(p.Deny[i]))
		}
		return p, configErr("start directory %s is not readable under the policy: add it with --read or --write", ShowPath(p.Dir))
	}
	return p, nil
}

// Bounds on limits: a command needs a few processes and descriptors to
// start (a shell, its pipes); the kernel takes no more than 4194304
// processes (PID_MAX_LIMIT) or 1048576 open files by default (fs.nr_open).
const (
	minProcesses = 4
	maxProcesses = 1 << 22
	minOpenFiles = 16
	maxOpenFiles = 1 << 20
)

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: policy: %s", ErrConfig, fmt.Sprintf(format, args...))
}

func cleanPaths(in []string, cwd string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, p := range in {
		switch {
		case p == "":
			return nil, configErr("empty path")
		case strings.IndexByte(p, 0) >= 0:
			return nil, configErr("path %q contains a NUL byte", p)
		case !utf8.ValidString(p):
			// Policies travel as JSON, which would turn such bytes into
			// U+FFFD: a deny would name another path, and protect nothing.
			return nil, configErr("path %q is not valid UTF-8: give the directory above it", p)
		case len(p) > sandbox.MaxPathLen:
			return nil, configErr("path is longer than %d bytes", sandbox.MaxPathLen)
		case strings.HasPrefix(p, "~"):
			return nil, configErr("path %q: hutch does not expand ~; give the absolute path", p)
		case strings.HasPrefix(p, "$"):
			// Else "$HOME/.ssh" would name DIR/$HOME/.ssh, which does not
			// exist: a deny that protects nothing.
			return nil, configErr("path %q: hutch does not expand variables; give the absolute path", p)
		}
		if !filepath.IsAbs(p) {
			if cwd == "" {
				return nil, configErr("path %q is relative: give an absolute path", p)
			}
			p = filepath.Join(cwd, p)
		}
		p = filepath.Clean(p)
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

func under(path string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return within(path, d) })
}

// CanRead reports whether the policy lets the command read path (a clean
// absolute path): it is under a readable or writable path and not denied.
func (p Policy) CanRead(path string) bool {
	return !under(path, p.Deny) && (under(path, p.Read) || under(path, p.Write))
}

// CanWrite reports whether the policy lets the command change path.
func (p Policy) CanWrite(path string) bool {
	return !under(path, p.Deny) && under(path, p.Write)
}

// normalizeNetwork fills the network setting and checks the allow-list
// with the proxy's own parser.
func (p *Policy) normalizeNetwork() error {
	if p.Network == "" {
		p.Network = NetworkNone
		if len(p.Hosts) > 0 {
			p.Network = NetworkAllow
		}
	}
	// Entries as the proxy reads them (it trims surrounding white space),
	// so that the summary shows no line break or invisible space of one.
	for _, list := range []*[]string{&p.Hosts, &p.DenyHosts} {
		if *list != nil {
			trimmed := make([]string, len(*list))
			for i, h := range *list {
				trimmed[i] = strings.TrimSpace(h)
			}
			*list = trimmed
		}
	}
	switch p.Network {
	case NetworkNone, NetworkAll:
		if len(p.Hosts) > 0 || len(p.DenyHosts) > 0 {
			return configErr("network %s with host entries: use network allow (--network allow=HOST,...) for an allow-list", p.Network)
		}
	case NetworkAllow:
		if len(p.Hosts) == 0 {
			return configErr("network allow lists no host: give entries (--network allow=example.com,*.example.org:443)")
		}
		if _, err := netproxy.NewList(p.Hosts, p.DenyHosts); err != nil {
			return configErr("%v", err)
		}
	default:
		return configErr("network %q: choose none, all or allow=HOST,...", p.Network)
	}
	return nil
}

// Summary describes the policy in plain words, for people and models:
// "Starts in /w. Can change /w. No network access. Memory limit 512 MiB.
// Stops after 300 seconds."
func (p Policy) Summary() string {
	var b strings.Builder
	say := func(format string, args ...any) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, format, args...)
	}
	dir := p.Dir
	if dir == "" {
		dir = "/tmp"
	}
	say("Starts in %s.", ShowPath(dir))
	if extra := nonSystem(p.Read); len(extra) > 0 {
		say("Can read %s.", showPaths(extra))
	}
	if len(p.Write) > 0 {
		say("Can change %s.", showPaths(p.Write))
	} else {
		say("Cannot change any host file (only a private /tmp).")
	}
	if denied := notIn(p.Deny, SystemSecrets); len(denied) > 0 {
		say("Cannot see %s.", showPaths(denied))
	}
	if len(p.Write) > 0 && (len(p.Protect) > 0 || len(p.Unprotect) > 0) {
		// The default list goes without saying, as the system paths do.
		say("Keeps %s read-only inside them.", showPaths(p.Protected()))
	}
	switch p.Network {
	case NetworkAll:
		say("Has full network access.")
	case NetworkAllow:
		say("Network access only to %s, through hutch's proxy (HTTP, HTTPS and SOCKS5).", strings.Join(p.Hosts, ", "))
		if len(p.DenyHosts) > 0 {
			say("Never to %s.", strings.Join(p.DenyHosts, ", "))
		}
	default:
		say("No network access.")
	}
	l := p.Limits
	switch {
	case l.Memory > 0:
		say("Memory limit %v.", l.Memory)
	case l.Memory == Unlimited:
		say("No memory limit.")
	}
	if l.CPUTime > 0 {
		say("CPU time limit %v seconds.", int64((l.CPUTime+time.Second-1)/time.Second)) // as enforced: whole seconds, rounded up
	}
	switch {
	case l.Processes > 0:
		say("At most %d processes.", l.Processes)
	case l.Processes == Unlimited:
		say("No process limit.")
	}
	if l.FileSize > 0 {
		say("Files up to %v.", l.FileSize)
	}
	if l.OpenFiles > 0 {
		say("At most %d open files per process.", l.OpenFiles)
	}
	if p.Nice > 0 {
		say("Runs at lower priority (nice %d).", p.Nice)
	}
	t := p.Timeout
	if t == 0 {
		t = sandbox.DefaultTimeout
	}
	say("Stops after %s.", seconds(t))
	return b.String()
}

// ShowPath is path as the summary and error messages show it: as it is
// when it holds only ASCII letters, digits and / . _ - + @ = , : (and no
// ". "), else quoted with Go's escapes, non-ASCII included. A path cannot
// then forge a sentence ("/w. Has full network access", or the same with
// letters that look like a dot and fillers that look like spaces) or
// carry a line break, a terminal escape or a bidi override to the person
// or model reading it.
func ShowPath(path string) string {
	plain := path != "" && !strings.Contains(path, ". ") && strings.IndexFunc(path, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+@=,:", r))
	}) < 0
	if plain {
		return path
	}
	return strconv.QuoteToASCII(path)
}

// showPaths joins paths as showPath shows each.
func showPaths(paths []string) string {
	shown := make([]string, len(paths))
	for i, p := range paths {
		shown[i] = ShowPath(p)
	}
	return strings.Join(shown, ", ")
}

func seconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d seconds", int64(d/time.Second))
	}
	return d.String()
}

// nonSystem drops the default system paths, which go without saying.
func nonSystem(paths []string) []string { return notIn(paths, SystemPaths) }

func notIn(paths, known []string) []string {
	var out []string
	for _, p := range paths {
		if !slices.Contains(known, p) {
			out = append(out, p)
		}
	}
	return out
}

// fileForm is the YAML shape: durations and sizes as text.
type fileForm struct {
	Read  pathList `yaml:"read"`
	Write pathList `yaml:"write"`
	Deny  pathList `yaml:"deny"`
	// Protect and Unprotect are relative to each writable path, never
	// to the file's directory.
	Protect   pathList          `yaml:"protect"`
	Unprotect pathList          `yaml:"unprotect"`
	Network   fileNetwork       `yaml:"network"`
	Dir       string            `yaml:"dir"`
	Timeout   string            `yaml:"timeout"`
	Limits    fileLimits        `yaml:"limits"`
	Nice      wholeNumber       `yaml:"nice"`
	Env       map[string]string `yaml:"env"`
	// Extends names a policy file this one widens (relative to this file).
	Extends string `yaml:"extends"`
}

// fileNetwork is "network: none", "network: all", or a mapping with the
// allow-list: "network: {allow: [pypi.org], deny: [...]}".
type fileNetwork struct {
	Mode  Network
	Allow []string
	Deny  []string
}

// UnmarshalYAML takes either form, strictly.
func (n *fileNetwork) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode {
		n.Mode = Network(node.Value)
		return nil
	}
	var m struct {
		Allow hostList `yaml:"allow"`
		Deny  hostList `yaml:"deny"`
	}
	if node.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: network: give none, all, or a mapping with allow and deny lists", node.Line)
	}
	for i := 0; i < len(node.Content); i += 2 {
		if k := node.Content[i].Value; k != "allow" && k != "deny" {
			return fmt.Errorf("line %d: network: unknown key %q (keys: allow, deny)", node.Content[i].Line, k)
		}
	}
	if err := node.Decode(&m); err != nil {
		return err
	}
	n.Mode, n.Allow, n.Deny = NetworkAllow, m.Allow, m.Deny
	return nil
}

// fileLimits holds processes and memory as nodes, read by fileLimit: YAML
// gives no unmarshaler a null, which would then keep the default's limit.
type fileLimits struct {
	Memory    yaml.Node   `yaml:"memory"`
	CPUTime   string      `yaml:"cpu_time"`
	Processes yaml.Node   `yaml:"processes"`
	FileSize  Size        `yaml:"file_size"`
	OpenFiles wholeNumber `yaml:"open_files"`
}

// pathList is a list of paths in a file, where YAML would otherwise turn
// an entry written ~ or null into nothing at all (a deny entry silently
// gone).
type pathList []string

func (l *pathList) UnmarshalYAML(node *yaml.Node) error {
	return scalarList((*[]string)(l), node, "path")
}

// hostList is pathList for the network's allow and deny lists.
type hostList []string

func (l *hostList) UnmarshalYAML(node *yaml.Node) error {
	return scalarList((*[]string)(l), node, "host")
}

// scalarList decodes a YAML list of plain values (what: "path") into l,
// refusing an entry that is null or not a scalar.
func scalarList(l *[]string, node *yaml.Node, what string) error {
	if node.Kind != yaml.SequenceNode {
		return fmt.Errorf("line %d: give a list of %ss", node.Line, what)
	}
	for _, n := range node.Content {
		if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
			return fmt.Errorf("line %d: a %s list entry is empty or not a %s (a bare ~ is YAML's null; quote %ss)", n.Line, what, what, what)
		}
		*l = append(*l, n.Value)
	}
	return nil
}

// wholeNumber is an integer in a file; YAML would otherwise truncate 1.5
// to 1 silently.
type wholeNumber int

func (w *wholeNumber) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.ScalarNode || node.ShortTag() != "!!int" {
		return fmt.Errorf("line %d: %q is not a whole number", node.Line, node.Value)
	}
	v, err := ParseWholeNumber(node.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", node.Line, err)
	}
	*w = wholeNumber(v)
	return nil
}

// negativeLimit names the first negative limit of l (other than
// Unlimited where it may stand), as it was written, and how to say none;
// "" when there is none.
func negativeLimit(l Limits) string {
	for _, c := range []struct {
		name string
		neg  bool
		v    any
		none string
	}{{"memory", l.Memory < 0 && l.Memory != Unlimited, int64(l.Memory), UnlimitedWord}, {"cpu time", l.CPUTime < 0, l.CPUTime, "0"},
		{"process", l.Processes < 0 && l.Processes != Unlimited, l.Processes, UnlimitedWord},
		{"file size", l.FileSize < 0, int64(l.FileSize), "0"}, {"open-files", l.OpenFiles < 0, l.OpenFiles, "0"}} {
		if c.neg {
			return fmt.Sprintf("%s limit %v is negative: give a positive limit, or %s for none", c.name, c.v, c.none)
		}
	}
	return ""
}

// ParseWholeNumber reads a count written in decimal: digits, an optional
// leading minus, no leading zero (and no -0). It refuses what YAML and Go's flags
// would read in another base (010 as octal 8, 0x20, 0o17, 0b11) or with
// separators (1_000), rather than guess which the writer meant.
func ParseWholeNumber(s string) (int, error) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" || len(digits) > 1 && digits[0] == '0' || digits != s && digits == "0" {
		return 0, fmt.Errorf("%q is not a decimal whole number: write digits only, without a leading zero (010 is octal to some readers)", s)
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return v, nil
}

// maxFile bounds a policy file's size.
const maxFile = 1 << 20

// Load reads a YAML policy file strictly (unknown keys are errors). The
// file widens the default policy, or the file named by its "extends" key.
// Relative paths in the file are relative to the file's directory.
func Load(path string) (Policy, error) {
	return load(path, 0)
}

func load(path string, depth int) (Policy, error) {
	if depth > 8 {
		return Policy{}, configErr("%s: too many nested extends", path)
	}
	var f fileForm
	err := DecodeYAMLFile(path, &f)
	if err != nil {
		return Policy{}, configErr("%v", err)
	}
	base := Default()
	dir := filepath.Dir(path)
	if f.Extends != "" {
		parent := f.Extends
		if !filepath.IsAbs(parent) {
			parent = filepath.Join(dir, parent)
		}
		if base, err = load(parent, depth+1); err != nil {
			return Policy{}, err
		}
	}
	p, err := f.build(dir, path, base)
	if err != nil {
		return Policy{}, err
	}
	return p, nil
}

// build is the policy f writes, widening base; relative paths are
// relative to dir, and errors name where (the file, or a line).
func (f *fileForm) build(dir, where string, base Policy) (Policy, error) {
	var err error
	q := Policy{Read: f.Read, Write: f.Write, Deny: f.Deny, Protect: f.Protect, Unprotect: f.Unprotect, Network: f.Network.Mode, Hosts: f.Network.Allow,
		DenyHosts: f.Network.Deny, Dir: f.Dir, Nice: int(f.Nice), Env: maps.Clone(f.Env)}
	for _, list := range []*[]string{&q.Read, &q.Write, &q.Deny} {
		if *list, err = cleanPaths(*list, dir); err != nil {
			return Policy{}, fmt.Errorf("%s: %w", where, err)
		}
	}
	if q.Protect, err = checkProtected("protect", q.Protect); err != nil {
		return Policy{}, fmt.Errorf("%s: %w", where, err)
	}
	if q.Unprotect, err = checkProtected("unprotect", q.Unprotect); err != nil {
		return Policy{}, fmt.Errorf("%s: %w", where, err)
	}
	if q.Dir != "" && !filepath.IsAbs(q.Dir) {
		if dir == "" {
			return Policy{}, configErr("%s: dir %q is relative: give an absolute path", where, q.Dir)
		}
		q.Dir = filepath.Join(dir, q.Dir)
	}
	if q.Timeout, err = parseDuration(f.Timeout); err != nil {
		return Policy{}, configErr("%s: timeout: %v", where, err)
	}
	q.Limits = Limits{FileSize: f.Limits.FileSize, OpenFiles: int(f.Limits.OpenFiles)}
	if q.Limits.CPUTime, err = parseDuration(f.Limits.CPUTime); err != nil {
		return Policy{}, configErr("%s: cpu_time: %v", where, err)
	}
	if q.Limits.Processes, err = fileLimit(f.Limits.Processes, "processes", []string{"!!int"}, ParseProcessLimit); err != nil {
		return Policy{}, configErr("%s: %v", where, err)
	}
	if q.Limits.Memory, err = fileLimit(f.Limits.Memory, "memory", []string{"!!int", "!!float", "!!str"}, ParseMemoryLimit); err != nil {
		return Policy{}, configErr("%s: %v", where, err)
	}
	return base.Extend(q), nil
}

// Spec is a policy written inline in another YAML file (a settings file's
// sandboxes), in the policy-file grammar: the keys of a policy file, read
// as strictly (an unknown key is an error naming its line). Build makes
// the policy; the extends key is the caller's to resolve (Extends).
type Spec struct {
	form fileForm
	line int
}

// UnmarshalYAML reads a mapping in the policy-file grammar strictly.
func (s *Spec) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a policy is a mapping of policy keys (read, write, deny, protect, unprotect, network, dir, timeout, limits, nice, env, extends)", node.Line)
	}
	if err := knownKeys(node, reflect.TypeFor[fileForm](), ""); err != nil {
		return err
	}
	var f fileForm
	if err := node.Decode(&f); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return errors.New(strings.Join(te.Errors, "; "))
		}
		return err
	}
	s.form, s.line = f, node.Line
	return nil
}

// knownKeys refuses a key of the mapping node that no yaml tag of struct
// type t names, and looks into the values of struct fields (not those
// with an unmarshaler of their own, which check their own keys): a
// decoder's KnownFields does not reach an UnmarshalYAML's node.Decode.
func knownKeys(node *yaml.Node, t reflect.Type, in string) error {
	if node.Kind != yaml.MappingNode {
		return nil // the decoder reports the wrong kind
	}
	fields := map[string]reflect.Type{}
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			fields[name] = t.Field(i).Type
			names = append(names, name)
		}
	}
	unmarshaler := reflect.TypeFor[yaml.Unmarshaler]()
	for i := 0; i+1 < len(node.Content); i += 2 {
		k := node.Content[i]
		ft, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("line %d: %sunknown key %q (keys: %s)", k.Line, in, k.Value, strings.Join(names, ", "))
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[yaml.Node]() && !reflect.PointerTo(ft).Implements(unmarshaler) {
			if err := knownKeys(node.Content[i+1], ft, k.Value+": "); err != nil {
				return err
			}
		}
	}
	return nil
}

// Extends is the spec's extends key as written ("" when absent): the
// caller resolves it to the base it passes to Build.
func (s Spec) Extends() string { return s.form.Extends }

// Line is the line the spec starts on in its file (0 when not read from
// YAML).
func (s Spec) Line() int { return s.line }

// Build returns the policy the spec writes, widening base (policy.Default(),
// or what its extends names). Relative paths in it are relative to dir;
// with dir "" they are errors. Errors match ErrConfig and name the line.
// The result is as written, not normalized.
func (s Spec) Build(dir string, base Policy) (Policy, error) {
	return s.form.build(dir, fmt.Sprintf("line %d", s.line), base)
}

func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (write 30s, 5m, 1h)", s)
	}
	return d, nil
}

// DecodeYAMLFile decodes the YAML file at path (at most 1 MiB, a regular
// file) into v strictly: unknown keys, and any document after the first,
// are errors naming the file. An empty file leaves v as it is.
func DecodeYAMLFile(path string, v any) error {
	f, _, err := OpenRegular(path)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return err
	}
	if len(data) > maxFile {
		return fmt.Errorf("%s is larger than %d bytes", path, maxFile)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			// One line: yaml lists each problem on a line of its own.
			return fmt.Errorf("%s: %s", path, strings.Join(te.Errors, "; "))
		}
		return fmt.Errorf("%s: %v", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: more than one YAML document: keep one per file", path)
	}
	return nil
}

// OpenRegular opens a file hutch reads its settings from, and refuses,
// before reading, what is not a regular file (a FIFO would block the
// start, a device never end), saying which it was. The FileInfo is the
// open file's (not the path's, which may have changed since). A missing
// file matches fs.ErrNotExist.
func OpenRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		kind := "a special file"
		switch t := fi.Mode().Type(); {
		case t&fs.ModeDir != 0:
			kind = "a directory"
		case t&fs.ModeNamedPipe != 0:
			kind = "a named pipe"
		case t&fs.ModeDevice != 0:
			kind = "a device"
		case t&fs.ModeSocket != 0:
			kind = "a socket"
		}
		err = fmt.Errorf("%s is %s, not a regular file", path, kind)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}
