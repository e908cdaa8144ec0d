package containerhelper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/hostfs"
	"github.com/hutchsandbox/hutch/internal/session"
	"github.com/hutchsandbox/hutch/internal/streamserver"
	"github.com/hutchsandbox/hutch/internal/sysprog"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/sandbox"
)

// The roles: hutch's own static binary, mounted
// read-only into the container and started as
//
//	hutch-helper init           the container's PID 1 (idle, reaps zombies)
//	hutch-helper serve ROOT     the stream server, once per session, over
//	                            `docker exec -i` (stdin and stdout carry frames)
//	hutch-helper reaper         started by serve: runs commands one at a time
//
// Roles are chosen by argv[0]'s base name and the first argument, so a
// normal invocation of hutch never takes them.

// Main runs the role args names; ok is false when args name none
// (the program then carries on as itself).
func Main(args []string) (code int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "init":
		ready, watch := "", len(args) == 2 && strings.HasPrefix(args[1], "--until-eof=")
		if watch {
			ready = strings.TrimPrefix(args[1], "--until-eof=")
		} else if len(args) > 1 {
			fmt.Fprintf(os.Stderr, "hutch-helper: unknown arguments %q (usage: hutch-helper init [--until-eof=READY])\n", args[1:])
			return 2, true
		}
		sysprog.ReserveThreads(sysprog.IdleThreads + 1) // one more for the read of stdin
		return containerInit(watch, ready), true
	case "serve":
		protect, rest, err := protectArg(args[1:])
		var supervise []string
		if err == nil {
			supervise, rest, err = superviseArgs(rest, protect)
		}
		var lim boundary.CommandLimits
		var root string
		if err == nil {
			lim, root, err = serveArgs(rest)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "hutch-helper: %v (usage: hutch-helper serve [--protect=PATH,... [--supervise=ROOT]...] [--cpu-time=SECONDS] [--open-files=N] ROOT)\n", err)
			return 2, true
		}
		threads := sysprog.ServerThreads
		if len(supervise) > 0 {
			threads++ // the supervisor's, locked
		}
		sysprog.ReserveThreads(threads)
		return serveStream(os.Stdin, os.Stdout, root, lim, protect, supervise), true
	case "reaper":
		sysprog.ReserveThreads(sysprog.StarterThreads)
		return reaperMain(), true
	}
	return 0, false
}

// protectArg takes serve's leading --protect=PATH,... (the protected
// paths the file operations keep read-only at any depth below the root:
// policy.Policy.Protected, whose entries hold no comma) out of args.
func protectArg(args []string) (protect, rest []string, err error) {
	if len(args) == 0 || !strings.HasPrefix(args[0], "--protect=") {
		return nil, args, nil
	}
	for _, e := range strings.Split(strings.TrimPrefix(args[0], "--protect="), ",") {
		if e == "" || path.IsAbs(e) || path.Clean(e) != e || e == ".." || strings.HasPrefix(e, "../") {
			return nil, nil, fmt.Errorf("--protect entry %q is not a clean relative path", e)
		}
		protect = append(protect, e)
	}
	return protect, args[1:], nil
}

// superviseArgs takes serve's --supervise=ROOT options (each an absolute
// clean path: where a protected path is missing or a link, which no
// read-only bind keeps, so its commands need the supervisor) that follow
// --protect out of args.
func superviseArgs(args, protect []string) (roots, rest []string, err error) {
	for len(args) > 0 && strings.HasPrefix(args[0], "--supervise=") {
		r := strings.TrimPrefix(args[0], "--supervise=")
		if !path.IsAbs(r) || path.Clean(r) != r {
			return nil, nil, fmt.Errorf("--supervise root %q is not a clean absolute path", r)
		}
		roots = append(roots, r)
		args = args[1:]
	}
	if len(roots) > 0 && len(protect) == 0 {
		return nil, nil, errors.New("--supervise without --protect")
	}
	return roots, args, nil
}

// serveArgs reads serve's arguments: the optional limits
// (--cpu-time=SECONDS, a whole number from 1 up; --open-files=N, from
// MinOpenFiles up), each at most once, then the root, an absolute path.
func serveArgs(args []string) (lim boundary.CommandLimits, root string, err error) {
	for len(args) > 1 {
		name, v, _ := strings.Cut(args[0], "=")
		var dst *uint64
		lo, hi := uint64(1), uint64(boundary.MaxCPUSeconds)
		switch name {
		case "--cpu-time":
			dst = &lim.CPUSeconds
		case "--open-files":
			dst, lo, hi = &lim.OpenFiles, boundary.MinOpenFiles, 1<<32-1
		default:
			return lim, "", fmt.Errorf("unknown option %q", args[0])
		}
		n, err := strconv.ParseUint(v, 10, 64)
		switch {
		case *dst != 0:
			return lim, "", fmt.Errorf("%s given twice", name)
		case err != nil || n < lo || n > hi:
			return lim, "", fmt.Errorf("%s=%s: want a whole number from %d up to %d", name, v, lo, hi)
		}
		*dst = n
		args = args[1:]
	}
	if len(args) != 1 {
		return lim, "", errors.New("want one root")
	}
	if !path.IsAbs(args[0]) {
		return lim, "", fmt.Errorf("root %q is not an absolute path", args[0])
	}
	return lim, args[0], nil
}

// containerInit is an idle PID 1: it reaps every orphan that comes to it
// and ignores the signals a command inside could send it (the kernel then
// drops them: PID 1 receives no signal it ignores). `docker rm -f` still
// ends it with SIGKILL. With untilEOF (a watched container: its stdin is
// a pipe only the hutch that made it holds) it prints ready on stdout,
// then exits at the end of its stdin — when that hutch lets go or dies —
// and the container ends with it. It is not dumpable, so a command
// cannot open its stdin through /proc and hold it open.
func containerInit(untilEOF bool, ready string) int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	var eof chan struct{} // nil: never
	if untilEOF {
		_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
		eof = make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(eof)
		}()
		fmt.Println(ready)
	}
	for {
		noChildren()
		select {
		case <-chld:
		case <-eof:
			return 0
		case <-time.After(time.Minute): // a missed signal costs at most this
		}
	}
}

// streamServer is the backend of one host's stream (internal/streamserver
// reads the frames): file operations go through a local-tier guard rooted
// at the working directory, inside the container, so symbolic links are
// resolved where they live; commands go to reapers.
type streamServer struct {
	*hostfs.FS
	base map[string]string // PATH, HOME, LANG as the container gives them
	// limits are the container's own cgroup counters, open for the
	// server's life and read around each command to tell which limit
	// (memory, pids) it hit.
	limits *boundary.Counters
	// cmdLimits bind every command: each reaper is given them before it
	// starts one, and hands them down. The server itself lives without.
	cmdLimits boundary.CommandLimits
	// umask is what each reaper sets for its commands: -1 to keep the
	// one it inherits (the server's, when no supervisor runs).
	umask int

	mu   sync.Mutex
	idle []*reaperProc
}

func serveStream(in io.Reader, out io.Writer, root string, lim boundary.CommandLimits, protect, supervise []string) int {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) // commands (same user) cannot reach into it
	umask := -1                                      // the commands' umask, when the server's is 0 for the supervisor
	if len(supervise) > 0 {
		// The supervisor shares this process's umask (the runtime's
		// seccomp profile refuses it an unshare): 0, and each reaper
		// puts the commands' back. The file operations set their modes
		// exactly whatever the umask.
		umask = unix.Umask(0)
		if err := session.StartSupervisor(supervise, protect); err != nil {
			fmt.Fprintf(os.Stderr, "hutch-helper: a protected path is missing in a writable bind and its commands need the supervisor, which cannot run in this container: %v\n", err)
			return 1
		}
	}
	files, err := hostfs.New(root, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hutch-helper: %v\n", err)
		return 1
	}
	files.Protect(protect)
	s := &streamServer{FS: files, base: tierkit.BaseEnv(), limits: boundary.OwnCgroupFiles().Open(), cmdLimits: lim, umask: umask}
	defer s.shutdown()
	go s.prewarm()
	if err := streamserver.Serve(context.Background(), in, out, s, wire.Hello{PID: os.Getpid(), Root: files.Root()}); err != nil {
		fmt.Fprintf(os.Stderr, "hutch-helper: %v\n", err)
		return 2
	}
	return 0 // the host let go: the session ends
}

// Exec runs one command through an idle reaper and streams its output.
// The response goes out only after every output frame.
func (s *streamServer) Exec(ctx context.Context, req wire.StreamRequest, sio streamserver.Stdio) wire.StreamResponse {
	id := sio.ID
	job, err := s.execJob(req)
	if err != nil {
		return wire.StreamResponse{Err: wire.ToWire(err)}
	}
	r, err := s.takeReaper()
	if err != nil {
		return wire.StreamResponse{Err: wire.ToWire(err)}
	}
	var pipes [3][2]*os.File // stdin, stdout, stderr: [read, write]
	for i := range pipes {
		rd, wr, err := os.Pipe()
		if err != nil {
			r.discard()
			return wire.StreamResponse{Err: wire.ToWire(err)}
		}
		defer rd.Close()
		defer wr.Close()
		pipes[i] = [2]*os.File{rd, wr}
	}
	before := s.limits.Counts()
	err = r.conn.Send(wire.Request{ID: id, Op: "exec", Job: job, Timeout: req.TimeoutMS}, pipes[0][0], pipes[1][1], pipes[2][1])
	// The reaper holds its copies now: the output ends when the command's
	// last process lets go of it.
	pipes[0][0].Close()
	pipes[1][1].Close()
	pipes[2][1].Close()
	if err != nil {
		r.discard()
		return wire.StreamResponse{Err: wire.ToWire(fmt.Errorf("starting the command: %w", err))}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go sio.Pump(&wg, wire.FrameStdout, pipes[1][0])
	go sio.Pump(&wg, wire.FrameStderr, pipes[2][0])
	go sio.Feed(pipes[0][1])

	answered := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = r.conn.Send(wire.Request{ID: id, Op: "cancel"})
		case <-answered:
		}
	}()
	var res wire.Response
	_, rerr := r.conn.Recv(&res)
	close(answered)
	if rerr != nil {
		// The reaper died (a command killed it): what it ran may linger
		// and hold the pipes, so stop reading them after a moment.
		r.discard()
		time.AfterFunc(time.Second, func() {
			pipes[1][0].Close()
			pipes[2][0].Close()
		})
		res = wire.Response{Status: &wire.Status{Signal: int(syscall.SIGKILL)}}
	} else if res.Done {
		r.discard() // it retires (see reaperMain)
	} else {
		s.giveBack(r)
	}
	wg.Wait()
	if res.Err != nil {
		return wire.StreamResponse{Err: res.Err}
	}
	out := wire.StreamResponse{Status: res.Status, TimedOut: res.TimedOut}
	if !res.TimedOut {
		// The counters are the container's: a command running at the
		// same time may have moved them (as a refusal made during an
		// overlapping command is reported by both).
		out.Limit = s.limits.Counts().Since(before)
	}
	return out
}

// execJob checks the request and builds the reaper's job: the directory
// resolved inside the root, the environment the base plus the request's.
func (s *streamServer) execJob(req wire.StreamRequest) (*wire.Job, error) {
	if len(req.Argv) == 0 || len(req.Argv[0]) == 0 {
		return nil, fmt.Errorf("%w: empty command", sandbox.ErrConfig)
	}
	dir := string(req.Dir)
	if dir == "" {
		dir = "."
	}
	fi, err := s.FS.Stat(context.Background(), dir)
	switch {
	case err != nil:
		return nil, err
	case fi.Kind != sandbox.KindDir:
		return nil, tierkit.PathError("exec", dir, sandbox.ErrNotDir)
	}
	env := tierkit.MergeEnv(s.base)
	for _, kv := range req.Env {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			return nil, fmt.Errorf("%w: environment entry without '='", sandbox.ErrConfig)
		}
		env[k] = v
	}
	argv := make([]string, len(req.Argv))
	for i, a := range req.Argv {
		argv[i] = string(a)
	}
	return &wire.Job{Argv: argv, Env: tierkit.EnvList(env), Dir: path.Join(s.FS.Root(), fi.Path)}, nil
}

// maxIdleReapers bounds the reapers kept for later commands.
const maxIdleReapers = 2

func (s *streamServer) prewarm() {
	if r, err := s.startReaper(); err == nil {
		s.giveBack(r)
	}
}

func (s *streamServer) takeReaper() (*reaperProc, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		r := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return r, nil
	}
	s.mu.Unlock()
	return s.startReaper()
}

func (s *streamServer) giveBack(r *reaperProc) {
	s.mu.Lock()
	if len(s.idle) < maxIdleReapers {
		s.idle = append(s.idle, r)
		r = nil
	}
	s.mu.Unlock()
	if r != nil {
		r.discard()
	}
}

// shutdown lets every idle reaper go (a busy one sees its socket close
// and ends its command's processes).
func (s *streamServer) shutdown() {
	s.mu.Lock()
	idle := s.idle
	s.idle = nil
	s.mu.Unlock()
	for _, r := range idle {
		r.discard()
	}
}

// reaperProc is the server's handle on one reaper.
type reaperProc struct {
	cmd  *exec.Cmd
	conn *wire.Conn
}

// startReaper starts a reaper under the commands' limits: set from here
// (prlimit) before the reaper is given any command, so no command ever
// runs without them, and any failure to set one is this call's error.
func (s *streamServer) startReaper() (*reaperProc, error) {
	host, child, err := wire.SocketPair()
	if err != nil {
		return nil, err
	}
	defer child.Close()
	c := exec.Command("/proc/self/exe", "reaper")
	c.Args[0] = boundary.ContainerHelperName
	c.Dir = "/"
	env, extra := session.SupervisedHelper([]*os.File{child})
	if s.umask >= 0 {
		env = append(env, reaperUmaskEnv+strconv.Itoa(s.umask))
	}
	c.Env = append([]string{}, env...)
	c.ExtraFiles = extra
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		host.Close()
		return nil, fmt.Errorf("starting a reaper: %w", err)
	}
	go func() { _ = c.Wait() }()
	conn, err := wire.FileConn(host)
	if err != nil {
		_ = c.Process.Kill()
		return nil, fmt.Errorf("starting a reaper: %w", err)
	}
	r := &reaperProc{cmd: c, conn: conn}
	if err := setLimits(s.cmdLimits, c.Process.Pid); err != nil {
		r.discard()
		return nil, fmt.Errorf("setting a reaper's limits: %w", err)
	}
	return r, nil
}

// setLimits gives process pid the limits l (none for a 0).
func setLimits(l boundary.CommandLimits, pid int) error {
	if l.CPUSeconds > 0 {
		lim := unix.Rlimit{Cur: l.CPUSeconds, Max: l.CPUSeconds + 1}
		if err := unix.Prlimit(pid, unix.RLIMIT_CPU, &lim, nil); err != nil {
			return fmt.Errorf("CPU time: %w", err)
		}
	}
	if l.OpenFiles > 0 {
		lim := unix.Rlimit{Cur: l.OpenFiles, Max: l.OpenFiles}
		var old unix.Rlimit
		if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, &old); err != nil {
			if errors.Is(err, unix.EPERM) && unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old) == nil && old.Max < l.OpenFiles {
				return fmt.Errorf("open files %d: the container allows at most %d (the runtime's default): give a limit within it, or raise the runtime's default", l.OpenFiles, old.Max)
			}
			return fmt.Errorf("open files %d: %w", l.OpenFiles, err)
		}
	}
	return nil
}

// reaperUmaskEnv, in a reaper's environment, gives (in decimal) the umask
// its commands start with.
const reaperUmaskEnv = "HUTCH_UMASK="

// discard closes the reaper's socket: it ends what it runs and exits.
func (r *reaperProc) discard() { _ = r.conn.Close() }

// reaperMain runs commands one at a time, each in a session of its own,
// as a child subreaper: every process a command starts stays its
// descendant or, orphaned (setsid, double fork), is re-parented to the
// reaper. When the command ends, times out or is cancelled, the reaper
// kills all its descendants — the whole tree, daemons included — and reaps
// them before it reports. Concurrent commands each have their own reaper,
// so one command's end never touches another's processes.
func reaperMain() int {
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	sysprog.PrepareCommandOOM() // while its /proc files are still its own
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if v, ok := os.LookupEnv(strings.TrimSuffix(reaperUmaskEnv, "=")); ok {
		u, err := strconv.ParseUint(v, 10, 9)
		if err != nil {
			fmt.Fprintf(os.Stderr, "hutch-helper: reaper: umask %q: %v\n", v, err)
			return 1
		}
		unix.Umask(int(u))
	}
	conn := wire.NewConn(3)
	if err := session.UseSupervisor(); err != nil {
		// The server hears of it from the first command's answer: none
		// runs unsupervised.
		fmt.Fprintf(os.Stderr, "hutch-helper: reaper: %v\n", err)
		return 1
	}
	// Signals a command may send (same user) are caught and dropped;
	// caught rather than ignored so that commands start with the default
	// dispositions.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGPIPE, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGXCPU)
	go func() {
		for range sigs {
		}
	}()
	type execReq struct {
		req   wire.Request
		files []*os.File
	}
	reqs := make(chan execReq)
	// current is the id of the command running (0 between commands);
	// killing holds killMu, and the next command starts only once it is
	// free: a cancel that comes late (its command ended, the server sent
	// it anyway) kills nothing, and one under way ends before the next
	// command starts.
	var current atomic.Uint64
	var killMu sync.Mutex
	go func() {
		for {
			var r wire.Request
			files, err := conn.Recv(&r)
			if err != nil {
				// The server is gone: nothing may outlive it.
				killTree(false)
				os.Exit(0)
			}
			switch r.Op {
			case "exec":
				reqs <- execReq{r, files}
			case "cancel":
				killMu.Lock()
				if r.ID != 0 && r.ID == current.Load() {
					killTree(false)
				}
				killMu.Unlock()
			default:
				wire.CloseFiles(files)
			}
		}
	}()
	// The limits the server set (before the first request) are what every
	// command must start with. A command runs as this reaper's user, so
	// it may lower them from outside (prlimit on its parent); the reaper
	// then retires after that command rather than hand them on.
	var limits [session.RunnerLimits]unix.Rlimit
	first := true
	for r := range reqs {
		if first {
			limits, first = session.ReadLimits(), false
		}
		killMu.Lock()
		current.Store(r.req.ID)
		killMu.Unlock()
		res := runReaped(r.req, r.files)
		killMu.Lock()
		current.Store(0)
		killMu.Unlock()
		// A CPU-time limit binds this reaper's own (small) use too:
		// it retires at half of it, long before the limit could stop
		// it, and the server starts a fresh one.
		res.Done = session.ReadLimits() != limits || session.CPUHalfUsed(cpuLimit(limits[unix.RLIMIT_CPU]))
		if err := conn.Send(res); err != nil || res.Done {
			return 0
		}
	}
	return 0
}

// cpuLimit is the soft limit of an RLIMIT_CPU as a duration; 0 when there
// is none (or it is too large to hold one).
func cpuLimit(lim unix.Rlimit) time.Duration {
	if lim.Cur == unix.RLIM_INFINITY || lim.Cur > 1<<32 {
		return 0
	}
	return time.Duration(lim.Cur) * time.Second
}

// runReaped runs one command and ends every process it started.
func runReaped(r wire.Request, files []*os.File) wire.Response {
	defer wire.CloseFiles(files)
	res := wire.Response{ID: r.ID}
	if r.Job == nil || len(r.Job.Argv) == 0 || len(files) != 3 {
		res.Err = wire.ToWire(errors.New("reaper: exec needs a command and three pipes"))
		return res
	}
	job := *r.Job
	prog, st, ok := session.FindProgram(job, files[2])
	if !ok {
		res.Status = &st
		return res
	}
	pid, st, ok := sysprog.ForkCommand(job, prog, true, files[0], files[1], files[2])
	if !ok {
		res.Status = &st
		return res
	}
	wire.CloseFiles(files) // the command holds them now
	var timedOut atomic.Bool
	var stopTimer func()
	if r.Timeout > 0 {
		fired := make(chan struct{})
		t := time.AfterFunc(time.Duration(r.Timeout)*time.Millisecond, func() {
			defer close(fired)
			timedOut.Store(true)
			killTree(false)
		})
		// A kill under way finishes before the tree is swept and the
		// next command starts: t.Stop does not wait for it.
		stopTimer = func() {
			if !t.Stop() {
				<-fired
			}
		}
	}
	st = waitFor(pid)
	if stopTimer != nil {
		stopTimer()
	}
	killTree(true) // what it left behind goes now
	res.Status, res.TimedOut = &st, timedOut.Load()
	return res
}

// waitFor reaps children (orphans come here too) until pid ends, and
// returns its status.
func waitFor(pid int) wire.Status {
	st, err := sysprog.ReapUntil(pid)
	if err != nil {
		return wire.Status{Signal: int(syscall.SIGKILL)} // ECHILD: cannot happen
	}
	return st
}

// proc is one process as /proc shows it.
type proc struct {
	pid, ppid int
	zombie    bool
	start     uint64 // start time in clock ticks since boot: pins the process
}

// readProc parses /proc/PID/stat.
func readProc(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	return parseStat(pid, b)
}

// parseStat reads pid's /proc/PID/stat contents b (see
// [boundary.ParseStat]).
func parseStat(pid int, b []byte) (proc, bool) {
	ppid, zombie, start, ok := boundary.ParseStat(b)
	if !ok {
		return proc{}, false
	}
	return proc{pid: pid, ppid: ppid, zombie: zombie, start: start}, true
}

// descendants lists every process below root, from one pass over /proc.
func descendants(root int) []proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []proc
	todo := []int{root}
	for len(todo) > 0 {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, c := range children[pid] {
			out = append(out, c)
			todo = append(todo, c.pid)
		}
	}
	return out
}

// killTree kills every descendant of this process until none is left
// alive. With reap it also reaps them (only the thread that waits for the
// command may reap, so a timer kills without reaping). Each signal goes
// through a pidfd opened and then checked against the process seen in
// /proc, so a recycled pid is never hit.
func killTree(reap bool) {
	if reap && noChildren() {
		return // nothing was left behind: the common case, without a scan
	}
	self := os.Getpid()
	for round := 0; round < 10000; round++ {
		procs := descendants(self)
		alive := 0
		for _, p := range procs {
			if !p.zombie {
				alive++
				signalProc(p, unix.SIGKILL)
			}
		}
		if reap {
			noChildren()
		}
		if len(procs) == 0 || (!reap && alive == 0) {
			return
		}
		time.Sleep(time.Millisecond) // let the kernel finish the kills
	}
}

// noChildren reaps exited children and reports whether none is left. A
// subreaper inherits every orphan of its tree, so once the command itself
// is reaped, no child means no descendant at all.
func noChildren() bool {
	for {
		pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.ECHILD):
			return true
		case err != nil || pid == 0:
			return false
		}
	}
}

func signalProc(p proc, sig unix.Signal) {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if errors.Is(err, unix.ENOSYS) {
		_ = unix.Kill(p.pid, sig) // kernels before 5.3
		return
	}
	if err != nil {
		return // gone already
	}
	defer unix.Close(fd)
	if now, ok := readProc(p.pid); !ok || now.start != p.start {
		return // another process has the pid now
	}
	_ = unix.PidfdSendSignal(fd, sig, nil, 0)
}
