package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/hostfs"
	"github.com/hutchsandbox/hutch/internal/sysprog"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/sandbox"
)

// server answers the host's requests inside the sandbox. File operations
// act through a local-tier guard rooted at the policy's start directory,
// inside the sandbox's own filesystem view, so the policy governs a
// write_file exactly as it governs a command's writes. Each command runs
// in a PID namespace of its own, so it and everything it started end
// together.
type server struct {
	conn      *wire.Conn
	job       wire.Job
	files     *hostfs.FS
	mu        sync.Mutex
	execs     map[uint64]*exec.Cmd
	cancelled map[uint64]bool // cancels that came before their exec started
	// lentGone is closed once the last runner lent to the host (see
	// lendRunner) has been reaped.
	lentGone chan struct{}
}

// newServer opens the file tools' guard at the policy's start directory,
// inside the finished sandbox.
func newServer(conn *wire.Conn, job wire.Job) (*server, error) {
	files, err := hostfs.New(job.Policy.Dir, nil)
	if err != nil {
		return nil, fmt.Errorf("the start directory: %w", err)
	}
	// Protected paths at any depth below the start directory: the
	// sandbox's read-only binds keep those that existed at its start,
	// this check also those that did not (see docs/security.md).
	files.Protect(job.Policy.Protected())
	return &server{conn: conn, job: job, files: files, execs: map[uint64]*exec.Cmd{}, cancelled: map[uint64]bool{}}, nil
}

// serve answers requests until the host closes the socket.
func (s *server) serve() {
	conn := s.conn
	for {
		var req wire.Request
		passed, err := conn.Recv(&req)
		if err != nil {
			return // the host closed the socket: the sandbox ends
		}
		go s.handle(req, passed)
	}
}

// denied reports whether p (as the file tools name it) falls under one of
// the policy's denied paths. The init holds capabilities a command lacks,
// so it must not read a mask's content (or what a mask hides) for one.
func (s *server) denied(p string) bool {
	rel, err := sandbox.Clean(s.files.Root(), p)
	if err != nil {
		return false // the guard will refuse it anyway
	}
	abs := path.Join(s.files.Root(), rel)
	for _, d := range s.job.Policy.Deny {
		if abs == d || strings.HasPrefix(abs, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// deniedPath reports the path of req that the policy denies, if one is:
// a path a file operation names, or for an operation that takes a whole
// tree (a recursive remove, a rename) one that holds a denied path.
func (s *server) deniedPath(req wire.Request) (string, bool) {
	switch req.Op {
	case "read", "write", "stat", "list", "mkdir", "pack", "unpack":
		return req.Path, s.denied(req.Path)
	case "remove", "rename":
		for _, p := range []string{req.Path, req.To} {
			if p != "" && (s.denied(p) || s.holdsDenied(p)) {
				return p, true
			}
		}
	}
	return "", false
}

// holdsDenied reports whether a denied path lies below p.
func (s *server) holdsDenied(p string) bool {
	rel, err := sandbox.Clean(s.files.Root(), p)
	if err != nil {
		return false // the guard will refuse it anyway
	}
	abs := path.Join(s.files.Root(), rel)
	for _, d := range s.job.Policy.Deny {
		if strings.HasPrefix(d, strings.TrimSuffix(abs, "/")+"/") {
			return true
		}
	}
	return false
}

// hidden reports whether a root-relative path falls under a denied path
// (what a listing or a search leaves out).
func (s *server) hidden(rel string) bool { return s.denied(rel) }

// list writes the directory's entries, less what the policy denies, into
// the pipe the host passed.
func (s *server) list(ctx context.Context, req wire.Request, passed []*os.File) error {
	if len(passed) != 1 {
		return errors.New("list needs one pipe")
	}
	ents, err := s.files.ListHiding(ctx, req.Path, s.hidden)
	if err != nil {
		return err
	}
	return wire.WriteListing(passed[0], ents)
}

// search writes what the search found, less what the policy denies, into
// the pipe the host passed.
func (s *server) search(ctx context.Context, req wire.Request, passed []*os.File) error {
	if len(passed) != 1 || req.Search == nil {
		return errors.New("search needs a request and one pipe")
	}
	res, err := s.files.SearchHiding(ctx, *req.Search, s.hidden)
	if err != nil {
		return err
	}
	return wire.WriteSearch(passed[0], res)
}

func (s *server) handle(req wire.Request, passed []*os.File) {
	defer wire.CloseFiles(passed)
	ctx := context.Background()
	res := wire.Response{ID: req.ID}
	var err error
	if p, bad := s.deniedPath(req); bad {
		res.Err = wire.ToWire(tierkit.PathError(req.Op, p, fmt.Errorf("denied by the policy: %w", fs.ErrPermission)))
		_ = s.conn.Send(res)
		return
	}
	switch req.Op {
	case "read":
		err = s.read(ctx, req, passed, &res)
	case "write":
		err = s.write(ctx, req, passed)
	case "stat":
		var fi sandbox.FileInfo
		if fi, err = s.files.Stat(ctx, req.Path); err == nil {
			res.Info = &fi
		}
	case "glob":
		err = s.glob(ctx, req, passed)
	case "list":
		err = s.list(ctx, req, passed)
	case "search":
		err = s.search(ctx, req, passed)
	case "mkdir":
		err = s.files.Mkdir(ctx, req.Path)
	case "remove":
		err = s.files.Remove(ctx, req.Path, req.Recursive)
	case "rename":
		err = s.files.Rename(ctx, req.Path, req.To)
	case "pack":
		err = s.pack(ctx, req, passed)
	case "unpack":
		err = s.unpack(ctx, req, passed, &res)
	case "exec":
		err = s.exec(req, passed, &res)
	case "runner":
		var lent []*os.File
		if lent, err = s.lendRunner(); err == nil {
			// With its socket closed here, a runner the host never got
			// sees end-of-file and leaves.
			err = s.conn.Send(res, lent...)
			wire.CloseFiles(lent)
			if err == nil {
				return
			}
		}
	case "cancel":
		s.mu.Lock()
		if c := s.execs[req.Target]; c != nil && c.Process != nil {
			_ = c.Process.Kill()
		} else {
			s.cancelled[req.Target] = true // the exec has not started yet
		}
		s.mu.Unlock()
	default:
		err = fmt.Errorf("unknown operation %q", req.Op)
	}
	res.Err = wire.ToWire(err)
	if err := s.conn.Send(res); errors.Is(err, sandbox.ErrTooLarge) {
		// An answer over MaxRecord must still be an answer: the host
		// waits for one.
		_ = s.conn.Send(wire.Response{ID: req.ID, Err: wire.ToWire(err)})
	}
}

// read streams the file into the pipe the host passed. The init is in
// the sandbox's memory limit: the file never sits in its memory whole.
func (s *server) read(ctx context.Context, req wire.Request, passed []*os.File, res *wire.Response) error {
	if len(passed) != 1 {
		return errors.New("read needs one pipe")
	}
	fi, err := s.files.ReadTo(ctx, req.Path, req.Max, passed[0])
	if err != nil {
		return err
	}
	res.Info = &fi
	return nil
}

// glob writes the matches, less what the policy denies, into the pipe the
// host passed (see JoinNames).
func (s *server) glob(ctx context.Context, req wire.Request, passed []*os.File) error {
	if len(passed) != 1 {
		return errors.New("glob needs one pipe")
	}
	files, err := s.files.Glob(ctx, req.Pattern)
	if err != nil {
		return err
	}
	// Name by name: the init is in the sandbox's memory limit, and the
	// names may be many and long.
	return wire.WriteNames(passed[0], files, s.denied)
}

// write streams the content from the pipe the host passed into the file,
// at most the policy's file size limit: the policy governs a write_file
// as it governs a command's writes.
func (s *server) write(ctx context.Context, req wire.Request, passed []*os.File) error {
	if len(passed) != 1 {
		return errors.New("write needs one pipe")
	}
	limit := int64(s.job.Policy.Limits.FileSize)
	err := s.files.WriteFrom(ctx, req.Path, passed[0], limit)
	if limit > 0 && limit < sandbox.MaxFileSize && errors.Is(err, sandbox.ErrTooLarge) {
		return tierkit.PathError("write", req.Path, fmt.Errorf("more than the policy's file size limit of %d bytes: %w", limit, sandbox.ErrTooLarge))
	}
	return err
}

// pack writes the tree's files, less what the policy denies, as a tar
// stream into the pipe the host passed, a file at a time (the init is in
// the sandbox's memory limit).
func (s *server) pack(ctx context.Context, req wire.Request, passed []*os.File) error {
	if len(passed) != 1 {
		return errors.New("pack needs one pipe")
	}
	var since time.Time
	if req.Since != 0 {
		since = time.Unix(0, req.Since)
	}
	return s.files.PackHiding(ctx, req.Path, since, s.denied, passed[0])
}

// unpack writes the files of the tar stream in the pipe the host passed
// below the request's directory, refusing what the policy denies, each at
// most the policy's file size limit (as write).
func (s *server) unpack(ctx context.Context, req wire.Request, passed []*os.File, res *wire.Response) error {
	if len(passed) != 1 {
		return errors.New("unpack needs one pipe")
	}
	n, err := s.files.UnpackHiding(ctx, req.Path, passed[0], s.denied, int64(s.job.Policy.Limits.FileSize))
	res.Count = n
	return err
}

// final runs a one-shot sandbox's only command from the init itself:
// confined on this (locked) thread, reaped by the init as PID 1, with the
// timeout enforced here. Afterwards the init is of no further use: the
// host closes the sandbox, which ends it.
//
// The command gets what a runner's would: a cgroup namespace rooted at
// the init's groups (this thread enters one, and the command inherits
// it; the init's other threads keep theirs), the OOM killer's first place
// (through the init's oom_score_adj in the sandbox's own /proc: the
// init is root in its user namespace, so it opens its files though not
// dumpable), and, when the session's commands are
// supervised, the init's own supervisor, which runs on the init's other,
// unconfined threads. Only this thread is confined: Landlock, seccomp,
// no_new_privs and the dropped capabilities are per thread, and the
// host sends a final exec only when the policy needs no resource limit
// of the kind that is per process (see isolated.Run).
func (s *server) final(job wire.Job, req wire.Request, passed []*os.File, res *wire.Response) error {
	runtime.LockOSThread() // never unlocked: the thread dies with the init
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("a cgroup namespace for the command: %w", err)
	}
	sysprog.PrepareCommandOOM()
	if supervisorPeer != nil {
		sysprog.SetSupervisor(int(supervisorPeer.Fd()))
	}
	if req.Timeout > 0 {
		time.AfterFunc(time.Duration(req.Timeout)*time.Millisecond, func() {
			_ = s.conn.Send(wire.Response{ID: req.ID, TimedOut: true, Status: &wire.Status{Signal: int(syscall.SIGKILL)}})
			os.Exit(0) // PID 1 leaves: the kernel kills the rest
		})
	}
	// The init's copies of the streams close once the command runs: the
	// host then sees end-of-file as the command's side closes, not after
	// this answer.
	st, err := runConfined(job, passed[0], passed[1], passed[2], func() { wire.CloseFiles(passed) })
	// The command is done: whatever it left running goes now (PID 1 may
	// signal every process of its namespace), so nothing outlives it and
	// its output pipes close.
	_ = unix.Kill(-1, unix.SIGKILL)
	if err != nil {
		return err
	}
	res.Status = &st
	return nil
}

// exec runs one command: the only one of a one-shot sandbox from the init
// itself, otherwise through a fresh exec helper. A session's commands
// reach the init only when they cannot go to the runner it lends the host
// (lendRunner): that runner is busy with another, or the session's
// commands take no runner.
func (s *server) exec(req wire.Request, passed []*os.File, res *wire.Response) error {
	if len(passed) != 3 || req.Job == nil || len(req.Job.Argv) == 0 {
		return errors.New("exec needs a command and three pipes")
	}
	dir, err := commandDir(s.files, req.Job.Dir)
	if err != nil {
		return err
	}
	job := s.job
	job.Argv, job.Env, job.Dir = req.Job.Argv, req.Job.Env, dir
	if req.Final {
		return s.final(job, req, passed, res)
	}
	return s.execHelper(req, job, passed, res)
}

// commandDir is the directory a command named dir (as the file tools name
// paths, "" for the start directory) runs in: an absolute path inside the
// sandbox, through the file tools' guard (files), which must find a
// directory there.
func commandDir(files *hostfs.FS, dir string) (string, error) {
	if dir == "" {
		dir = "."
	}
	fi, err := files.Stat(context.Background(), dir)
	switch {
	case err != nil:
		return "", err
	case fi.Kind != sandbox.KindDir:
		return "", tierkit.PathError("exec", dir, sandbox.ErrNotDir)
	}
	return path.Join(files.Root(), fi.Path), nil
}

// lendWait bounds how long a runner lent to the host waits for the one
// lent before it to be reaped: the host let go of that one (a command
// ended it, or it retired), so it is on its way out.
const lendWait = 500 * time.Millisecond

// errNoLending answers a host that asks for a runner of a session whose
// commands cannot use one (see useRunner): it sends them here.
var errNoLending = fmt.Errorf("%w: this session's commands take no runner", sandbox.ErrUnsupported)

// lendRunner starts a runner for the host to speak to directly: its
// socket and a pidfd of it go to the host, which sends it commands,
// enforces their timeouts (killing it through the pidfd) and lets it go
// by closing the socket. A warm exec then costs two messages between
// processes, host and runner, instead of four through the init. The
// init only reaps it, and at most one lent runner lives at a time.
func (s *server) lendRunner() ([]*os.File, error) {
	if !useRunner(s.job) {
		return nil, errNoLending
	}
	s.mu.Lock()
	prev := s.lentGone
	s.mu.Unlock()
	if prev != nil {
		select {
		case <-prev:
		case <-time.After(lendWait):
			return nil, errors.New("the runner lent before is still running")
		}
	}
	r, err := startRunner(s.job)
	if err != nil {
		return nil, err
	}
	pidfd, err := unix.PidfdOpen(r.cmd.Process.Pid, 0)
	if err != nil {
		r.discard()
		return nil, fmt.Errorf("lending a runner: %w", err)
	}
	sock, err := r.conn.Dup()
	if err != nil {
		unix.Close(pidfd)
		r.discard()
		return nil, err
	}
	_ = r.conn.Close() // the host's copy is the runner's only peer now
	gone := make(chan struct{})
	s.mu.Lock()
	s.lentGone = gone
	s.mu.Unlock()
	go func() {
		_ = r.cmd.Wait()
		close(gone)
	}()
	return []*os.File{sock, os.NewFile(uintptr(pidfd), "hutch-runner-pidfd")}, nil
}

// killAfter kills c when the timeout (in milliseconds; 0 for none) passes.
// The function it returns stops the clock and reports whether it fired.
func (s *server) killAfter(ms int64, c *exec.Cmd) func() bool {
	if ms <= 0 {
		return func() bool { return false }
	}
	fired := make(chan struct{})
	timer := time.AfterFunc(time.Duration(ms)*time.Millisecond, func() {
		close(fired)
		_ = c.Process.Kill()
	})
	return func() bool {
		timer.Stop()
		select {
		case <-fired:
			return true
		default:
			return false
		}
	}
}

// execHelper runs one command through a fresh exec helper, as PID 1 of a
// new PID namespace, with the three pipes the host passed as its standard
// streams.
func (s *server) execHelper(req wire.Request, job wire.Job, passed []*os.File, res *wire.Response) error {

	jobR, jobW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer jobR.Close()
	defer jobW.Close()
	stR, stW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer stR.Close()
	defer stW.Close()
	// The helper's own stderr is a pipe of ours: what its Go runtime says
	// when it dies (it could not make a thread, say) becomes this exec's
	// error, not a trace on the command's stderr. The command's stderr
	// reaches it at ExecStderrFD.
	diag, err := newDiagnosis()
	if err != nil {
		return err
	}
	defer diag.close()
	c := exec.Command("/proc/self/exe")
	c.Args = []string{boundary.ExecName}
	c.Dir = job.Dir
	c.Env = helperEnv()
	c.Stdin, c.Stdout, c.Stderr = passed[0], passed[1], diag.w
	c.ExtraFiles = supervisorFiles(boundary.PlaceFile(groupExtraFiles(job, []*os.File{jobR, stW}), boundary.ExecStderrFD, passed[2]))
	c.SysProcAttr = helperAttrs()
	if err := c.Start(); err != nil {
		return fmt.Errorf("starting the command: %w", err)
	}
	jobR.Close()
	stW.Close()
	diag.started()
	wire.CloseFiles(passed) // the child has its copies: EOF reaches the host when it ends
	s.mu.Lock()
	s.execs[req.ID] = c
	if s.cancelled[req.ID] { // cancelled while it was being started
		delete(s.cancelled, req.ID)
		_ = c.Process.Kill()
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.execs, req.ID)
		s.mu.Unlock()
	}()
	_ = json.NewEncoder(jobW).Encode(job)
	jobW.Close()

	timedOut := s.killAfter(req.Timeout, c) // PID 1 of its namespace: everything goes
	_ = c.Wait()                            // its status is in c.ProcessState
	res.TimedOut = timedOut()
	var st wire.Status
	if b, _ := io.ReadAll(io.LimitReader(stR, 1<<16)); json.Unmarshal(b, &st) == nil {
		res.Status = &st
		return nil
	}
	// No report: the exec helper itself died before the command ended.
	// When it said why, it failed on its own; otherwise it was killed
	// (timeout, cancel, a limit).
	if why := diag.wait(); why != "" {
		return fmt.Errorf("the command's exec helper died (%v) before the command ended: %s", c.ProcessState, why)
	}
	// (An exit of its own without words on its stderr is a failure it
	// told the command's stderr about: "hutch: ...", exit 125.)
	st = wire.Status{Exited: false, Signal: int(syscall.SIGKILL)}
	if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.Signal = int(ws.Signal())
	} else if c.ProcessState.Exited() {
		st = wire.Status{Exited: true, ExitCode: c.ProcessState.ExitCode()}
	}
	res.Status = &st
	return nil
}

// helperAttrs are the clone settings of the processes a session's init
// starts for commands (runners, exec helpers): a PID namespace of their
// own, so that nothing outlives them; a new session; death with the init;
// and a cgroup namespace rooted at the init's groups, which are the
// sandbox's own by then, so /proc shows them as "/", never a host path.
// (The init cannot enter one itself: unshare would move one thread.)
func helperAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWCGROUP, Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// diagnosis collects what a child helper writes on its own stderr: its Go
// runtime's last words when it dies on its own.
type diagnosis struct {
	r, w *os.File
	done chan string
}

// newDiagnosis makes the pipe; the child gets w as its stderr.
func newDiagnosis() (*diagnosis, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &diagnosis{r: r, w: w, done: make(chan string, 1)}, nil
}

// started drops this process's copy of the write end, once the child has
// its own, and reads the pipe to its end in the background, keeping the
// first line: the child never blocks on a full pipe.
func (d *diagnosis) started() {
	d.w.Close()
	go func() {
		b, _ := io.ReadAll(io.LimitReader(d.r, 4<<10))
		_, _ = io.Copy(io.Discard, d.r)
		d.done <- firstLine(b)
	}()
}

// wait returns the first line the child wrote, "" for none, once the
// pipe is at its end (after the child ended, which only started's caller
// may know).
func (d *diagnosis) wait() string { return <-d.done }

// close closes both ends (a reader still running returns).
func (d *diagnosis) close() {
	d.r.Close()
	d.w.Close()
}

// firstLine is b's first non-blank line, trimmed, at most 300 bytes, with
// "?" for anything unprintable.
func firstLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			l = strings.ToValidUTF8(l[:min(len(l), 300)], "?")
			return strings.Map(func(r rune) rune {
				if !unicode.IsPrint(r) {
					return '?'
				}
				return r
			}, l)
		}
	}
	return ""
}
