package container

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/cfgerr"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Runtime names the container runtime whose command-line program hutch
// drives.
type Runtime string

// The runtimes hutch knows.
const (
	Docker Runtime = "docker" // the docker CLI (also Docker-compatible engines)
	Podman Runtime = "podman" // the podman CLI
	Apple  Runtime = "apple"  // Apple's `container` CLI on macOS
)

// Program is the runtime's command-line program: docker, podman or
// container.
func (r Runtime) Program() string {
	if r == Apple {
		return "container"
	}
	return string(r)
}

// Defaults.
const (
	// DefaultWorkDir is the working directory (and the file tools' root)
	// when Options.WorkDir is empty.
	DefaultWorkDir = "/workspace"
	// DefaultPidsLimit bounds the container's processes when
	// Options.PidsLimit is zero.
	DefaultPidsLimit = 512
	// NoPidsLimit, as Options.PidsLimit, removes the process limit.
	NoPidsLimit = -1
	// MinPidsLimit is the smallest PidsLimit with the helper: the limit is
	// the container's, and the helper's own processes and threads count
	// against it: its init and server about 20, each reaper about 9 (one
	// per command running, and one more starting beside the first).
	MinPidsLimit = 96
	// HelperPath is where the helper binary is mounted in the container.
	HelperPath = "/.hutch/hutch-helper"
	// LabelID is the label carrying a sandbox's identity (its name);
	// Reconnect finds containers by it, never by name.
	LabelID = "hutch.sandbox.id"
	// LabelRuntime is the label naming the runtime that made the
	// container, so a reconnect never crosses runtimes.
	LabelRuntime = "hutch.sandbox.runtime"
	// LabelConfig carries the container's ConfigHash: a reconnect to a
	// container made with other options is refused.
	LabelConfig = "hutch.sandbox.config"
	// LabelOwner names the hutch process a container is meant to die
	// with (see Owner): every container but a Reconnect one carries it,
	// and GC removes those whose owner is gone.
	LabelOwner = "hutch.sandbox.owner"
)

// Bind makes a path of the engine's machine visible in the container.
type Bind struct {
	// Source is an absolute path on the machine the engine runs on (this
	// machine for a local engine).
	Source string
	// Target is the absolute path inside the container.
	Target string
	// Writable makes the bind read-write; binds are read-only otherwise.
	Writable bool
}

// ParseBind reads a bind as written on a command line: "SRC" (the same
// path inside), "SRC:DST", or either followed by ":ro" (the default) or
// ":rw". Both paths must be absolute. Errors match sandbox.ErrConfig.
func ParseBind(s string) (Bind, error) {
	parts := strings.Split(s, ":")
	b := Bind{}
	switch last := parts[len(parts)-1]; {
	case len(parts) > 1 && (last == "ro" || last == "rw"):
		b.Writable = last == "rw"
		parts = parts[:len(parts)-1]
	}
	switch len(parts) {
	case 1:
		b.Source, b.Target = parts[0], parts[0]
	case 2:
		b.Source, b.Target = parts[0], parts[1]
	default:
		return Bind{}, configErr("bind %q: write SRC[:DST][:ro|rw]", s)
	}
	if !path.IsAbs(b.Source) || !path.IsAbs(b.Target) || strings.ContainsAny(s, ",\n\x00") {
		return Bind{}, configErr("bind %q: give absolute paths without ',', as SRC[:DST][:ro|rw]", s)
	}
	b.Source, b.Target = path.Clean(b.Source), path.Clean(b.Target)
	return b, nil
}

// Mask hides a path in the container: a directory becomes an empty
// read-only one, a file an empty unreadable one (the null device). Masks
// apply over binds, so a secret inside a bound directory stays out of
// sight.
type Mask struct {
	// Target is the absolute path inside the container.
	Target string
	// File says the path is a file (otherwise a directory).
	File bool
}

// Engine says which engine the runtime's program talks to; the zero value
// is the program's own default (DOCKER_HOST, the current context...).
type Engine struct {
	// Context is a docker context (--context) or a podman connection
	// (--connection).
	Context string
	// Host is a docker daemon address (--host, e.g. ssh://me@build or
	// tcp://10.0.0.5:2376) or a podman service URL (--url).
	Host string
}

func (e Engine) remote() bool { return e.Context != "" || e.Host != "" }

// Options configure a container sandbox. Every hardening is on unless a
// field says otherwise; the zero value of each opt-out keeps it.
type Options struct {
	// Image is the image to run (required; there is no default image).
	Image string
	// Runtime is docker (the default), podman or apple.
	Runtime Runtime
	// Program is the runtime's program, a path or a name looked up in
	// PATH; "" means the runtime's own (docker, podman, container).
	Program string
	// Engine is the engine the program talks to (remote engines work).
	Engine Engine
	// RuntimeArgs are extra global flags for the program, placed before
	// the subcommand (for example podman's --runtime runc).
	RuntimeArgs []string

	// WorkDir is the working directory inside the container and the root
	// of the file tools; DefaultWorkDir when empty. Under a read-only root
	// it is a fresh writable tmpfs unless a bind covers it.
	WorkDir string
	// Binds are host paths shown in the container, read-only unless
	// marked Writable.
	Binds []Bind
	// Masks hide paths inside binds (see Mask). Not available on Apple.
	Masks []Mask
	// Network is "none" (the default: only loopback), "all" (the runtime's
	// default bridge network) or the name of a network to join.
	Network string
	// CapAdd lists capabilities given back after all are dropped
	// (NET_BIND_SERVICE, ...).
	CapAdd []string
	// Memory bounds the container's memory, in bytes (0: no limit).
	Memory int64
	// CPUs bounds the container's CPU share (1.5 = one and a half cores;
	// 0: no limit).
	CPUs float64
	// PidsLimit bounds the container's processes: 0 means
	// DefaultPidsLimit, NoPidsLimit removes the bound.
	PidsLimit int
	// CPUTime, FileSize and OpenFiles become the per-process rlimits cpu
	// (whole seconds), fsize (bytes) and nofile; zero leaves each as the
	// runtime sets it. They bind hutch's helper in the container too.
	CPUTime   time.Duration
	FileSize  int64
	OpenFiles int
	// User runs everything as this user (NAME, UID or UID:GID); "" is the
	// image's user.
	User string
	// Env is added to every command's environment (PATH, HOME and LANG as
	// the image sets them). It is passed per command, never on a command
	// line that other users' ps could show.
	Env map[string]string
	// Name names the container and its identity label; "hutch-<random>"
	// when empty.
	Name string
	// Reconnect finds an existing container by its identity label (Name)
	// instead of creating one, and keeps it when the sandbox closes.
	// Not available on Apple.
	Reconnect bool

	// WritableRoot turns off the read-only root filesystem.
	WritableRoot bool
	// AllowNewPrivileges turns off no-new-privileges (setuid programs
	// could gain privileges again).
	AllowNewPrivileges bool
	// KeepCapabilities keeps the runtime's default capabilities instead
	// of dropping them all.
	KeepCapabilities bool

	// Helper is the hutch binary mounted into the container as its fast
	// path; "" means this program (os.Executable) on Linux. For a remote
	// engine it is a path on the engine's machine and must be set, or the
	// sandbox uses one runtime exec per operation.
	Helper string
	// NoHelper forces one runtime exec per operation (the fallback used
	// when the helper cannot run in the image).
	NoHelper bool

	// Protect and Unprotect change the protected paths kept read-only
	// inside each writable bind (policy.DefaultProtected: .git/hooks,
	// .vscode, shell rc files...), as policy.Policy's fields of the same
	// names do: those that exist when the container starts get read-only
	// binds, and the helper's file operations refuse them at any depth.
	Protect, Unprotect []string

	protected    []string // the effective list (normalize)
	protectBinds []Bind   // the read-only binds that keep them (New)
	// supervise are the roots where some are missing (New): the helper
	// supervises commands there (HelperArgs).
	supervise []string
}

// The option syntaxes. They are compiled on first use, not at program
// start: every hutch process (the CLI, its helper roles) links this
// package, and compiling them in init cost ~1.8 ms and ~2000 allocations on
// each start, for options that are checked only when a container sandbox is
// made.
var (
	nameRE    = lazyRegexp(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)
	userRE    = lazyRegexp(`^[a-zA-Z0-9_][a-zA-Z0-9_.-]*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]*)?$`)
	capRE     = lazyRegexp(`^(CAP_)?[A-Z][A-Z_]*$`)
	networkRE = lazyRegexp(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
)

// lazyRegexp returns a function that compiles expr on its first call and
// returns the same *regexp.Regexp on every call; expr must be valid (as
// for regexp.MustCompile, it panics otherwise, on first use).
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: container: %s", sandbox.ErrConfig, fmt.Sprintf(format, args...))
}

// normalize fills the defaults and checks every field; errors match
// sandbox.ErrConfig, one line each, naming the fix. It does not look for
// the runtime's program (New does).
func (o Options) normalize() (Options, error) {
	if o.Image == "" {
		return o, configErr("no image: set the image to run (for example debian:stable-slim); there is no default")
	}
	if strings.HasPrefix(o.Image, "-") || strings.ContainsAny(o.Image, " \t\n\x00") {
		return o, configErr("image %q is not an image reference", o.Image)
	}
	switch o.Runtime {
	case "":
		o.Runtime = Docker
	case Docker, Podman, Apple:
	default:
		return o, configErr("unknown runtime %q: choose docker, podman or apple", o.Runtime)
	}
	if o.Runtime == Apple && o.Reconnect {
		return o, configErr("reconnect is not supported on Apple's container runtime: leave it off")
	}
	if o.Runtime == Apple && o.Engine.remote() {
		return o, configErr("Apple's container runtime has no engine selection: leave Engine empty")
	}
	if o.Engine.Context != "" && o.Engine.Host != "" {
		return o, configErr("engine: set a context or a host, not both")
	}
	if o.WorkDir == "" {
		o.WorkDir = DefaultWorkDir
	}
	if err := checkContainerPath("working directory", o.WorkDir); err != nil {
		return o, err
	}
	o.WorkDir = path.Clean(o.WorkDir)
	for i, b := range o.Binds {
		if !path.IsAbs(b.Source) || strings.ContainsAny(b.Source, ",:\n\x00") {
			return o, configErr("bind source %q: give an absolute path without ',' or ':'", b.Source)
		}
		if err := checkContainerPath("bind target", b.Target); err != nil {
			return o, err
		}
		o.Binds[i].Source, o.Binds[i].Target = path.Clean(b.Source), path.Clean(b.Target)
	}
	protected, err := policy.ProtectedPaths(o.Protect, o.Unprotect)
	if err != nil {
		return o, cfgerr.Under(sandbox.ErrConfig, err)
	}
	o.protected = protected
	for i, m := range o.Masks {
		if err := checkContainerPath("masked path", m.Target); err != nil {
			return o, err
		}
		o.Masks[i].Target = path.Clean(m.Target)
	}
	switch {
	case o.Network == "":
		o.Network = "none"
	case o.Network == "none" || o.Network == "all":
	case !networkRE().MatchString(o.Network):
		return o, configErr("network %q: choose none, all or the name of a network", o.Network)
	}
	for _, c := range o.CapAdd {
		if !capRE().MatchString(c) {
			return o, configErr("capability %q: write it like NET_BIND_SERVICE", c)
		}
	}
	switch {
	case math.IsNaN(o.CPUs) || math.IsInf(o.CPUs, 0):
		// NaN would pass every comparison below as false: no bound.
		return o, configErr("cpus %v is not a CPU share: give a number such as 1.5", o.CPUs)
	case o.Memory < 0 || o.CPUs < 0 || o.FileSize < 0 || o.OpenFiles < 0 || o.CPUTime < 0:
		return o, configErr("limits must not be negative")
	case o.Memory != 0 && o.Memory < 6<<20:
		return o, configErr("memory limit of %d bytes is below the runtimes' 6 MiB minimum", o.Memory)
	case o.OpenFiles != 0 && o.OpenFiles < boundary.MinOpenFiles:
		return o, configErr("open-files limit %d is too small to start a command: give at least %d", o.OpenFiles, boundary.MinOpenFiles)
	case o.CPUTime > boundary.MaxCPUSeconds*time.Second:
		return o, configErr("cpu time limit %v is more than the largest hutch sets (%ds)", o.CPUTime, boundary.MaxCPUSeconds)
	case o.CPUTime != 0 && o.CPUTime < time.Second:
		return o, configErr("cpu time limit %v: the kernel counts whole seconds; give at least 1s", o.CPUTime)
	case o.PidsLimit < NoPidsLimit:
		return o, configErr("pids limit %d: give a positive number, 0 for %d, or NoPidsLimit", o.PidsLimit, DefaultPidsLimit)
	case o.PidsLimit > 0 && o.PidsLimit < MinPidsLimit && !o.NoHelper && o.Runtime != Apple:
		return o, configErr("pids limit %d is too small with hutch's helper, whose processes and threads in the container (30 to 40, and about 9 more for each command running beside another) count against it: give at least %d, or no helper", o.PidsLimit, MinPidsLimit)
	}
	if o.PidsLimit == 0 {
		o.PidsLimit = DefaultPidsLimit
	}
	if o.User != "" && !userRE().MatchString(o.User) {
		return o, configErr("user %q: give NAME, UID or UID:GID", o.User)
	}
	for k, v := range o.Env {
		if err := sandbox.CheckEnvVar(k, v); err != nil {
			return o, err
		}
	}
	if o.Name == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		o.Name = "hutch-" + hex.EncodeToString(b[:])
	}
	if !nameRE().MatchString(o.Name) {
		return o, configErr("name %q: use letters, digits, '_', '.' and '-', starting with a letter or digit", o.Name)
	}
	return o, nil
}

func checkContainerPath(what, p string) error {
	switch {
	case !path.IsAbs(p):
		return configErr("%s %q must be an absolute path in the container", what, p)
	case path.Clean(p) == "/":
		return configErr("%s cannot be / (the whole container)", what)
	case strings.ContainsAny(p, ",:\n\x00"):
		return configErr("%s %q: ',' and ':' cannot be passed to the runtime", what, p)
	case path.Clean(p) == path.Dir(HelperPath) || strings.HasPrefix(path.Clean(p), path.Dir(HelperPath)+"/"):
		return configErr("%s %q is hutch's own place in the container: choose another", what, p)
	}
	return nil
}
