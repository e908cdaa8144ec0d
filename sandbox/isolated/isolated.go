package isolated

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/cfgerr"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/netproxy"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Run executes cmd once in a fresh sandbox built from pol, and tears the
// sandbox down. pol is normalized against the current directory (relative
// paths) first. cmd.Timeout, when set, overrides pol.Timeout; cmd.Dir,
// when set, overrides pol.Dir; cmd.Env adds to the policy's environment.
//
// Run returns once the command has ended and every process it started is
// killed. The rest of the teardown (the sandbox's PID 1 exits, its
// control groups are removed) goes on in the background: call Drain
// before the program exits, or empty groups are left behind.
//
// err is non-nil when the sandbox could not be built (configuration, an
// unsupported host) — nothing ran then. What the command did is in the
// Result, including Limit when a resource limit stopped it.
func Run(ctx context.Context, pol policy.Policy, cmd sandbox.Command) (sandbox.Result, error) {
	if cmd.Dir != "" {
		pol.Dir, cmd.Dir = cmd.Dir, ""
	}
	supervised, err := needsSupervisor(pol)
	if err != nil {
		return sandbox.Result{}, err
	}
	if pol.Network != policy.NetworkAllow && !supervised {
		return runOnce(ctx, pol, cmd)
	}
	// An allow-list needs the init's bridge to the proxy, and a protected
	// path missing in a writable directory the init's supervisor (the
	// one-shot PID 1 runs no Go): a session.
	sb, err := New(ctx, Options{Policy: pol})
	if err != nil {
		return sandbox.Result{}, err
	}
	// The command's end is the result; the session's (its init's exit,
	// its groups' removal) goes on in the background (see Drain).
	defer inBackground(func() { _ = sb.Close() })
	// The init runs the command itself (no runner to start) only when no
	// rlimit is needed: rlimits are per process, and the init's own would
	// bind it, and its supervisor, too.
	l := sb.pol.Limits.Enforced()
	final := l.CPUTime == 0 && l.FileSize == 0 && l.OpenFiles == 0 &&
		(l.Memory == 0 || sb.cg != nil && sb.cg.memory) && (l.Processes == 0 || sb.cg != nil && sb.cg.pids)
	return sb.exec(ctx, cmd, final)
}

// needsSupervisor reports whether pol's commands need the session's
// supervisor (helper.NeedsSupervision). A policy that does not normalize
// goes to runOnce, which says what is wrong with it. One that needs the
// supervisor and denies /proc/self cannot have it (a session's helpers
// and its supervisor work through /proc): an error, never a run with
// the protected paths unkept.
func needsSupervisor(pol policy.Policy) (bool, error) {
	cwd, _ := os.Getwd()
	pol, err := pol.Normalize(cwd)
	if err == nil {
		pol, err = realStartDir(pol) // as prepare names it
	}
	if err != nil || !helper.NeedsSupervision(pol) {
		return false, nil
	}
	for _, d := range pol.Deny {
		if d == "/proc" || d == "/proc/self" || strings.HasPrefix(d, "/proc/self/") || d == "/proc/thread-self" {
			return true, fmt.Errorf("%w: the policy denies %s, and a protected path is missing in a writable directory: keeping it from being made needs /proc; name the protected paths the commands may make with unprotect, or make them before the run", sandbox.ErrConfig, d)
		}
	}
	return true, nil
}

// runOnce is Run without a session: this process forks the sandbox's PID
// 1 itself (helper.RunOnce), which saves starting a helper process.
func runOnce(ctx context.Context, pol policy.Policy, cmd sandbox.Command) (sandbox.Result, error) {
	// The walk of /proc the root needs goes on while the groups are made.
	proc := helper.WalkProcAhead(pol)
	oneShotStarted()
	pol, job, cg, err := prepare(pol)
	if err != nil {
		return sandbox.Result{}, err
	}
	// The groups go once PID 1 has left them (OneShot.Exited), which may
	// be after this returns (see Drain).
	var exited chan struct{} // made when PID 1 is started
	defer func() {
		if exited == nil || cg == nil {
			cg.remove()
			return
		}
		inBackground(func() {
			<-exited
			cg.remove()
			makeSpare(job.Policy.Limits)
		})
	}()
	// PID 1 joins the commands' group itself (cgroup.selfJoin): the
	// command starts there, with no group of its own to join.
	var groups []*os.File
	if cg != nil {
		if groups, err = cg.selfJoin(); err != nil {
			return sandbox.Result{}, err
		}
		defer wire.CloseFiles(groups)
	}
	limits := cg.files().Open()
	defer limits.Close()
	return runCommand(ctx, cmd, pol, baseEnv(pol), limits, func(ctx context.Context, spec *wire.Job, files [3]*os.File, timeout time.Duration) (wire.Status, bool, error) {
		j := job
		j.Argv, j.Env = spec.Argv, spec.Env
		exited = make(chan struct{})
		opt := helper.OneShot{Groups: groups, Timeout: timeout, Proc: proc, Exited: func() { close(exited) }}
		st, timedOut, err := helper.RunOnce(ctx, j, files[0], files[1], files[2], opt)
		if errors.Is(err, sandbox.ErrUnsupported) {
			if serr := Supported(); serr != nil {
				err = serr
			}
		}
		return st, timedOut, err
	})
}

// checkStartDir checks on the host that pol's start directory exists and
// is a directory the sandbox will hold. Inside, where /tmp is private and
// a link is not followed, a missing one would be reported under another
// name.
func checkStartDir(pol policy.Policy) error {
	if err := checkLink(pol, pol.Dir, "start directory", pol.CanRead); err != nil {
		return err
	}
	fi, err := os.Stat(pol.Dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: start directory %s does not exist", sandbox.ErrNotFound, policy.ShowPath(pol.Dir))
	case err != nil:
		return fmt.Errorf("%w: start directory %s: %v", sandbox.ErrConfig, policy.ShowPath(pol.Dir), errors.Unwrap(err))
	case !fi.IsDir():
		return fmt.Errorf("%w: start directory %s is not a directory", sandbox.ErrConfig, policy.ShowPath(pol.Dir))
	}
	return nil
}

// realStartDir is pol with its start directory named as the kernel names
// it, through no symbolic link (a shell's $PWD may go through one). The
// protected paths of a start directory are kept by its name: under a
// name through a link, their copies would be passed over (the root is
// built without following links) and the supervisor would never match
// the kernel's paths. The real directory must be one the policy gives.
func realStartDir(pol policy.Policy) (policy.Policy, error) {
	real, err := filepath.EvalSymlinks(pol.Dir)
	if err != nil || real == pol.Dir {
		return pol, nil // checkStartDir has said what is wrong with one that is not there
	}
	if !pol.CanRead(real) {
		return pol, fmt.Errorf("%w: start directory %s leads through a symbolic link to %s, which the policy does not give: give %s", sandbox.ErrConfig, policy.ShowPath(pol.Dir), policy.ShowPath(real), policy.ShowPath(real))
	}
	pol.Dir = real
	return pol, nil
}

// checkLink refuses a policy path (what: "writable path") that is a
// symbolic link to somewhere the policy does not give (has): the sandbox
// holds the link itself, never following it, so the path would be of no
// use there, and the failure would name the link, not the reason.
func checkLink(pol policy.Policy, path, what string, has func(string) bool) error {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return nil
	}
	target, err := filepath.EvalSymlinks(path)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s %s is a symbolic link that leads nowhere (%v): give the path it should name", sandbox.ErrConfig, what, policy.ShowPath(path), errors.Unwrap(err))
	case !has(target):
		return fmt.Errorf("%w: %s %s is a symbolic link to %s, which the policy does not give: the sandbox holds the link, not what it names; give %s", sandbox.ErrConfig, what, policy.ShowPath(path), policy.ShowPath(target), policy.ShowPath(target))
	}
	return nil
}

// prepare normalizes pol against the current directory, checks its start
// directory, and makes the control groups of its limits (nil when none,
// or when the host has none for hutch). The job describes the sandbox.
func prepare(pol policy.Policy) (policy.Policy, wire.Job, *cgroup, error) {
	cwd, _ := os.Getwd()
	pol, err := pol.Normalize(cwd)
	if err != nil {
		return pol, wire.Job{}, nil, cfgerr.Under(sandbox.ErrConfig, err)
	}
	if pol.Dir == "/tmp" && !pol.CanWrite("/tmp") {
		// The private /tmp: fine as a start directory.
	} else if !pol.CanRead(pol.Dir) {
		return pol, wire.Job{}, nil, fmt.Errorf("%w: start directory %s is not in the policy", sandbox.ErrConfig, pol.Dir)
	} else if err := checkStartDir(pol); err != nil {
		return pol, wire.Job{}, nil, err
	} else if pol, err = realStartDir(pol); err != nil {
		return pol, wire.Job{}, nil, err
	}
	for _, w := range pol.Write {
		if err := checkLink(pol, w, "writable path", pol.CanWrite); err != nil {
			return pol, wire.Job{}, nil, err
		}
	}
	job := wire.Job{Policy: pol, Dir: pol.Dir, HostUID: os.Getuid(), HostGID: os.Getgid(), Quotas: boundary.SandboxQuotas()}
	// The helpers, the groups and the checks below read a limit as a
	// number: policy.Unlimited is none, 0, to them.
	job.Policy.Limits = pol.Limits.Enforced()
	l := job.Policy.Limits
	// Memory and process limits go to control groups where hutch may
	// create them; elsewhere the exec helper falls back to rlimits.
	cg, cgErr := takeCgroup(l)
	if cg != nil {
		job.MemoryByCgroup, job.PidsByCgroup = cg.memory, cg.pids
	}
	if l.Processes > 0 && !job.PidsByCgroup && os.Getuid() == 0 {
		cg.remove()
		if cgErr == nil {
			cgErr = errors.New("no pids cgroup controller")
		}
		// The rlimit fallback does not count processes of the host's
		// root: refuse rather than run unbounded.
		return pol, job, nil, fmt.Errorf("%w: a process limit needs a pids cgroup here (hutch runs as root, where RLIMIT_NPROC does not apply): %v; give hutch a pids cgroup controller, or run without a process limit (--pids unlimited)", sandbox.ErrUnsupported, cgErr)
	}
	if err := boundary.CheckHardLimits(l, job.PidsByCgroup); err != nil {
		cg.remove()
		return pol, job, nil, err
	}
	return pol, job, cg, nil
}

// baseEnv is the policy's environment, or PATH, HOME and LANG.
func baseEnv(pol policy.Policy) map[string]string {
	if pol.Env != nil {
		return pol.Env
	}
	env := map[string]string{"PATH": sandbox.DefaultPath, "HOME": pol.Dir}
	if v := os.Getenv("LANG"); v != "" {
		env["LANG"] = v
	}
	return env
}

// Sandbox is a running isolated sandbox: a session. Its init (the helper)
// holds the namespaces and serves file operations and commands over one
// socket, so later operations skip the setup. It implements
// sandbox.Sandbox; Root is the policy's start directory, and file
// operations are confined to it (inside the sandbox's view, under the same
// policy as commands). Safe for concurrent use.
type Sandbox struct {
	pol  policy.Policy
	conn *wire.Conn
	// proxy filters the network when the policy has an allow-list;
	// serveNetwork feeds it and closes netDone when the init is gone.
	proxy   *netproxy.Proxy
	netDone chan struct{}
	init    *exec.Cmd
	cg      *cgroup
	limits  *boundary.Counters // cg's counters, open for the session
	nextID  atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]chan reply
	closed  bool
	// lent is the runner the init lent this process, when one is (see
	// lent.go); lentBusy while a command runs on it; noLent once the
	// init said it lends none for this session.
	lent     *lentRunner
	lentBusy bool
	noLent   bool
	done     chan struct{} // closed when the init is gone
	reaped   chan struct{} // closed once the init has been waited for
	dead     error
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// Options are the settings of an isolated sandbox.
type Options struct {
	// Policy is what commands may read, write, run and reach, and their
	// limits; it is normalized against the current directory. The zero
	// Policy reads nothing: start from policy.Default().
	Policy policy.Policy

	// Resolver resolves the names commands ask the network proxy for,
	// when the policy's network is an allow-list; nil means the host's
	// resolver (so /etc/hosts counts).
	Resolver netproxy.Resolver
}

// New builds a sandbox from opts.Policy and keeps it running until Close.
// Errors match sandbox.ErrConfig (a bad policy, helper.Main not called) or
// sandbox.ErrUnsupported (the host cannot isolate: the error says what is
// missing and how to fix it).
func New(ctx context.Context, opts Options) (*Sandbox, error) {
	pol := opts.Policy
	if !helper.Ready() {
		return nil, fmt.Errorf("%w: the isolated tier re-executes this program as its sandbox helper: call helper.Main() at the start of main (and of TestMain)", sandbox.ErrConfig)
	}
	pol, job, cg, err := prepare(pol)
	if err != nil {
		return nil, err
	}
	group, err := cg.commandFiles()
	if err != nil {
		cg.remove()
		return nil, fmt.Errorf("%w: %v", sandbox.ErrUnsupported, err)
	}
	defer group.Close() // the init has its copies once started
	job.CmdGroup = group.Set()
	hostEnd, sandboxEnd, err := wire.SocketPair()
	if err != nil {
		cg.remove()
		return nil, err
	}
	defer sandboxEnd.Close() // also closed right after the start: see below
	// An allow-list: the init bridges the proxy port on the sandbox's
	// loopback to this proxy, passing each connection over netSandbox.
	var proxy *netproxy.Proxy
	var netHost, netSandbox *os.File
	if pol.Network == policy.NetworkAllow {
		bad := func(err error) (*Sandbox, error) {
			hostEnd.Close()
			cg.remove()
			return nil, err
		}
		list, err := netproxy.NewList(pol.Hosts, pol.DenyHosts)
		if err != nil {
			return bad(fmt.Errorf("%w: %v", sandbox.ErrConfig, err))
		}
		if proxy, err = netproxy.New(list, netproxy.Options{Resolver: opts.Resolver}); err != nil {
			return bad(fmt.Errorf("%w: %v", sandbox.ErrConfig, err))
		}
		if netHost, netSandbox, err = wire.SocketPair(); err != nil {
			return bad(err)
		}
		defer netSandbox.Close()
	}
	c := exec.Command("/proc/self/exe")
	c.Args = []string{boundary.InitName}
	c.Env = boundary.HelperEnv
	c.ExtraFiles = []*os.File{sandboxEnd}
	if netSandbox != nil {
		c.ExtraFiles = append(c.ExtraFiles, netSandbox) // boundary.NetFD
	}
	c.ExtraFiles = group.ExtraFiles(c.ExtraFiles) // boundary.CmdGroupFD, CountFD
	c.SysProcAttr = namespaces(pol.Network == policy.NetworkAll, job.HostUID, job.HostGID)
	fail := func(err error) (*Sandbox, error) {
		if c.Process != nil {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		hostEnd.Close()
		if netHost != nil {
			netHost.Close()
		}
		cg.remove()
		return nil, err
	}
	inside, startErr := cg.startInside(c.Start)
	// The walk of /proc the init's root needs goes on while the init's
	// runtime starts (some milliseconds), not beside the fork, which it
	// would slow on a small machine; the init is given its result.
	var proc *helper.ProcWalk
	if startErr == nil {
		proc = helper.WalkProcAhead(pol)
	}
	// Only the init may hold its end: once it is gone, the host must see
	// EOF (a failed setup would otherwise leave New waiting forever).
	sandboxEnd.Close()
	if netSandbox != nil {
		netSandbox.Close()
	}
	if err := startErr; err != nil {
		// Say why, with the fix (Supported probes and explains).
		if serr := Supported(); serr != nil {
			return fail(serr)
		}
		return fail(fmt.Errorf("%w: starting the sandbox: %v", sandbox.ErrUnsupported, err))
	}
	if cg != nil && !inside {
		// The init waits for its start request before doing anything, so
		// every process of the sandbox is born inside the groups.
		if err := cg.add(c.Process.Pid); err != nil {
			return fail(err)
		}
	}
	conn, err := wire.FileConn(hostEnd) // closes hostEnd (fail's close is then a no-op)
	if err != nil {
		return fail(err)
	}
	s := &Sandbox{pol: pol, conn: conn, init: c, cg: cg, limits: cg.files().Open(), proxy: proxy, pending: map[uint64]chan reply{}, done: make(chan struct{}), reaped: make(chan struct{})}
	if proxy != nil {
		s.netDone = make(chan struct{})
		go s.serveNetwork(netHost)
	}
	go s.readLoop() // ends the session at EOF, after every queued answer
	go func() {
		_ = c.Wait()
		close(s.reaped)
	}()
	if job.HiddenProc, err = proc.Result(job.Policy); err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: building the sandbox: %v", sandbox.ErrUnsupported, err)
	}
	res, err := s.call(ctx, wire.Request{Op: "start", Job: &job})
	if err == nil {
		err = res.Err.Error()
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// hostGrace is how long past a command's timeout the host waits for the
// sandbox's answer before it gives the session up.
var hostGrace = 10 * time.Second

// MaxProxyConns bounds the connections one sandbox may hold open through
// its proxy at once; more are closed at once. Each is a descriptor in
// this (the host's) process, so a command opening connections without end
// must not use up the host's descriptors.
const MaxProxyConns = 256

// serveNetwork hands every connection the init bridges from the sandbox's
// proxy port to the proxy, until the init is gone.
func (s *Sandbox) serveNetwork(f *os.File) {
	defer close(s.netDone)
	conn, err := wire.FileConn(f)
	if err != nil {
		return
	}
	defer conn.Close()
	slots := make(chan struct{}, MaxProxyConns)
	for {
		var msg struct{}
		files, err := conn.Recv(&msg)
		if err != nil {
			return
		}
		for _, cf := range files {
			c, err := net.FileConn(cf)
			cf.Close()
			if err != nil {
				continue
			}
			select {
			case slots <- struct{}{}:
				go func() {
					defer func() { <-slots }()
					_ = s.proxy.ServeConn(context.Background(), c)
				}()
			default:
				c.Close()
			}
		}
	}
}

// readLoop hands each response to the call waiting for it.
func (s *Sandbox) readLoop() {
	for {
		var res wire.Response
		files, err := s.conn.Recv(&res)
		if err != nil {
			wire.CloseFiles(files)
			s.fail(fmt.Errorf("the sandbox's init is gone: %w", err))
			return
		}
		// Handed over under mu (ch has room for the one answer): a
		// caller that gave up takes its entry out under mu too, and then
		// either finds the answer in ch or leaves it to be closed here.
		s.mu.Lock()
		ch := s.pending[res.ID]
		delete(s.pending, res.ID)
		if ch != nil {
			ch <- reply{res, files}
		}
		s.mu.Unlock()
		if ch == nil {
			wire.CloseFiles(files)
		}
	}
}

// fail ends every waiting call: the sandbox is gone.
func (s *Sandbox) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead != nil {
		return
	}
	s.dead = err
	close(s.done)
}

// call sends req (with files) and waits for its response.
func (s *Sandbox) call(ctx context.Context, req wire.Request, files ...*os.File) (wire.Response, error) {
	res, passed, err := s.callFiles(ctx, req, files...)
	wire.CloseFiles(passed)
	return res, err
}

// callWithin is callFiles bounded by bound: a sandbox that does not
// answer by then is closed rather than waited on, and the error says it
// did not do what (the sandbox did not ...).
func (s *Sandbox) callWithin(ctx context.Context, bound time.Duration, what string, req wire.Request, files ...*os.File) (wire.Response, []*os.File, error) {
	callCtx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	res, passed, err := s.callFiles(callCtx, req, files...)
	if err != nil && ctx.Err() == nil && callCtx.Err() != nil {
		err = s.closeFor("the sandbox did not " + what)
	}
	return res, passed, err
}

// closeFor closes the session, which something in it keeps from going
// on (why), and returns the error that says so.
func (s *Sandbox) closeFor(why string) error {
	go s.Close()
	return fmt.Errorf("%w: %s, so the sandbox was closed", sandbox.ErrClosed, why)
}

// reply is an answer of the init's, with the descriptors it passed.
type reply struct {
	res   wire.Response
	files []*os.File
}

// callFiles is call, for an answer that passes descriptors: the caller
// closes them.
func (s *Sandbox) callFiles(ctx context.Context, req wire.Request, files ...*os.File) (wire.Response, []*os.File, error) {
	if err := ctx.Err(); err != nil {
		return wire.Response{}, nil, err // a call already cancelled is not made
	}
	req.ID = s.nextID.Add(1)
	ch := make(chan reply, 1)
	s.mu.Lock()
	if s.closed && req.Op != "start" {
		s.mu.Unlock()
		return wire.Response{}, nil, sandbox.ErrClosed
	}
	if s.dead != nil {
		s.mu.Unlock()
		return wire.Response{}, nil, fmt.Errorf("%w: %v", sandbox.ErrClosed, s.dead)
	}
	s.pending[req.ID] = ch
	s.mu.Unlock()
	if err := s.conn.Send(req, files...); err != nil {
		return wire.Response{}, nil, err
	}
	select {
	case r := <-ch:
		return r.res, r.files, nil
	case <-s.done:
		return wire.Response{}, nil, fmt.Errorf("%w: %v", sandbox.ErrClosed, s.dead)
	case <-ctx.Done():
		if req.Op == "exec" {
			_ = s.conn.Send(wire.Request{ID: s.nextID.Add(1), Op: "cancel", Target: req.ID})
		}
		// An answer that comes later has nobody to take its descriptors
		// (a lent runner's socket): readLoop closes them.
		s.mu.Lock()
		delete(s.pending, req.ID)
		select {
		case r := <-ch:
			wire.CloseFiles(r.files)
		default:
		}
		s.mu.Unlock()
		return wire.Response{}, nil, ctx.Err()
	}
}

// Root is the policy's start directory, where relative paths resolve.
func (s *Sandbox) Root() string { return s.pol.Dir }

// Scope names what calls in this sandbox reach, for approvals (see
// sandbox.Scoper): its start directory and a digest of its whole policy,
// so an approval given under one policy never covers a call under a wider
// one (more to write, the network) in the same directory.
func (s *Sandbox) Scope() string {
	b, _ := json.Marshal(s.pol) // a normalized policy always marshals
	sum := sha256.Sum256(b)
	return fmt.Sprintf("isolated %s %s", hex.EncodeToString(sum[:12]), s.pol.Dir)
}

// Policy is the (normalized) policy the sandbox enforces.
func (s *Sandbox) Policy() policy.Policy { return s.pol }

// Read returns a file's content, read inside the sandbox.
func (s *Sandbox) Read(ctx context.Context, p string) ([]byte, error) {
	data, _, err := s.ReadStat(ctx, p, 0)
	return data, err
}

// ReadStat reads (at most max bytes when max > 0) and describes a file in
// one round trip; the content comes through a pipe, not the socket.
func (s *Sandbox) ReadStat(ctx context.Context, p string, max int64) ([]byte, sandbox.FileInfo, error) {
	data, res, err := s.callWithOutput(ctx, wire.Request{Op: "read", Path: p, Max: max}, sandbox.MaxFileSize+1)
	if err != nil {
		return nil, sandbox.FileInfo{}, err
	}
	return data, *res.Info, nil
}

// ReadStream hands fn the file's content as the init reads it into a
// pipe (see sandbox.Streamer).
func (s *Sandbox) ReadStream(ctx context.Context, p string, fn func(io.Reader) error) (sandbox.FileInfo, error) {
	res, err := s.callReading(ctx, wire.Request{Op: "read", Path: p}, sandbox.MaxFileSize, fn)
	if res.Info == nil { // the call failed, or its answer is an error
		return sandbox.FileInfo{}, err
	}
	return *res.Info, err
}

// callWithOutput makes a call whose output, at most limit bytes, the
// init writes into a pipe passed with it, and returns both; a failed call
// (or one whose answer is an error) is err.
func (s *Sandbox) callWithOutput(ctx context.Context, req wire.Request, limit int64) ([]byte, wire.Response, error) {
	var data []byte
	res, err := s.callReading(ctx, req, limit, func(r io.Reader) (err error) {
		data, err = io.ReadAll(r)
		return err
	})
	return data, res, err
}

// callReading makes a call whose output the init writes into a pipe
// passed with it, and hands fn that output, at most limit bytes, as it
// comes; what fn leaves unread is drained, so the init never blocks on a
// write. err is the call's failure, or its answer's error, else fn's.
func (s *Sandbox) callReading(ctx context.Context, req wire.Request, limit int64, fn func(io.Reader) error) (wire.Response, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return wire.Response{}, err
	}
	defer r.Close()
	type answer struct {
		res wire.Response
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := s.call(ctx, req, w)
		w.Close() // the init's copy is closed after its answer; EOF follows
		done <- answer{res, err}
	}()
	ferr := fn(io.LimitReader(r, limit))
	_, _ = io.Copy(io.Discard, r)
	a := <-done
	if a.err == nil {
		a.err = a.res.Err.Error()
	}
	if a.err != nil {
		return wire.Response{}, a.err
	}
	return a.res, ferr
}

// Write replaces a file inside the sandbox (atomically, creating parents),
// if the policy lets the sandbox write there.
func (s *Sandbox) Write(ctx context.Context, p string, data []byte) error {
	if len(data) > sandbox.MaxFileSize {
		return tierkit.PathError("write", p, fmt.Errorf("%d bytes is over the %d byte limit: %w", len(data), sandbox.MaxFileSize, sandbox.ErrTooLarge))
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer w.Close()
	go func() {
		_, _ = w.Write(data)
		w.Close()
	}()
	res, err := s.call(ctx, wire.Request{Op: "write", Path: p}, r)
	r.Close()
	if err != nil {
		return err
	}
	return res.Err.Error()
}

// Pack writes the regular files under dir changed after since as one tar
// stream, read inside the sandbox (the policy's denied paths left out),
// in one round trip (see sandbox.Packer).
func (s *Sandbox) Pack(ctx context.Context, dir string, since time.Time, w io.Writer) error {
	req := wire.Request{Op: "pack", Path: dir}
	if !since.IsZero() {
		req.Since = since.UnixNano()
	}
	_, err := s.callReading(ctx, req, sandbox.MaxFileSize+packOverhead, func(r io.Reader) error {
		_, err := io.Copy(w, r)
		return err
	})
	return err
}

// packOverhead bounds a pack's tar headers beyond its content.
const packOverhead = 64 << 20

// Unpack writes the files of the tar stream r below dir inside the
// sandbox, as its writes are (the policy decides what may change), in
// one round trip (see sandbox.Packer).
func (s *Sandbox) Unpack(ctx context.Context, dir string, r io.Reader) (int, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer pw.Close()
	go func() {
		_, _ = io.Copy(pw, r)
		pw.Close()
	}()
	res, err := s.call(ctx, wire.Request{Op: "unpack", Path: dir}, pr)
	pr.Close()
	if err != nil {
		return 0, err
	}
	return res.Count, res.Err.Error()
}

// Stat describes a path inside the sandbox.
func (s *Sandbox) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	res, err := s.call(ctx, wire.Request{Op: "stat", Path: p})
	if err == nil {
		err = res.Err.Error()
	}
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	return *res.Info, nil
}

// Glob matches inside the sandbox (see sandbox.Sandbox for the rules).
// The matches come through a pipe, not the socket (see wire.JoinNames).
func (s *Sandbox) Glob(ctx context.Context, pattern string) ([]string, error) {
	data, _, err := s.callWithOutput(ctx, wire.Request{Op: "glob", Pattern: pattern}, wire.MaxNamesBytes)
	if err != nil {
		return nil, err
	}
	return wire.SplitNames(data), nil
}

// List returns a directory's entries, listed inside the sandbox (less
// what the policy denies); the answer comes through a pipe.
func (s *Sandbox) List(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	data, _, err := s.callWithOutput(ctx, wire.Request{Op: "list", Path: p}, wire.MaxAnswerBytes)
	if err != nil {
		return nil, err
	}
	return wire.ReadListing(data)
}

// Search runs req inside the sandbox, where the files are (less what the
// policy denies), in one call; the answer comes through a pipe.
func (s *Sandbox) Search(ctx context.Context, req sandbox.SearchRequest) (sandbox.SearchResult, error) {
	data, _, err := s.callWithOutput(ctx, wire.Request{Op: "search", Search: &req}, wire.MaxAnswerBytes)
	if err != nil {
		return sandbox.SearchResult{}, err
	}
	return wire.ReadSearch(data)
}

// Mkdir creates a directory and its parents inside the sandbox, if the
// policy lets the sandbox write there.
func (s *Sandbox) Mkdir(ctx context.Context, p string) error {
	return s.simple(ctx, wire.Request{Op: "mkdir", Path: p})
}

// Remove deletes an entry inside the sandbox, if the policy lets the
// sandbox write there; a tree that holds a denied path is refused.
func (s *Sandbox) Remove(ctx context.Context, p string, recursive bool) error {
	return s.simple(ctx, wire.Request{Op: "remove", Path: p, Recursive: recursive})
}

// Rename moves an entry inside the sandbox, if the policy lets the
// sandbox write at both ends; a tree that holds a denied path is refused.
func (s *Sandbox) Rename(ctx context.Context, from, to string) error {
	return s.simple(ctx, wire.Request{Op: "rename", Path: from, To: to})
}

// simple makes a call whose answer is its error alone.
func (s *Sandbox) simple(ctx context.Context, req wire.Request) error {
	res, err := s.call(ctx, req)
	if err != nil {
		return err
	}
	return res.Err.Error()
}

// Exec runs a command in the sandbox, in a PID namespace of its own: when
// it ends, times out or is cancelled, everything it started ends too. The
// environment is the policy's (default PATH, HOME, LANG) plus cmd.Env.
func (s *Sandbox) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	return s.exec(ctx, cmd, false)
}

// exec runs cmd; final marks a one-shot sandbox's only command.
func (s *Sandbox) exec(ctx context.Context, cmd sandbox.Command, final bool) (sandbox.Result, error) {
	env := baseEnv(s.pol)
	var rec *netproxy.Recording
	if s.proxy != nil {
		env = tierkit.MergeEnv(env, boundary.ProxyEnv())
		rec = s.proxy.Record()
		defer rec.Stop()
	}
	out, err := runCommand(ctx, cmd, s.pol, env, s.limits, func(ctx context.Context, spec *wire.Job, files [3]*os.File, timeout time.Duration) (wire.Status, bool, error) {
		if !final {
			if st, timedOut, ran, err := s.execLent(ctx, spec, files, timeout); ran {
				return st, timedOut, err
			}
		}
		// The init enforces the timeout; the bound is for an init that
		// no longer answers at all.
		res, passed, err := s.callWithin(ctx, timeout+hostGrace, fmt.Sprintf("end the command %v after its %v timeout", hostGrace, timeout),
			wire.Request{Op: "exec", Job: spec, Timeout: timeout.Milliseconds(), Final: final}, files[0], files[1], files[2])
		wire.CloseFiles(passed)
		if err != nil {
			return wire.Status{}, false, fmt.Errorf("isolated exec: %w", err)
		}
		if err := res.Err.Error(); err != nil {
			return wire.Status{}, false, err
		}
		var st wire.Status
		if res.Status != nil {
			st = *res.Status
		}
		return st, res.TimedOut, nil
	})
	if err == nil && rec != nil {
		out.Blocked = rec.Stop()
		out.BlockedOmitted = rec.Omitted()
	}
	return out, err
}

// starter runs the command spec with the given ends of its standard
// streams (stdin's read end, stdout's and stderr's write ends) and
// returns how it ended, and whether its timeout did that.
type starter func(ctx context.Context, spec *wire.Job, files [3]*os.File, timeout time.Duration) (wire.Status, bool, error)

// runCommand runs cmd under pol with start: it validates the command,
// feeds its stdin, captures (and tees) its output, and makes the Result,
// with the limit that stopped it when one did. env is the policy's
// environment, to which cmd.Env adds.
func runCommand(ctx context.Context, cmd sandbox.Command, pol policy.Policy, env map[string]string, limits *boundary.Counters, start starter) (sandbox.Result, error) {
	if cmd.Timeout == 0 {
		cmd.Timeout = pol.Timeout
	}
	cmd, err := cmd.Validate()
	if err != nil {
		return sandbox.Result{}, err
	}
	argv := cmd.Args
	if cmd.Shell != "" {
		argv = []string{"/bin/sh", "-c", cmd.Shell}
	}
	spec := &wire.Job{Argv: argv, Dir: cmd.Dir, Env: tierkit.EnvList(tierkit.MergeEnv(env, cmd.Env))}

	stdout := &tierkit.TailBuffer{Max: cmd.MaxOutput}
	stderr := &tierkit.TailBuffer{Max: cmd.MaxOutput}
	pipes, err := tierkit.NewPipes(cmd, stdout, stderr, nil)
	if err != nil {
		return sandbox.Result{}, err
	}
	defer pipes.Close() // also stops the copies of a command cancelled or lost
	before := limits.Counts()
	begin := time.Now()
	st, timedOut, err := start(ctx, spec, pipes.Child, cmd.Timeout)
	pipes.Started()
	if err != nil {
		return sandbox.Result{}, err
	}
	pipes.Ended()
	out := tierkit.Captured(begin, stdout, stderr)
	out.TimedOut = timedOut
	st.Report(&out)
	if out.TimedOut {
		return out, nil
	}
	if out.Limit = limits.Counts().Since(before); out.Limit == "" {
		out.Limit = limitFor(out, st, pol.Limits)
	}
	return out, nil
}

// Supports reports every capability: files and a shell.
func (s *Sandbox) Supports(c sandbox.Feature) bool {
	switch c {
	case sandbox.FeatureRead, sandbox.FeatureWrite, sandbox.FeatureGlob, sandbox.FeatureStat, sandbox.FeatureShell, sandbox.FeatureManage:
		return true
	}
	return false
}

// Instructions describe the sandbox to a model, from its policy.
func (s *Sandbox) Instructions() string {
	ins := "You run inside an isolated sandbox on this machine (kernel namespaces, no capabilities). " + s.pol.Summary()
	if len(s.pol.Write) > 0 {
		if prot := s.pol.Protected(); len(prot) > 0 {
			ins += " " + policy.ProtectedNote(prot, "sandbox", true)
		}
	}
	return ins
}

// Close ends the sandbox: its init and everything in it are killed, the
// control groups removed. It is idempotent.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	l := s.lent
	s.lent = nil
	s.mu.Unlock()
	if l != nil {
		l.close()
	}
	if s.init.Process != nil {
		_ = s.init.Process.Kill() // PID 1: the whole namespace goes
	}
	<-s.done
	_ = s.conn.Close()
	if s.proxy != nil {
		<-s.netDone
		_ = s.proxy.Close()
	}
	s.limits.Close()
	if s.cg != nil {
		// The init's exit (waited for once the kernel has ended every
		// process of its namespace) empties the groups: remove them then,
		// at the first try, rather than retry while it exits.
		select {
		case <-s.reaped:
		case <-time.After(time.Second):
		}
	}
	s.cg.remove()
	return nil
}

// limitFor names the rlimit behind a command's end, when one is: the
// command itself, or a child whose death a shell reported as 128+N, got
// SIGXCPU or SIGXFSZ; or it used its whole CPU time; or, under an rlimit
// memory bound, it said it ran out of memory.
func limitFor(res sandbox.Result, st wire.Status, l policy.Limits) string {
	code := res.ExitCode
	if hit := boundary.RlimitHit(code, l.CPUTime > 0, l.FileSize > 0); hit != "" {
		return hit
	}
	switch {
	case l.CPUTime > 0 && code == 128+int(unix.SIGKILL) && time.Duration(st.CPUMillis)*time.Millisecond >= l.CPUTime:
		return "cpu_time" // the hard limit, past the soft one's SIGXCPU
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

// namespaces are the clone settings of the sandbox's init: every namespace,
// the caller's ids mapped to root inside (root with no power outside).
func namespaces(hostNetwork bool, uid, gid int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:                 boundary.CloneFlags(hostNetwork),
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: false,
		Setsid:                     true,
		Pdeathsig:                  syscall.SIGKILL,
	}
}
