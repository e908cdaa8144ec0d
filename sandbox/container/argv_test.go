package container

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

func mustNormalize(t *testing.T, o Options) Options {
	t.Helper()
	n, err := o.normalize()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func split(s string) []string { return strings.Fields(s) }

func wantArgv(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// full sets every option that reaches the run command line.
func full(rt Runtime) Options {
	return Options{
		Image: "img:1", Runtime: rt, WorkDir: "/w", Network: "all", Name: "box",
		CapAdd: []string{"NET_BIND_SERVICE"}, Memory: 512 << 20, CPUs: 1.5, PidsLimit: 128,
		CPUTime: 1500 * time.Millisecond, FileSize: 1 << 20, OpenFiles: 256, User: "1000:1000",
		Env:   map[string]string{"SECRET": "s3cret-value"},
		Binds: []Bind{{Source: "/src", Target: "/w/src"}, {Source: "/out", Target: "/out", Writable: true}},
	}
}

func TestRunArgsDockerDefaults(t *testing.T) {
	o := mustNormalize(t, Options{Image: "img", Name: "hutch-t"})
	wantArgv(t, "helper as init", o.RunArgs("hutch-t", "/h/hutch", true), split(
		"run -d --name hutch-t --label hutch.sandbox.id=hutch-t --label hutch.sandbox.runtime=docker "+cfg(o, true)+
			"--network none --cap-drop ALL --security-opt no-new-privileges "+
			"--read-only --tmpfs /workspace:rw,exec,nosuid,nodev --tmpfs /tmp:rw,nosuid,nodev "+
			"--pids-limit 512 "+
			"--mount type=bind,source=/h/hutch,target=/.hutch/hutch-helper,readonly "+
			"-w /workspace --entrypoint /.hutch/hutch-helper img init"))
	got := o.RunArgs("hutch-t", "", false)
	want := append(split(
		"run -d --name hutch-t --label hutch.sandbox.id=hutch-t --label hutch.sandbox.runtime=docker "+cfg(o, false)+
			"--network none --cap-drop ALL --security-opt no-new-privileges "+
			"--read-only --tmpfs /workspace:rw,exec,nosuid,nodev --tmpfs /tmp:rw,nosuid,nodev "+
			"--pids-limit 512 -w /workspace --entrypoint /bin/sh img -c"), keepAlive)
	wantArgv(t, "keep-alive, no helper", got, want)
	wantArgv(t, "helper, no CPU-time limit", o.HelperArgs("ID"), split("exec -i ID /.hutch/hutch-helper serve /workspace"))
	if gaps := o.HardeningGaps(); len(gaps) != 0 {
		t.Errorf("docker defaults have gaps: %q", gaps)
	}
}

// cfg is the config label RunArgs gives o's container, with a trailing
// space.
func cfg(o Options, helper bool) string {
	return "--label hutch.sandbox.config=" + o.ConfigHash(helper) + " "
}

// fullFlags is what full() gives on docker and podman alike, between the
// labels and the helper. The CPU-time and open-files rlimits are the
// container's only without the helper: with it, the helper sets them on
// each command.
func fullFlags(helper bool) string {
	rlimits := "--ulimit cpu=2:3 --ulimit fsize=1048576:1048576 --ulimit nofile=256:256 "
	if helper {
		rlimits = "--ulimit fsize=1048576:1048576 "
	}
	return "--network bridge --cap-drop ALL --cap-add NET_BIND_SERVICE --security-opt no-new-privileges " +
		"--read-only --tmpfs /w:rw,exec,nosuid,nodev --tmpfs /tmp:rw,nosuid,nodev " +
		"--pids-limit 128 --memory 536870912 --cpus 1.5 " +
		rlimits +
		"--user 1000:1000 " +
		"--mount type=bind,source=/src,target=/w/src,readonly --mount type=bind,source=/out,target=/out "
}

func TestRunArgsDockerFull(t *testing.T) {
	o := full(Docker)
	o.Engine = Engine{Context: "remote-ctx"}
	o = mustNormalize(t, o)
	wantArgv(t, "docker", o.RunArgs("box", "/h/hutch", true), split(
		"--context remote-ctx "+
			"run -d --name box --label hutch.sandbox.id=box --label hutch.sandbox.runtime=docker "+cfg(o, true)+
			fullFlags(true)+
			"--mount type=bind,source=/h/hutch,target=/.hutch/hutch-helper,readonly "+
			"-w /w --entrypoint /.hutch/hutch-helper img:1 init"))
	o.Engine = Engine{Host: "ssh://me@build"}
	wantArgv(t, "docker host", o.ExecArgs("ID", true, "/tmp/env", "cat", "f"),
		split("--host ssh://me@build exec -i --env-file /tmp/env ID cat f"))
	wantArgv(t, "helper", o.HelperArgs("ID"), split("--host ssh://me@build exec -i ID /.hutch/hutch-helper serve "+protectArg+" --cpu-time=2 --open-files=256 /w"))
	wantArgv(t, "docker, no helper", o.RunArgs("box", "", false), append(split(
		"--host ssh://me@build "+
			"run -d --name box --label hutch.sandbox.id=box --label hutch.sandbox.runtime=docker "+cfg(o, false)+
			fullFlags(false)+
			"-w /w --entrypoint /bin/sh img:1 -c"), keepAlive))
	wantArgv(t, "find", o.FindArgs("box"),
		split("--host ssh://me@build ps -a -q --no-trunc --filter label=hutch.sandbox.id=box --filter label=hutch.sandbox.runtime=docker"))
	wantArgv(t, "state", o.StateArgs("ID"), append(split("--host ssh://me@build inspect --type container --format"), "{{or .State.Paused .State.Running}}", "ID"))
	wantArgv(t, "config label", o.LabelArgs("ID", LabelConfig), []string{"--host", "ssh://me@build", "inspect", "--type", "container", "--format", `{{index .Config.Labels "hutch.sandbox.config"}}`, "ID"})
	wantArgv(t, "image", o.ImageArgs(), split("--host ssh://me@build image inspect --format {{.Os}}/{{.Architecture}} img:1"))
	wantArgv(t, "start", o.StartArgs("ID"), split("--host ssh://me@build start ID"))
	wantArgv(t, "remove", o.RemoveArgs("ID"), split("--host ssh://me@build rm -f ID"))
	wantArgv(t, "gaps", o.HardeningGaps(), []string{"network: all (not isolated)"})
}

// An open-files limit above what the helper's server is left with goes to
// the container as well (the helper cannot raise a command's limit above
// the container's); at or below it, to each command alone.
func TestRunArgsOpenFilesWithHelper(t *testing.T) {
	for _, c := range []struct {
		n         int
		container bool
	}{{16, false}, {1024, false}, {1025, true}, {1048576, true}} {
		o := mustNormalize(t, Options{Image: "img", Name: "n", OpenFiles: c.n})
		flag := fmt.Sprintf("--ulimit nofile=%d:%d", c.n, c.n)
		if got := strings.Join(o.RunArgs("n", "/h/hutch", true), " "); strings.Contains(got, flag) != c.container {
			t.Errorf("%d open files, helper: %q", c.n, got)
		}
		if got := strings.Join(o.RunArgs("n", "", false), " "); !strings.Contains(got, flag) {
			t.Errorf("%d open files, no helper: %q", c.n, got)
		}
		if got := strings.Join(o.HelperArgs("ID"), " "); !strings.HasSuffix(got, fmt.Sprintf("serve --open-files=%d /workspace", c.n)) {
			t.Errorf("%d open files: helper %q", c.n, got)
		}
	}
}

func TestRunArgsPodman(t *testing.T) {
	o := full(Podman)
	o.Engine = Engine{Host: "unix:///run/podman/podman.sock"}
	o.RuntimeArgs = []string{"--runtime", "runc", "--cgroup-manager", "cgroupfs"}
	o = mustNormalize(t, o)
	wantArgv(t, "podman", o.RunArgs("box", "", false), append(split(
		"--url unix:///run/podman/podman.sock --runtime runc --cgroup-manager cgroupfs "+
			"run -d --name box --label hutch.sandbox.id=box --label hutch.sandbox.runtime=podman "+cfg(o, false)+
			fullFlags(false)+
			"-w /w --entrypoint /bin/sh img:1 -c"), keepAlive))
	o.Engine = Engine{Context: "machine"}
	wantArgv(t, "podman connection", o.StartArgs("ID"), split("--connection machine --runtime runc --cgroup-manager cgroupfs start ID"))
	wantArgv(t, "podman remove: no stop timeout", o.RemoveArgs("ID"), split("--connection machine --runtime runc --cgroup-manager cgroupfs rm -f -t 0 ID"))
}

func TestRunArgsApple(t *testing.T) {
	o := mustNormalize(t, full(Apple))
	wantArgv(t, "apple", o.RunArgs("box", "/h/hutch", false), append(split(
		"run -d --name box --label hutch.sandbox.id=box --label hutch.sandbox.runtime=apple "+cfg(o, true)+
			"--network bridge --cap-drop ALL --cap-add NET_BIND_SERVICE "+
			"--read-only --tmpfs /w --tmpfs /tmp "+
			"--memory 536870912 --cpus 1.5 --user 1000:1000 "+
			"-v /src:/w/src:ro -v /out:/out:rw -v /h/hutch:/.hutch/hutch-helper:ro "+
			"-w /w --entrypoint /bin/sh img:1 -c"), keepAlive))
	wantArgv(t, "apple helper: no CPU-time limit to hand down", o.HelperArgs("ID"), split("exec -i ID /.hutch/hutch-helper serve "+protectArg+" /w"))
	wantArgv(t, "apple gaps", o.HardeningGaps(), []string{
		"no-new-privileges: not supported by Apple's container runtime",
		"tmpfs under a read-only root: Apple's container runtime does not make it writable (bind a host directory read-write at the working directory, or set WritableRoot)",
		"process limit: not supported by Apple's container runtime",
		"rlimits (cpu time, file size, open files): not supported by Apple's container runtime",
		"network: all (not isolated)",
	})
}

func TestRunArgsOptOuts(t *testing.T) {
	o := mustNormalize(t, Options{Image: "img", Name: "n", WritableRoot: true, AllowNewPrivileges: true,
		KeepCapabilities: true, PidsLimit: NoPidsLimit})
	wantArgv(t, "opt-outs", o.RunArgs("n", "", false), append(split(
		"run -d --name n --label hutch.sandbox.id=n --label hutch.sandbox.runtime=docker "+cfg(o, false)+
			"--network none -w /workspace --entrypoint /bin/sh img -c"), keepAlive))
	wantArgv(t, "gaps", o.HardeningGaps(), []string{
		"capabilities: the runtime's defaults are kept (KeepCapabilities)",
		"no-new-privileges: off (AllowNewPrivileges)",
		"read-only root filesystem: off (WritableRoot)",
		"process limit: off (NoPidsLimit)",
	})
}

// A bind at (or above) the working directory replaces its tmpfs; /tmp as
// the working directory gets one tmpfs, not two.
func TestScratchDirs(t *testing.T) {
	o := mustNormalize(t, Options{Image: "i", Binds: []Bind{{Source: "/p", Target: "/proj", Writable: true}}, WorkDir: "/proj/sub"})
	if got := o.scratchDirs(); !slices.Equal(got, []string{"/tmp"}) {
		t.Errorf("bound workdir: %q", got)
	}
	o = mustNormalize(t, Options{Image: "i", WorkDir: "/tmp"})
	if got := o.scratchDirs(); !slices.Equal(got, []string{"/tmp"}) {
		t.Errorf("workdir /tmp: %q", got)
	}
}

// Environment values never reach any argv hutch builds.
func TestEnvNeverInArgv(t *testing.T) {
	for _, rt := range []Runtime{Docker, Podman, Apple} {
		o := mustNormalize(t, full(rt))
		all := [][]string{o.RunArgs("box", "/h", true), o.RunArgs("box", "", false), o.HelperArgs("id"),
			o.ExecArgs("id", true, "/f", "true"), o.FindArgs("box")}
		for _, argv := range all {
			for _, a := range argv {
				if strings.Contains(a, "s3cret-value") || strings.Contains(a, "SECRET") {
					t.Errorf("%s: environment in argv %q", rt, argv)
				}
			}
		}
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"no image", Options{}, "no image"},
		{"unknown runtime", Options{Image: "i", Runtime: "lxc"}, `unknown runtime "lxc": choose docker, podman or apple`},
		{"missing program", Options{Image: "i", Program: "hutch-no-such-runtime"}, `program "hutch-no-such-runtime" was not found in PATH`},
		{"reconnect on apple", Options{Image: "i", Runtime: Apple, Reconnect: true, Program: "true"}, "reconnect is not supported on Apple"},
		{"engine on apple", Options{Image: "i", Runtime: Apple, Engine: Engine{Host: "x"}, Program: "true"}, "no engine selection"},
		{"context and host", Options{Image: "i", Engine: Engine{Context: "a", Host: "b"}}, "a context or a host, not both"},
		{"relative workdir", Options{Image: "i", WorkDir: "w"}, "must be an absolute path"},
		{"root workdir", Options{Image: "i", WorkDir: "/"}, "cannot be /"},
		{"helper dir", Options{Image: "i", WorkDir: "/.hutch"}, "hutch's own place"},
		{"bind source", Options{Image: "i", Binds: []Bind{{Source: "rel", Target: "/x"}}}, "bind source"},
		{"bind comma", Options{Image: "i", Binds: []Bind{{Source: "/a,b", Target: "/x"}}}, "bind source"},
		{"bind target", Options{Image: "i", Binds: []Bind{{Source: "/a", Target: "/x:rw"}}}, "bind target"},
		{"network", Options{Image: "i", Network: "host;rm"}, "network"},
		{"cap", Options{Image: "i", CapAdd: []string{"all; rm"}}, "capability"},
		{"memory", Options{Image: "i", Memory: 1024}, "memory limit"},
		{"negative", Options{Image: "i", CPUs: -1}, "must not be negative"},
		{"cpu time", Options{Image: "i", CPUTime: time.Millisecond}, "whole seconds"},
		{"open files", Options{Image: "i", OpenFiles: 15}, "give at least 16"},
		{"cpu time, too much", Options{Image: "i", CPUTime: (1<<32)*time.Second + time.Nanosecond}, "more than the largest"},
		{"pids", Options{Image: "i", PidsLimit: -5}, "pids limit"},
		{"pids, too few for the helper", Options{Image: "i", PidsLimit: 32}, "give at least 96, or no helper"},
		{"user", Options{Image: "i", User: "root --privileged"}, "user"},
		{"env", Options{Image: "i", Env: map[string]string{"A=B": "c"}}, "environment variable"},
		{"name", Options{Image: "i", Name: "-x"}, "name"},
		{"image flag", Options{Image: "--privileged"}, "not an image reference"},
		{"helper missing", Options{Image: "i", Helper: "/nonexistent/hutch"}, "helper /nonexistent/hutch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.o.Program == "" && c.o.Runtime != Apple {
				c.o.Program = "true" // any program in PATH
			}
			sb, err := New(context.Background(), c.o)
			if err == nil {
				sb.Close()
				t.Fatalf("New(%+v) succeeded", c.o)
			}
			if !errors.Is(err, sandbox.ErrConfig) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line matching ErrConfig and containing %q", err, c.want)
			}
		})
	}
}

// New starts nothing: a sandbox that is never used runs no program.
func TestNewIsLazy(t *testing.T) {
	sb, err := New(context.Background(), Options{Image: "i", Program: "false"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID() != "" || sb.Root() != DefaultWorkDir || !strings.HasPrefix(sb.Name(), "hutch-") {
		t.Errorf("fresh sandbox: id %q root %q name %q", sb.ID(), sb.Root(), sb.Name())
	}
	if err := sb.Close(); err != nil {
		t.Errorf("Close of an unstarted sandbox: %v", err)
	}
}

func TestInstructions(t *testing.T) {
	sb, err := New(context.Background(), Options{Image: "busybox", Program: "true", Binds: []Bind{{Source: "/data", Target: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := sb.Instructions()
	want := "You run inside a docker container (image busybox), in /workspace. There is no network access. " +
		"Only /workspace (temporary), /tmp (temporary) can be changed; everything else is read-only. " +
		"Read-only host files are at /data. At most 512 processes."
	if got != want {
		t.Errorf("Instructions:\n got  %q\n want %q", got, want)
	}
}

func TestGlobBase(t *testing.T) {
	for _, c := range []struct {
		pattern, base string
		depth         int
	}{
		{"*.go", ".", 1},
		{"b.txt", ".", 1},
		{"src/*", "src", 1},
		{"src/deep/?.txt", "src/deep", 1},
		{"src/**", "src", -1},
		{"**/*.go", ".", -1},
		{"x/*/y", "x", 2},
		{"{a,b}/c", ".", -1},
		{"a/[bc]/d/*", "a", 3},
	} {
		base, depth := globBase(c.pattern)
		if base != c.base || depth != c.depth {
			t.Errorf("globBase(%q) = %q, %d; want %q, %d", c.pattern, base, depth, c.base, c.depth)
		}
	}
}

// ConfigHash changes with every option that shapes the container, and with
// whether the helper is mounted, but not with the helper's host path, the
// name, the engine or the environment (which travels per command).
func TestConfigHash(t *testing.T) {
	base := Options{Image: "img", Name: "n"}
	hash := func(o Options, helper string) string {
		t.Helper()
		o = mustNormalize(t, o)
		args := o.RunArgs(o.Name, helper, false)
		for i, a := range args {
			if v, ok := strings.CutPrefix(a, LabelConfig+"="); ok && args[i-1] == "--label" {
				return v
			}
		}
		t.Fatalf("no %s label", LabelConfig)
		return ""
	}
	want := hash(base, "/h/a")
	for _, c := range []struct {
		name   string
		o      Options
		helper string
		same   bool // the hash must stay want
	}{
		{"another helper path", base, "/h/b", true},
		{"another name", Options{Image: "img", Name: "m"}, "/h/a", true},
		{"an environment", Options{Image: "img", Name: "n", Env: map[string]string{"K": "v"}}, "/h/a", true},
		{"another engine", Options{Image: "img", Name: "n", Engine: Engine{Context: "c"}}, "/h/a", true},
		{"no helper", base, "", false},
		{"image", Options{Image: "img2", Name: "n"}, "/h/a", false},
		{"network", Options{Image: "img", Name: "n", Network: "all"}, "/h/a", false},
		{"capability", Options{Image: "img", Name: "n", CapAdd: []string{"NET_RAW"}}, "/h/a", false},
		{"all capabilities kept", Options{Image: "img", Name: "n", KeepCapabilities: true}, "/h/a", false},
		{"new privileges", Options{Image: "img", Name: "n", AllowNewPrivileges: true}, "/h/a", false},
		{"writable root", Options{Image: "img", Name: "n", WritableRoot: true}, "/h/a", false},
		{"pids", Options{Image: "img", Name: "n", PidsLimit: 128}, "/h/a", false},
		{"memory", Options{Image: "img", Name: "n", Memory: 64 << 20}, "/h/a", false},
		{"cpus", Options{Image: "img", Name: "n", CPUs: 1}, "/h/a", false},
		{"file size", Options{Image: "img", Name: "n", FileSize: 1 << 20}, "/h/a", false},
		{"open files", Options{Image: "img", Name: "n", OpenFiles: 2048}, "/h/a", false},
		{"user", Options{Image: "img", Name: "n", User: "1000"}, "/h/a", false},
		{"bind", Options{Image: "img", Name: "n", Binds: []Bind{{Source: "/src", Target: "/w/src"}}}, "/h/a", false},
		{"writable bind", Options{Image: "img", Name: "n", Binds: []Bind{{Source: "/src", Target: "/w/src", Writable: true}}}, "/h/a", false},
		{"working directory", Options{Image: "img", Name: "n", WorkDir: "/w"}, "/h/a", false},
	} {
		switch got := hash(c.o, c.helper); {
		case c.same && got != want:
			t.Errorf("%s changed the hash", c.name)
		case !c.same && got == want:
			t.Errorf("%s left the hash as it was", c.name)
		}
	}
	// Without the helper, the CPU-time and open-files limits are the
	// container's; with it, the serving session's own (HelperArgs).
	noHelper := hash(base, "")
	for _, o := range []Options{{Image: "img", Name: "n", CPUTime: time.Second}, {Image: "img", Name: "n", OpenFiles: 64}} {
		if hash(o, "") == noHelper {
			t.Errorf("%+v without the helper left the hash as it was", o)
		}
		if hash(o, "/h/a") != want {
			t.Errorf("%+v with the helper changed the hash", o)
		}
	}
}

// A CPU-time limit hutch-helper serve cannot take (its --cpu-time=N is a
// whole number up to 4294967295) never reaches it, where the helper would
// exit 2 and the start would blame the build of hutch: normalize refuses
// it as a configuration error, or HelperArgs passes a value serve accepts.
// Origin: review 6.
func TestHelperArgsCPUTimeWithinServeBound(t *testing.T) {
	o, err := Options{Image: "i", CPUTime: 1300000 * time.Hour}.normalize()
	if err != nil {
		return // refused up front: fine
	}
	for _, a := range o.HelperArgs("ID") {
		if v, ok := strings.CutPrefix(a, "--cpu-time="); ok {
			if _, err := strconv.ParseUint(v, 10, 32); err != nil {
				t.Errorf("HelperArgs passes %s, which hutch-helper serve refuses (a whole number up to 4294967295)", a)
			}
		}
	}
}

// protectArg is how HelperArgs hands the default protected paths to the
// helper when a bind is writable.
var protectArg = "--protect=" + strings.Join(policy.DefaultProtected, ",")
