package main

import (
	"fmt"
	"slices"

	"github.com/spf13/pflag"

	"github.com/hutchsandbox/hutch/sandbox/container"
)

// containerFlags are the container tier's flags, shared by run and mcp.
// The policy flags (--read, --write, --network, the limits...) apply too:
// they are mapped onto the container's binds and runtime flags.
type containerFlags struct {
	o                                                          container.Options
	runtime                                                    string
	binds                                                      []string
	noPidsLimit                                                bool
	writableRoot, allowNewPrivileges, keepCapabilities, noHelp bool
}

var containerFlagNames = []string{"image", "runtime", "engine-context", "engine-host", "container-name", "reconnect", "bind",
	"cap-add", "cpus", "user", "workdir", "no-pids-limit", "writable-root", "allow-new-privileges", "keep-capabilities", "helper", "no-helper"}

func (f *containerFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.o.Image, "image", "", "container: the image to run (required; no default)")
	// No default here: an unset runtime is "" so that a config file's
	// runtime applies, and the container package then picks docker.
	fl.StringVar(&f.runtime, "runtime", "", "container: docker (default), podman or apple")
	fl.StringVar(&f.o.Engine.Context, "engine-context", "", "container: docker context or podman connection to use (remote engines)")
	fl.StringVar(&f.o.Engine.Host, "engine-host", "", "container: docker daemon address or podman service URL (remote engines)")
	fl.StringVar(&f.o.Name, "container-name", "", "container: name and identity label (default hutch-<random>)")
	fl.BoolVar(&f.o.Reconnect, "reconnect", false, "container: reuse the container labelled with --container-name, and keep it at the end")
	fl.StringArrayVar(&f.binds, "bind", nil, "container: show a host path inside, SRC[:DST][:ro|rw] (read-only unless rw; repeatable)")
	fl.StringSliceVar(&f.o.CapAdd, "cap-add", nil, "container: give back these capabilities after dropping all (comma-separated)")
	fl.Var((*decimalFloat)(&f.o.CPUs), "cpus", "container: CPU share, e.g. 1.5")
	fl.StringVar(&f.o.User, "user", "", "container: run as NAME, UID or UID:GID")
	fl.StringVar(&f.o.WorkDir, "workdir", "", "container: working directory inside (default /workspace, a fresh tmpfs)")
	fl.BoolVar(&f.noPidsLimit, "no-pids-limit", false, "container: opt out of the 512-process limit")
	fl.BoolVar(&f.writableRoot, "writable-root", false, "container: opt out of the read-only root filesystem")
	fl.BoolVar(&f.allowNewPrivileges, "allow-new-privileges", false, "container: opt out of no-new-privileges")
	fl.BoolVar(&f.keepCapabilities, "keep-capabilities", false, "container: opt out of dropping every capability")
	fl.StringVar(&f.o.Helper, "helper", "", "container: hutch binary to mount as the fast path (default: this one; for a remote engine, a path there)")
	fl.BoolVar(&f.noHelp, "no-helper", false, "container: one runtime exec per operation instead of hutch's helper")
}

func containerFlagsSet(fl *pflag.FlagSet) bool {
	return slices.ContainsFunc(containerFlagNames, fl.Changed)
}

// options are the flags as container options (before any policy).
func (f *containerFlags) options() (container.Options, error) {
	o := f.o
	o.Runtime = container.Runtime(f.runtime)
	o.WritableRoot, o.AllowNewPrivileges, o.KeepCapabilities, o.NoHelper = f.writableRoot, f.allowNewPrivileges, f.keepCapabilities, f.noHelp
	if f.noPidsLimit {
		o.PidsLimit = container.NoPidsLimit
	}
	for _, b := range f.binds {
		bind, err := container.ParseBind(b)
		if err != nil {
			return o, fmt.Errorf("--bind: %w", err)
		}
		o.Binds = append(o.Binds, bind)
	}
	return o, nil
}
