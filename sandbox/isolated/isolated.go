// Package isolated is hutch's kernel-isolated tier on Linux: a command runs
// under a policy (package policy) enforced by independent layers —
//
//   - new user, mount, PID, IPC, UTS and (unless the network is "all")
//     network namespaces;
//   - a new root made only of the policy's paths (read-only or writable
//     binds, denied paths masked), a fresh /proc, a minimal /dev and a
//     private /tmp;
//   - a Landlock ruleset mirroring the policy (best effort by kernel ABI);
//   - a seccomp filter refusing ptrace, mounts, namespaces, keyrings, bpf,
//     perf events, modules, kexec, userfaultfd, io_uring, and unix, packet
//     and raw sockets;
//   - no_new_privs and every capability dropped;
//   - resource limits and priority;
//
// — and when the command ends, times out or is cancelled, everything it
// started dies with the PID namespace.
//
// The program using this package must call helper.Main at the start of
// main: the sandbox's init and exec helpers are this same binary.
package isolated

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// defaultPath is the command's PATH when the policy sets no environment.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Run executes cmd once in a fresh sandbox built from pol, and tears the
// sandbox down. pol is normalized against the current directory (relative
// paths) first. cmd.Timeout, when set, overrides pol.Timeout; cmd.Dir, when
// set, overrides pol.Dir; cmd.Env adds to the policy's environment.
//
// err is non-nil when the sandbox could not be built (configuration, an
// unsupported host) — nothing ran then. What the command did is in the
// Result, including Limit when a resource limit stopped it.
func Run(ctx context.Context, pol policy.Policy, cmd sandbox.Command) (sandbox.Result, error) {
	if err := Supported(); err != nil {
		return sandbox.Result{}, err
	}
	if !helper.Ready() {
		return sandbox.Result{}, fmt.Errorf("%w: the isolated tier re-executes this program as its sandbox helper: call helper.Main() at the start of main (and of TestMain)", sandbox.ErrConfig)
	}
	cwd, _ := os.Getwd()
	if cmd.Dir != "" {
		pol.Dir = cmd.Dir
	}
	pol, err := pol.Normalize(cwd)
	if err != nil {
		return sandbox.Result{}, err
	}
	if cmd.Timeout == 0 {
		cmd.Timeout = pol.Timeout
	}
	cmd, err = cmd.Validate()
	if err != nil {
		return sandbox.Result{}, err
	}
	job := helper.Job{Policy: pol, Argv: cmd.Args, Dir: pol.Dir, HostUID: os.Getuid(), HostGID: os.Getgid()}
	if cmd.Shell != "" {
		job.Argv = []string{"/bin/sh", "-c", cmd.Shell}
	}
	job.Env = sandbox.EnvList(sandbox.MergeEnv(baseEnv(pol), cmd.Env))
	return start(ctx, job, cmd)
}

// baseEnv is the policy's environment, or PATH, HOME and LANG.
func baseEnv(pol policy.Policy) map[string]string {
	if pol.Env != nil {
		return pol.Env
	}
	env := map[string]string{"PATH": defaultPath, "HOME": pol.Dir}
	if v := os.Getenv("LANG"); v != "" {
		env["LANG"] = v
	}
	return env
}

func start(ctx context.Context, job helper.Job, cmd sandbox.Command) (sandbox.Result, error) {
	jobR, jobW, err := os.Pipe()
	if err != nil {
		return sandbox.Result{}, err
	}
	defer jobR.Close()
	defer jobW.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return sandbox.Result{}, err
	}
	defer statusR.Close()
	defer statusW.Close()

	stdout := &sandbox.TailBuffer{Max: cmd.MaxOutput}
	stderr := &sandbox.TailBuffer{Max: cmd.MaxOutput}
	tctx, cancel := context.WithTimeout(ctx, cmd.Timeout)
	defer cancel()
	c := exec.CommandContext(tctx, "/proc/self/exe")
	c.Args = []string{helper.InitName}
	c.Env = []string{}
	c.Stdin = cmd.Stdin
	c.Stdout = tee(stdout, cmd.Stdout)
	c.Stderr = tee(stderr, cmd.Stderr)
	c.ExtraFiles = []*os.File{jobR, statusW}
	c.SysProcAttr = namespaces(job.Policy.Network == policy.NetworkAll, job.HostUID, job.HostGID)
	// Killing the init kills the PID namespace: every process in it.
	c.Cancel = func() error { return c.Process.Kill() }
	c.WaitDelay = 5 * time.Second
	// Memory and process limits go to control groups where hutch may
	// create them; elsewhere the exec helper falls back to rlimits.
	cg, cgErr := newCgroup(job.Policy.Limits)
	if cg != nil {
		defer cg.remove()
		job.MemoryByCgroup, job.PidsByCgroup = cg.memory, cg.pids
	} else if cgErr != nil && job.Policy.Limits.Processes > 0 && os.Getuid() == 0 {
		// The rlimit fallback does not count processes of the host's
		// root: refuse rather than run unbounded.
		return sandbox.Result{}, fmt.Errorf("%w: a process limit needs a pids cgroup here (hutch runs as root, where RLIMIT_NPROC does not apply): %v", sandbox.ErrUnsupported, cgErr)
	}
	begin := time.Now()
	if err := c.Start(); err != nil {
		return sandbox.Result{}, fmt.Errorf("%w: starting the sandbox: %v", sandbox.ErrUnsupported, err)
	}
	jobR.Close()
	statusW.Close()
	if cg != nil {
		// The init waits for its job before starting anything, so every
		// process of the sandbox is born inside the groups.
		if err := cg.add(c.Process.Pid); err != nil {
			_ = c.Process.Kill()
			_ = c.Wait()
			return sandbox.Result{}, err
		}
	}
	if err := json.NewEncoder(jobW).Encode(job); err != nil {
		_ = c.Process.Kill()
		_ = c.Wait()
		return sandbox.Result{}, fmt.Errorf("handing the job to the sandbox: %w", err)
	}
	jobW.Close()
	werr := c.Wait()
	var st helper.Status
	statusData, _ := io.ReadAll(io.LimitReader(statusR, 1<<20))
	haveStatus := json.Unmarshal(bytes.TrimSpace(statusData), &st) == nil
	res := sandbox.Result{
		Duration:        time.Since(begin),
		Stdout:          stdout.Bytes(),
		Stderr:          stderr.Bytes(),
		StdoutTruncated: stdout.Truncated(),
		StderrTruncated: stderr.Truncated(),
		StdoutSize:      stdout.Total(),
		StderrSize:      stderr.Total(),
	}
	switch {
	case ctx.Err() != nil:
		res.ExitCode, res.Signal = 128+int(unix.SIGKILL), "SIGKILL"
		return res, fmt.Errorf("isolated exec: %w", ctx.Err())
	case errors.Is(tctx.Err(), context.DeadlineExceeded) && !haveStatus:
		res.ExitCode, res.Signal, res.TimedOut = 128+int(unix.SIGKILL), "SIGKILL", true
		return res, nil
	case haveStatus && st.SetupError != "":
		return res, fmt.Errorf("%w: building the sandbox: %s", sandbox.ErrUnsupported, st.SetupError)
	case !haveStatus:
		return res, fmt.Errorf("the sandbox ended without a report (%v)", werr)
	}
	res.ExitCode = st.ExitCode
	if st.Signal != 0 {
		res.ExitCode, res.Signal = 128+st.Signal, unix.SignalName(unix.Signal(st.Signal))
	}
	if cg != nil {
		res.Limit = cg.hit()
	}
	if res.Limit == "" {
		res.Limit = limitFor(res, st, job.Policy.Limits)
	}
	return res, nil
}

// limitFor names the rlimit behind a command's end, when one is: the
// command itself, or a child whose death a shell reported as 128+N, got
// SIGXCPU or SIGXFSZ; or it used its whole CPU time; or, under an rlimit
// memory bound, it said it ran out of memory.
func limitFor(res sandbox.Result, st helper.Status, l policy.Limits) string {
	code := res.ExitCode
	switch {
	case l.CPUTime > 0 && (code == 128+int(unix.SIGXCPU) ||
		(code == 128+int(unix.SIGKILL) && time.Duration(st.CPUMillis)*time.Millisecond >= l.CPUTime)):
		return "cpu_time"
	case l.FileSize > 0 && code == 128+int(unix.SIGXFSZ):
		return "file_size"
	case l.Memory > 0 && code != 0 && saysOutOfMemory(res.Stderr):
		return "memory"
	}
	return ""
}

// saysOutOfMemory recognizes the usual words of a failed allocation (C's
// strerror(ENOMEM), Go's runtime, Python, C++), for hosts where the memory
// bound is an rlimit and no cgroup counts OOM kills.
func saysOutOfMemory(stderr []byte) bool {
	s := string(stderr)
	for _, w := range []string{"Cannot allocate memory", "out of memory", "MemoryError", "std::bad_alloc", "memory exhausted"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func tee(capture *sandbox.TailBuffer, live io.Writer) io.Writer {
	if live == nil {
		return capture
	}
	return io.MultiWriter(capture, live)
}

// namespaces are the clone settings of the sandbox's init: every namespace,
// the caller's ids mapped to root inside (root with no power outside).
func namespaces(hostNetwork bool, uid, gid int) *syscall.SysProcAttr {
	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if !hostNetwork {
		flags |= unix.CLONE_NEWNET
	}
	return &syscall.SysProcAttr{
		Cloneflags:                 flags,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: false,
		Setsid:                     true,
		Pdeathsig:                  syscall.SIGKILL,
	}
}
