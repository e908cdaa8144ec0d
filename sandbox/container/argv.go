package container

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The runtime's command lines, as pure functions of the (normalized)
// Options: the same options always give the same argv, in a fixed order,
// each flag for one reason. The argv never includes the program itself
// and never includes an environment value.

// globalArgs select the engine; they come before every subcommand.
func (o Options) globalArgs() []string {
	var a []string
	switch o.Runtime {
	case Docker:
		if o.Engine.Context != "" {
			a = append(a, "--context", o.Engine.Context)
		}
		if o.Engine.Host != "" {
			a = append(a, "--host", o.Engine.Host)
		}
	case Podman:
		if o.Engine.Context != "" {
			a = append(a, "--connection", o.Engine.Context)
		}
		if o.Engine.Host != "" {
			a = append(a, "--url", o.Engine.Host)
		}
	}
	return append(a, o.RuntimeArgs...)
}

func (o Options) cmd(sub ...string) []string { return append(o.globalArgs(), sub...) }

// keepAlive is the main process of a container that outlives its
// sandbox (Reconnect) when hutch's helper cannot be it: a shell that
// waits forever and, as PID 1, reaps orphans.
const keepAlive = `trap 'exit 0' TERM INT; while :; do sleep 3600 & wait; done`

// ReadyLine is what the main process of a watched container (see
// WatchedRunArgs) prints on its standard output once it runs.
const ReadyLine = "hutch-ready"

// keepWatch is the main process of a watched container when hutch's
// helper cannot be it: a shell that prints ReadyLine, then reads its
// standard input (kept on descriptor 3: an asynchronous command's own is
// /dev/null) to its end and exits, reaping orphans meanwhile (wait takes
// any child). A reader killed from inside is started again; only the
// end of the input ends it.
const keepWatch = `trap 'exit 0' TERM INT; exec 3<&0 </dev/null; echo ` + ReadyLine + `; while :; do cat <&3 >/dev/null & wait $! && exit 0; done`

// RunArgs is the argv that creates and starts the container named name.
// helper is the host path of the helper binary to mount (none when
// empty); asInit makes the helper the container's PID 1, otherwise a
// shell keeps the container alive.
//
// Order: identity (name, labels), network, capabilities,
// no-new-privileges, read-only root and its tmpfs mounts, process limit,
// memory and CPU, rlimits, user, binds, masks, the helper, working
// directory, entrypoint, image, command.
//
// This is the form for a container meant to outlive its sandbox
// (Reconnect) and for Apple's runtime; the others are made with
// WatchedRunArgs.
func (o Options) RunArgs(name, helper string, asInit bool) []string {
	a := append(o.cmd("run", "-d"), o.labelArgs(name, helper, "")...)
	return append(a, o.containerFlags(helper, asInit, false)...)
}

// WatchedRunArgs is the argv that creates and starts container name
// attached, for a container that must not outlive the process holding
// its standard input: `run -i --rm` (the input closes only when the
// runtime's program sees the end of its own, or dies), the signals the
// program gets left to it (--sig-proxy=false), the id written to
// cidfile, and owner (see Owner) as the LabelOwner label when not empty.
// Its main process prints ReadyLine once it runs and exits at the end of
// its input; the runtime then removes the container. Not for Apple's
// runtime.
func (o Options) WatchedRunArgs(name, helper string, asInit bool, cidfile, owner string) []string {
	a := append(o.cmd("run", "-i", "--rm", "--sig-proxy=false", "--cidfile", cidfile), o.labelArgs(name, helper, owner)...)
	return append(a, o.containerFlags(helper, asInit, true)...)
}

// labelArgs name the container and give it its labels: identity,
// runtime, configuration and, when not empty, owner.
func (o Options) labelArgs(name, helper, owner string) []string {
	a := []string{"--name", name, "--label", LabelID + "=" + name, "--label", LabelRuntime + "=" + string(o.Runtime),
		"--label", LabelConfig + "=" + o.ConfigHash(helper != "")}
	if owner != "" {
		a = append(a, "--label", LabelOwner+"="+owner)
	}
	return a
}

// ConfigHash identifies the container these options make, with or without
// hutch's helper mounted: a hash of everything RunArgs gives the runtime
// after the labels (network, capabilities, root, limits, user, binds,
// masks, working directory, image), with the helper's host path left out
// (it differs from one hutch process to the next; whether there is one
// does not). Reconnect refuses a container whose LabelConfig differs: so
// a session never uses a container wider than its options, nor one made
// with the helper (without the rlimits the helper sets per command) on
// the runtime's exec.
func (o Options) ConfigHash(withHelper bool) string {
	helper := ""
	if withHelper {
		helper = HelperPath
	}
	sum := sha256.Sum256([]byte(strings.Join(o.containerFlags(helper, false, false), "\x00")))
	return hex.EncodeToString(sum[:16])
}

// containerFlags are RunArgs after the labels; watched gives the main
// process of WatchedRunArgs.
func (o Options) containerFlags(helper string, asInit, watched bool) []string {
	var a []string
	network := o.Network
	if network == "all" {
		network = "bridge"
	}
	a = append(a, "--network", network)
	if !o.KeepCapabilities {
		a = append(a, "--cap-drop", "ALL")
	}
	for _, c := range o.CapAdd {
		a = append(a, "--cap-add", c)
	}
	if !o.AllowNewPrivileges && o.Runtime != Apple {
		a = append(a, "--security-opt", "no-new-privileges")
	}
	if !o.WritableRoot {
		a = append(a, "--read-only")
		for _, dir := range o.scratchDirs() {
			opts := ":rw,nosuid,nodev"
			if dir == o.WorkDir {
				opts = ":rw,exec,nosuid,nodev" // scripts written there run
			}
			if o.Runtime == Apple {
				opts = ""
			}
			a = append(a, "--tmpfs", dir+opts)
		}
	}
	if o.PidsLimit > 0 && o.Runtime != Apple {
		a = append(a, "--pids-limit", strconv.Itoa(o.PidsLimit))
	}
	if o.Memory > 0 {
		a = append(a, "--memory", strconv.FormatInt(o.Memory, 10))
	}
	if o.CPUs > 0 {
		a = append(a, "--cpus", strconv.FormatFloat(o.CPUs, 'f', -1, 64))
	}
	if o.Runtime != Apple {
		// With the helper, the limits perCommand names bind each command
		// alone (HelperArgs), not the whole container.
		cpuPerCommand, filesPerCommand := o.perCommand()
		if o.CPUTime > 0 && !(helper != "" && cpuPerCommand) {
			// SIGXCPU at the limit, as in the isolated tier (a result then
			// names cpu_time); SIGKILL a second later for a command that
			// catches it.
			secs := o.cpuSeconds()
			a = append(a, "--ulimit", "cpu="+strconv.FormatInt(secs, 10)+":"+strconv.FormatInt(secs+1, 10))
		}
		if o.FileSize > 0 {
			s := strconv.FormatInt(o.FileSize, 10)
			a = append(a, "--ulimit", "fsize="+s+":"+s)
		}
		if o.OpenFiles > 0 && !(helper != "" && filesPerCommand) {
			s := strconv.Itoa(o.OpenFiles)
			a = append(a, "--ulimit", "nofile="+s+":"+s)
		}
	}
	if o.User != "" {
		a = append(a, "--user", o.User)
	}
	for _, b := range append(slices.Clone(o.Binds), o.protectBinds...) {
		a = append(a, o.bindArgs(b)...)
	}
	if o.Runtime != Apple {
		for _, m := range o.Masks {
			if m.File {
				a = append(a, "--mount", "type=bind,source=/dev/null,target="+m.Target+",readonly")
			} else {
				a = append(a, "--mount", "type=tmpfs,target="+m.Target+",readonly")
			}
		}
	}
	if helper != "" {
		a = append(a, o.bindArgs(Bind{Source: helper, Target: HelperPath})...)
	}
	a = append(a, "-w", o.WorkDir)
	switch {
	case asInit && watched:
		return append(a, "--entrypoint", HelperPath, o.Image, "init", "--until-eof="+ReadyLine)
	case asInit:
		return append(a, "--entrypoint", HelperPath, o.Image, "init")
	case watched:
		return append(a, "--entrypoint", "/bin/sh", o.Image, "-c", keepWatch)
	}
	return append(a, "--entrypoint", "/bin/sh", o.Image, "-c", keepAlive)
}

// bindArgs mounts one bind: --mount on docker and podman (which fail when
// the source is missing, where -v would make an empty directory), -v on
// Apple.
func (o Options) bindArgs(b Bind) []string {
	if o.Runtime == Apple {
		mode := ":ro"
		if b.Writable {
			mode = ":rw"
		}
		return []string{"-v", b.Source + ":" + b.Target + mode}
	}
	m := "type=bind,source=" + b.Source + ",target=" + b.Target
	if !b.Writable {
		m += ",readonly"
	}
	return []string{"--mount", m}
}

// scratchDirs are the writable tmpfs mounts of a read-only root: the
// working directory and /tmp, each unless a bind already covers it.
func (o Options) scratchDirs() []string {
	var dirs []string
	for _, d := range []string{o.WorkDir, "/tmp"} {
		if !o.boundAt(d) && (len(dirs) == 0 || dirs[0] != d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// boundAt reports whether a bind's target is dir or one of its parents.
func (o Options) boundAt(dir string) bool {
	for _, b := range o.Binds {
		if b.Target == dir || strings.HasPrefix(dir, b.Target+"/") {
			return true
		}
	}
	return false
}

// HelperArgs is the argv that starts the helper's stream server in the
// running container id (once per session).
// The server is told the CPU-time and open-files limits (not on Apple's
// runtime, which sets no rlimits): it sets them on each command it starts
// rather than living under them (see RunArgs).
func (o Options) HelperArgs(id string) []string {
	a := o.cmd("exec", "-i", id, HelperPath, "serve")
	if len(o.protected) > 0 && slices.ContainsFunc(o.Binds, func(b Bind) bool { return b.Writable }) {
		// Only a host directory keeps what a command plants: the
		// container's own files go with it.
		a = append(a, "--protect="+strings.Join(o.protected, ","))
		for _, r := range o.supervise {
			a = append(a, "--supervise="+r)
		}
	}
	if o.Runtime != Apple {
		if o.CPUTime > 0 {
			a = append(a, "--cpu-time="+strconv.FormatInt(o.cpuSeconds(), 10))
		}
		if o.OpenFiles > 0 {
			a = append(a, "--open-files="+strconv.Itoa(o.OpenFiles))
		}
	}
	return append(a, o.WorkDir)
}

// serverOpenFiles is the open-files limit up to which, on the helper path,
// the limit is set on each command alone. The runtimes' default is this or
// more (1024 on podman, 1048576 on docker as usually set up).
const serverOpenFiles = 1024

// perCommand reports which of the limits hutch's helper, when it runs,
// sets on each command alone instead of the runtime on the whole container
// (see RunArgs), so that its own long-lived server is not bound by them
// (see boundary.CommandLimits): CPU time, and open files up to
// serverOpenFiles (above it the container gets the limit too: the helper
// could not raise its commands' limit above the container's, and the
// server has plenty there). None on Apple's runtime, which sets no
// rlimits.
func (o Options) perCommand() (cpu, files bool) {
	if o.Runtime == Apple {
		return false, false
	}
	return o.CPUTime > 0, o.OpenFiles > 0 && o.OpenFiles <= serverOpenFiles
}

// helperLimits reports whether the helper sets limits the container does
// not have (RunArgs with a helper): then commands must not run without it.
func (o Options) helperLimits() bool {
	cpu, files := o.perCommand()
	return cpu || files
}

// cpuSeconds is the CPU-time limit in the whole seconds rlimits count,
// rounded up.
func (o Options) cpuSeconds() int64 {
	return int64((o.CPUTime + time.Second - 1) / time.Second)
}

// ExecArgs is the argv of one command run through the runtime (the
// fallback path): interactive when stdin carries input, the environment
// from a file (never on the command line), then the command.
func (o Options) ExecArgs(id string, stdin bool, envFile string, argv ...string) []string {
	a := o.cmd("exec")
	if stdin {
		a = append(a, "-i")
	}
	if envFile != "" {
		a = append(a, "--env-file", envFile)
	}
	a = append(a, id)
	return append(a, argv...)
}

// FindArgs lists the ids of the containers carrying this sandbox's
// identity label and this runtime's label, running or not.
func (o Options) FindArgs(name string) []string {
	return o.cmd("ps", "-a", "-q", "--no-trunc",
		"--filter", "label="+LabelID+"="+name, "--filter", "label="+LabelRuntime+"="+string(o.Runtime))
}

// OwnedArgs lists the ids of this runtime's containers that carry an
// owner label (LabelOwner), running or not.
func (o Options) OwnedArgs() []string {
	return o.cmd("ps", "-a", "-q", "--no-trunc", "--filter", "label="+LabelOwner, "--filter", "label="+LabelRuntime+"="+string(o.Runtime))
}

// OwnerArgs prints, a line per container of ids, its id, its name and
// its owner label.
func (o Options) OwnerArgs(ids ...string) []string {
	return append(o.cmd("inspect", "--type", "container", "--format", `{{.Id}} {{.Name}} {{index .Config.Labels "`+LabelOwner+`"}}`), ids...)
}

// LabelArgs is the argv printing container id's label (empty when it has
// none). Not for Apple's runtime, which has no reconnect.
func (o Options) LabelArgs(id, label string) []string {
	return o.cmd("inspect", "--type", "container", "--format", `{{index .Config.Labels "`+label+`"}}`, id)
}

// StateArgs prints whether container id is running ("true"/"false"); a
// paused container counts as running (podman calls it not running): it
// runs on once unpaused. On Apple it only inspects the container (its
// exit status says whether the container exists).
func (o Options) StateArgs(id string) []string {
	if o.Runtime == Apple {
		return o.cmd("inspect", id)
	}
	return o.cmd("inspect", "--type", "container", "--format", "{{or .State.Paused .State.Running}}", id)
}

// PausedArgs prints whether container id is paused ("true"/"false").
// Not for Apple's runtime.
func (o Options) PausedArgs(id string) []string {
	return o.cmd("inspect", "--type", "container", "--format", "{{.State.Paused}}", id)
}

// ImageArgs prints the image's os/architecture ("linux/amd64").
func (o Options) ImageArgs() []string {
	return o.cmd("image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", o.Image)
}

// StartArgs starts a stopped container.
func (o Options) StartArgs(id string) []string { return o.cmd("start", id) }

// RemoveArgs removes a container, running or not, killing it at once
// (podman's rm -f would first wait 10 s for a stop signal that the
// helper, as PID 1, does not obey).
func (o Options) RemoveArgs(id string) []string {
	if o.Runtime == Podman {
		return o.cmd("rm", "-f", "-t", "0", id)
	}
	return o.cmd("rm", "-f", id)
}

// HardeningGaps lists, in plain words, every default hardening this
// sandbox does not have: what the runtime cannot honour and what the
// options turned off. Empty for docker and podman with the defaults.
func (o Options) HardeningGaps() []string {
	var gaps []string
	if o.KeepCapabilities {
		gaps = append(gaps, "capabilities: the runtime's defaults are kept (KeepCapabilities)")
	}
	if o.AllowNewPrivileges {
		gaps = append(gaps, "no-new-privileges: off (AllowNewPrivileges)")
	} else if o.Runtime == Apple {
		gaps = append(gaps, "no-new-privileges: not supported by Apple's container runtime")
	}
	if o.WritableRoot {
		gaps = append(gaps, "read-only root filesystem: off (WritableRoot)")
	} else if o.Runtime == Apple {
		gaps = append(gaps, "tmpfs under a read-only root: Apple's container runtime does not make it writable (bind a host directory read-write at the working directory, or set WritableRoot)")
	}
	switch {
	case o.PidsLimit == NoPidsLimit:
		gaps = append(gaps, "process limit: off (NoPidsLimit)")
	case o.Runtime == Apple:
		gaps = append(gaps, "process limit: not supported by Apple's container runtime")
	}
	if o.Runtime == Apple && (o.CPUTime > 0 || o.FileSize > 0 || o.OpenFiles > 0) {
		gaps = append(gaps, "rlimits (cpu time, file size, open files): not supported by Apple's container runtime")
	}
	if o.Runtime == Apple && len(o.Masks) > 0 {
		gaps = append(gaps, "hidden paths (masks): not supported by Apple's container runtime; they stay visible")
	}
	if o.Network != "none" {
		gaps = append(gaps, "network: "+o.Network+" (not isolated)")
	}
	return gaps
}

// writable lists what commands may change: the working directory and /tmp
// (tmpfs under a read-only root), and read-write binds.
func (o Options) writable() []string {
	if o.WritableRoot {
		return []string{"the whole container filesystem"}
	}
	var w []string
	for _, d := range o.scratchDirs() {
		w = append(w, d+" (temporary)")
	}
	for _, b := range o.Binds {
		if b.Writable {
			w = append(w, b.Target+" (host "+b.Source+")")
		}
	}
	return w
}
