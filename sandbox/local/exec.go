package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/hostfs"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Exec runs cmd on the host, starting in cmd.Dir under the root, as PID 1
// of a new PID namespace (see the package documentation).
func (s *Sandbox) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	cmd, err := cmd.Validate()
	if err != nil {
		return sandbox.Result{}, err
	}
	wd, cwd, err := hostfs.WorkDir(ctx, s.FS, cmd.Dir)
	if err != nil {
		return sandbox.Result{}, err
	}
	defer wd.Close()
	if err := Check(); err != nil {
		return sandbox.Result{}, err
	}
	env := tierkit.MergeEnv(tierkit.BaseEnv(), s.env, cmd.Env)
	argv := cmd.Args
	if cmd.Shell != "" {
		argv = []string{"/bin/sh", "-c", cmd.Shell}
	}
	return run(ctx, cmd, argv, wd, cwd, env)
}

// chdirPath is the directory the child changes into: the already opened wd
// through /proc/self/fd (the child inherits the descriptor; close-on-exec
// only closes it at execve, after the chdir). Without /proc it falls back
// to the host path, which a concurrent rename could redirect.
func chdirPath(wd *os.File, cwd string) string {
	p := fmt.Sprintf("/proc/self/fd/%d", wd.Fd())
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return p
	}
	return cwd
}

// run starts argv in a new PID namespace and waits for it, its timeout or
// ctx, whichever comes first.
func run(ctx context.Context, cmd sandbox.Command, argv []string, wd *os.File, cwd string, env map[string]string) (sandbox.Result, error) {
	stdout := &tierkit.TailBuffer{Max: cmd.MaxOutput}
	stderr := &tierkit.TailBuffer{Max: cmd.MaxOutput}
	start := time.Now()
	prog, code, err := tierkit.LookPath(argv[0], env["PATH"], cwd)
	if err != nil {
		return notRunnable(argv[0], code, start, cmd.Stderr), nil
	}
	tctx, cancel := context.WithTimeout(ctx, cmd.Timeout)
	defer cancel()
	// The streams are pipes of our own, copied by goroutines of our own:
	// os/exec would wait without end for a copy stuck in a caller's
	// reader or writer (see tierkit.Live, tierkit.FeedStdin).
	pipes, err := tierkit.NewPipes(cmd, stdout, stderr, nil)
	if err != nil {
		return sandbox.Result{}, err
	}
	defer pipes.Close()
	c := exec.CommandContext(tctx, prog, argv[1:]...)
	c.Args[0] = argv[0]
	c.Dir = chdirPath(wd, cwd)
	c.Env = tierkit.EnvList(env)
	c.Stdin, c.Stdout, c.Stderr = pipes.Child[0], pipes.Child[1], pipes.Child[2]
	c.SysProcAttr = namespaceAttr()
	// Killing PID 1 makes the kernel kill the whole namespace.
	c.Cancel = func() error { return c.Process.Kill() }
	if err := c.Start(); err != nil {
		if isNotRunnable(err) {
			code := 126
			if errors.Is(err, os.ErrNotExist) {
				code = 127
			}
			return notRunnable(argv[0], code, start, cmd.Stderr), nil
		}
		return sandbox.Result{}, fmt.Errorf("start %s: %w", argv[0], err)
	}
	pipes.Started()
	werr := c.Wait()
	pipes.Ended() // PID 1 is gone, and its namespace with it: the pipes end
	res := tierkit.Captured(start, stdout, stderr)
	ws, ok := c.ProcessState.Sys().(syscall.WaitStatus)
	if !ok {
		return res, fmt.Errorf("wait %s: %w", argv[0], werr)
	}
	switch {
	case ws.Exited():
		res.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		res.ExitCode = 128 + int(ws.Signal())
		res.Signal = unix.SignalName(ws.Signal())
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("exec %s: %w", argv[0], ctx.Err())
	}
	res.TimedOut = errors.Is(tctx.Err(), context.DeadlineExceeded)
	return res, nil
}

func isNotRunnable(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.EACCES) ||
		errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EISDIR) || errors.Is(err, sandbox.ErrNotExecutable)
}

// notRunnable is the result a shell would give: 127 for a missing program,
// 126 for one that cannot be executed. The message also goes to live, if set.
func notRunnable(prog string, code int, start time.Time, live io.Writer) sandbox.Result {
	why := "permission denied (not executable)"
	if code == 127 {
		why = "command not found"
	}
	msg := fmt.Sprintf("hutch: %s: %s\n", prog, why)
	if live != nil {
		_, _ = io.WriteString(live, msg)
	}
	return sandbox.Result{ExitCode: code, Stderr: []byte(msg), StderrSize: int64(len(msg)), Duration: time.Since(start)}
}

// namespaceAttr puts the command in a new session and a new PID namespace,
// with a user namespace mapping hutch's own ids when hutch is not root.
func namespaceAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{
		Setsid:     true,
		Pdeathsig:  syscall.SIGKILL,
		Cloneflags: syscall.CLONE_NEWPID,
	}
	if uid, gid := os.Getuid(), os.Getgid(); uid != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	return attr
}

var (
	checkOnce sync.Once
	checkErr  error
)

// Check reports whether this host can run local commands in a PID
// namespace. The answer (nil, or an error matching sandbox.ErrUnsupported
// that names the missing feature and the fix) is computed once per process.
func Check() error {
	checkOnce.Do(func() {
		c := exec.Command("/bin/true")
		c.SysProcAttr = namespaceAttr()
		if err := c.Run(); err != nil {
			checkErr = fmt.Errorf("%w: cannot create a PID namespace (%v); as a non-root user this needs "+
				"unprivileged user namespaces: set sysctl user.max_user_namespaces above 0 "+
				"(and kernel.unprivileged_userns_clone=1 where it exists; on Ubuntu 24.04 "+
				"kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile allowing userns for hutch), "+
				"or run as root", sandbox.ErrUnsupported, err)
		}
	})
	return checkErr
}
