package container

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/streamclient"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// ErrGone: the sandbox's container was stopped or removed behind hutch's
// back. Errors matching it also match sandbox.ErrClosed: the sandbox is
// of no further use; make a new one.
var ErrGone = errors.New("the sandbox's container is gone")

// ErrNotStopped: a command's timeout or cancel came, and hutch could not
// confirm that the command was stopped — its container did not answer
// within ExecGrace (paused, or overloaded). The command may still run.
var ErrNotStopped = streamclient.ErrNotStopped

// StopGrace bounds how long a call waits past its own deadline (a
// command's timeout, the caller's context, FileTimeout): for the
// helper's report of a command it stopped, for the fallback's kill of
// one, for the runtime's program to end. Past it the call returns
// (ErrNotStopped for a command).
const StopGrace = streamclient.StopGrace

// ExecGrace bounds how long Exec waits past a command's timeout for the
// helper's report of its end: the graces a tier may take then for the
// output (sandbox.OutputGrace, sandbox.LiveGrace), plus StopGrace.
const ExecGrace = streamclient.ExecGrace

// FileTimeout is the deadline of a file operation (Read, ReadStat, Write,
// Stat, Glob) whose context has none: a paused or hung container holds
// no call longer than this, plus StopGrace.
const FileTimeout = streamclient.FileTimeout

// Mode says how a started sandbox reaches its container.
type Mode string

// The modes.
const (
	ModeNone   Mode = ""       // not started yet
	ModeHelper Mode = "helper" // the fast path: one stream to the helper
	ModeCLI    Mode = "cli"    // one runtime exec per operation
)

// Sandbox is a container. Create one with New; the container starts on the
// first operation (or Start). It is safe for concurrent use.
type Sandbox struct {
	// Front has the file operations: Read, ReadStat, Write, Stat, Glob,
	// List, Search, Mkdir, Remove, Rename. List, Search and the three
	// that change entries need hutch's helper in the container (see
	// Mode): without it, they are ErrUnsupported.
	streamclient.Front
	o      Options
	prog   string // the runtime's program, resolved
	helper string // the helper binary to mount ("" none)
	arch   string // the helper's architecture (GOARCH), when known
	noHelp string // why there is no helper, when there is none

	mu       sync.Mutex
	closed   bool
	starting chan struct{} // closed when the start in progress ends
	id       string
	gone     error
	conn     *streamclient.Conn
	watch    *watcher        // nil unless the container is watched
	swept    map[string]bool // directories the fallback's writes swept
	mode     Mode
	why      string // why the fallback is in use
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// New checks the options and finds the runtime's program; it starts
// nothing (the container starts on first use). Errors match
// sandbox.ErrConfig, one line each: no image, an unknown runtime, the
// runtime's program not in PATH, reconnect on Apple, a malformed field.
// ctx is there for the shape every tier shares: New does not block.
func New(ctx context.Context, opts Options) (*Sandbox, error) {
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	o.protectBinds, o.supervise = o.protectedBinds()
	prog, err := o.program()
	if err != nil {
		return nil, err
	}
	s := &Sandbox{o: o, prog: prog}
	s.front()
	s.helper, s.arch, s.noHelp, err = chooseHelper(o)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// front sets up the file operations.
func (s *Sandbox) front() {
	s.Front = streamclient.NewFront(s.o.WorkDir, "the container", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.closed
	}, s.ready, func(err error) error { return s.failed(err, isLost(err)) })
}

// program finds the runtime's program (Program, or the runtime's own).
func (o Options) program() (string, error) {
	name := o.Program
	if name == "" {
		name = o.Runtime.Program()
	}
	prog, err := exec.LookPath(name)
	if err != nil {
		return "", configErr("the %s runtime's program %q was not found in PATH: install it or set the program's path", o.Runtime, name)
	}
	return prog, nil
}

// chooseHelper picks the helper binary to mount, or says why there is
// none.
func chooseHelper(o Options) (path, arch, why string, err error) {
	switch {
	case o.NoHelper:
		return "", "", "the helper was turned off (NoHelper)", nil
	case o.Helper != "":
		if !o.Engine.remote() {
			if _, err := os.Stat(o.Helper); err != nil {
				return "", "", "", configErr("helper %s: %v", o.Helper, err)
			}
			return o.Helper, initArch(o.Helper), "", nil
		}
		return o.Helper, "", "", nil // a path on the engine's machine
	case o.Engine.remote():
		return "", "", "a remote engine cannot mount this machine's binary: set Options.Helper to a hutch binary on the engine's machine", nil
	case runtime.GOOS != "linux":
		return "", "", "this program is not a Linux binary: set Options.Helper to a Linux build of hutch", nil
	case !helper.Ready():
		return "", "", "this program does not call helper.Main(), so it cannot serve as the helper", nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", "", "cannot find this program's binary: " + err.Error(), nil
	}
	return exe, initArch(exe), "", nil
}

// initArch is the architecture of a helper binary that can be a
// container's PID 1 in any image of that architecture: a static one. A
// dynamically linked helper is still tried through exec (the image may
// have its libraries), never as PID 1.
func initArch(p string) string {
	if arch, static := elfArch(p); static {
		return arch
	}
	return ""
}

// HelperNote says, before anything starts, when operations will not take
// the helper's fast path everywhere, why, what it costs and the fix: no
// helper at all, or a dynamically linked one (hutch built with cgo),
// which runs only in an image with a matching C library. "" when the
// helper is static, turned off on purpose, or on the engine's machine.
// The fallback a helper that fails at start takes is in Mode.
func (s *Sandbox) HelperNote() string {
	const cost = "every operation is then one runtime exec (a read_file about 100x slower than through the helper)"
	switch {
	case s.o.NoHelper:
		return ""
	case s.helper == "":
		return "container: no helper (" + s.noHelp + "): " + cost
	case s.arch == "" && !s.o.Engine.remote():
		return "container: hutch's helper " + s.helper + " is dynamically linked (built with cgo), so it runs only in images with a matching C library; elsewhere " + cost + ": build hutch static for the fast path in any image (CGO_ENABLED=0 go build ./cmd/hutch)"
	}
	return ""
}

// DefaultHelperNote is HelperNote for a sandbox of this program with a
// local engine and no Helper set: what hutch check says of the container
// tier's fast path.
func DefaultHelperNote() string {
	s := &Sandbox{}
	s.helper, s.arch, s.noHelp, _ = chooseHelper(Options{})
	return s.HelperNote()
}

// Root is the working directory inside the container.
func (s *Sandbox) Root() string { return s.o.WorkDir }

// Scope names what calls in this sandbox reach, for approvals (see
// sandbox.Scoper): the runtime, the engine, the container's configuration
// (ConfigHash: image, binds and their host sources, network, limits, ...)
// and the working directory. The container's name is left out, so a
// reconnect keeps its approvals.
func (s *Sandbox) Scope() string {
	sum := sha256.Sum256([]byte(strings.Join([]string{string(s.o.Runtime), s.o.Engine.Context, s.o.Engine.Host, s.o.ConfigHash(false)}, "\x00")))
	return fmt.Sprintf("container %s %s", hex.EncodeToString(sum[:12]), s.o.WorkDir)
}

// Name is the container's name and identity label value.
func (s *Sandbox) Name() string { return s.o.Name }

// Options returns the options as normalized by New (defaults filled in).
func (s *Sandbox) Options() Options { return s.o }

// HardeningGaps lists the default hardenings this sandbox lacks (see
// Options.HardeningGaps).
func (s *Sandbox) HardeningGaps() []string { return s.o.HardeningGaps() }

// ID is the container's id once started, "" before.
func (s *Sandbox) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Mode says how the started sandbox reaches its container and, for the
// fallback, why.
func (s *Sandbox) Mode() (Mode, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode, s.why
}

// Start starts (or, with Reconnect, finds) the container and connects to
// it now rather than on the first operation.
func (s *Sandbox) Start(ctx context.Context) error {
	_, err := s.ready(ctx)
	return err
}

// ready returns the backend, starting the container or reconnecting to
// the helper first when needed. Concurrent callers share one start.
func (s *Sandbox) ready(ctx context.Context) (streamclient.Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			return nil, sandbox.ErrClosed
		case s.gone != nil:
			err := s.gone
			s.mu.Unlock()
			return nil, err
		case s.starting != nil:
			ch := s.starting
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case s.mode == ModeCLI:
			s.mu.Unlock()
			return cliBackend{s}, nil
		case s.mode == ModeHelper && s.conn.Alive():
			c := s.conn
			s.mu.Unlock()
			return c, nil
		}
		ch := make(chan struct{})
		s.starting = ch
		id := s.id
		s.mu.Unlock()
		err := s.bringUp(ctx, id)
		s.mu.Lock()
		s.starting = nil
		close(ch)
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// bringUp starts the container when id is "" (or finds it, with
// Reconnect), then connects: the helper's stream when it can run there,
// otherwise the fallback.
func (s *Sandbox) bringUp(ctx context.Context, id string) error {
	if id == "" {
		var err error
		if id, err = s.create(ctx); err != nil {
			return err
		}
		s.mu.Lock()
		s.id = id
		s.mu.Unlock()
	} else if err := s.checkRunning(ctx, id); err != nil {
		return err
	}
	mode, why := ModeCLI, s.noHelp
	var conn *streamclient.Conn
	if s.helper != "" {
		var err error
		conn, err = streamclient.Dial(ctx, exec.Command(s.prog, s.o.HelperArgs(id)...), "hutch's helper in the container")
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if gerr := s.checkRunning(ctx, id); gerr != nil {
				return gerr
			}
			if len(s.o.supervise) > 0 {
				// Through the runtime's exec, commands could make the
				// missing protected paths the supervisor keeps.
				return fmt.Errorf("%w: container: a protected path is missing in a writable bind, and only hutch's helper keeps commands from making it (its supervisor), but the helper could not start in the container (%v): make the missing paths (hutch protects those that exist with read-only binds), unprotect them, or turn the helper off (NoHelper, --no-helper) to run without that protection",
					sandbox.ErrUnsupported, err)
			}
			if s.o.helperLimits() {
				// The container was made without these limits (RunArgs):
				// the fallback would run commands unbounded.
				return fmt.Errorf("%w: container: the CPU-time and open-files limits are set on each command by hutch's helper, which could not start in the container (%v): use a static Linux build of hutch for the image's architecture, or turn the helper off (NoHelper, --no-helper) to have the runtime set them for the whole container",
					sandbox.ErrUnsupported, err)
			}
			why = "the helper could not start in the container: " + err.Error()
		} else {
			mode, why = ModeHelper, ""
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed && conn != nil {
		conn.Close(sandbox.ErrClosed)
		return sandbox.ErrClosed
	}
	s.conn, s.mode, s.why = conn, mode, why
	return nil
}

// create finds the container (Reconnect) or creates and starts it, and
// returns its id.
func (s *Sandbox) create(ctx context.Context) (string, error) {
	o := s.o
	if o.Reconnect {
		out, err := s.run(ctx, nil, o.FindArgs(o.Name)...)
		if err != nil {
			return "", fmt.Errorf("looking for container %s: %w", o.Name, err)
		}
		ids := strings.Fields(out)
		switch {
		case len(ids) > 1:
			return "", fmt.Errorf("%w: container: reconnect is ambiguous: %d containers carry the label %s=%s (%s): remove all but one",
				sandbox.ErrConfig, len(ids), LabelID, o.Name, strings.Join(ids, ", "))
		case len(ids) == 1:
			out, err := s.run(ctx, nil, o.LabelArgs(ids[0], LabelConfig)...)
			if err != nil {
				return "", fmt.Errorf("checking container %s: %w", o.Name, err)
			}
			if strings.TrimSpace(out) != o.ConfigHash(s.helper != "") {
				return "", fmt.Errorf("%w: container: %s was made with other options than this sandbox's (network, capabilities, limits, user, binds, working directory or image, or with or without hutch's helper, or by another version of hutch): reconnect with the options it was made with, or remove it",
					sandbox.ErrConfig, o.Name)
			}
			if out, err := s.run(ctx, nil, o.StateArgs(ids[0])...); err == nil && strings.TrimSpace(out) != "true" {
				if _, err := s.run(ctx, nil, o.StartArgs(ids[0])...); err != nil {
					return "", fmt.Errorf("starting container %s again: %w", o.Name, err)
				}
			}
			return ids[0], nil
		}
	}
	// The helper is the container's PID 1 when it is known to run there:
	// static, built for the image's architecture. Otherwise a shell keeps the
	// container alive and the helper is tried through exec (it may still
	// run, natively or emulated).
	asInit := false
	if s.helper != "" && s.arch != "" {
		if out, err := s.run(ctx, nil, o.ImageArgs()...); err == nil {
			asInit = strings.TrimSpace(out) == "linux/"+s.arch
		}
	}
	if o.watched() {
		return s.runWatched(ctx, asInit)
	}
	out, err := s.run(ctx, nil, o.RunArgs(o.Name, s.helper, asInit)...)
	if err != nil {
		return "", s.startFailed(ctx, err)
	}
	lines := strings.Fields(out)
	if len(lines) == 0 {
		return "", fmt.Errorf("container start failed: %s printed no container id", s.o.Runtime.Program())
	}
	return lines[len(lines)-1], nil
}

// startFailed is the error of a failed start. A start that failed after
// creating the container leaves it behind: it is removed.
func (s *Sandbox) startFailed(ctx context.Context, err error) error {
	if strings.Contains(err.Error(), "is already in use") {
		return fmt.Errorf("%w: container: a container named %s exists already: choose another name, remove it, or set Reconnect", sandbox.ErrConfig, s.o.Name)
	}
	_, _ = s.run(context.WithoutCancel(ctx), nil, s.o.RemoveArgs(s.o.Name)...)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("container start failed: %w", err)
}

// watched reports whether the container is made to die with this
// process (WatchedRunArgs): all but a Reconnect one, on docker and
// podman.
func (o Options) watched() bool { return !o.Reconnect && o.Runtime != Apple }

// watcher is the runtime's program attached to a watched container: its
// standard input is a pipe whose only writer is this process, so the
// container's main process sees its input end — and exits, and the
// runtime removes the container — when Close lets go or when this
// process dies, however it dies.
type watcher struct {
	cmd   *exec.Cmd
	stdin *os.File // the pipe's write end
	done  chan struct{}
}

// runWatched creates and starts the container attached (WatchedRunArgs),
// waits for its main process to say it runs, and returns its id. An
// orphan sweep (see GC) then runs in the background.
func (s *Sandbox) runWatched(ctx context.Context, asInit bool) (string, error) {
	dir, err := os.MkdirTemp("", "hutch-cid-")
	if err != nil {
		return "", fmt.Errorf("container start failed: %w", err)
	}
	defer os.RemoveAll(dir)
	cidfile := filepath.Join(dir, "id")
	inR, inW, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("container start failed: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return "", fmt.Errorf("container start failed: %w", err)
	}
	defer outR.Close()
	c := exec.Command(s.prog, s.o.WatchedRunArgs(s.o.Name, s.helper, asInit, cidfile, Owner())...)
	errb := &tierkit.TailBuffer{Max: 4096}
	c.Stdin, c.Stdout, c.Stderr = inR, outW, errb
	// Its own process group: a terminal's Ctrl-C is this process's to act
	// on, not the runtime program's.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = c.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		return "", fmt.Errorf("container start failed: %w", err)
	}
	w := &watcher{cmd: c, stdin: inW, done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		br := bufio.NewReader(outR)
		line, err := br.ReadString('\n')
		if err == nil && line != ReadyLine+"\n" {
			err = fmt.Errorf("the container's main process printed %q before it was ready", line)
		}
		ready <- err
		_, _ = io.Copy(io.Discard, br) // nothing more should come
	}()
	go func() { _ = c.Wait(); close(w.done) }()
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		var b []byte
		if b, err = os.ReadFile(cidfile); err == nil && len(strings.TrimSpace(string(b))) == 0 {
			err = fmt.Errorf("%s wrote no container id", s.o.Runtime.Program())
		}
		if err == nil {
			s.mu.Lock()
			s.watch = w
			s.mu.Unlock()
			go func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				defer cancel()
				s.sweep(ctx)
			}()
			return strings.TrimSpace(string(b)), nil
		}
	}
	w.stop()
	if msg := runtimeSays(errb.Bytes()); msg != "" {
		err = fmt.Errorf("%s %s: %s", s.o.Runtime.Program(), "run", msg)
	}
	return "", s.startFailed(ctx, err)
}

// stop lets go of the container's input and waits (at most StopGrace,
// then kills it) for the runtime's program to end.
func (w *watcher) stop() {
	w.stdin.Close()
	select {
	case <-w.done:
	case <-time.After(StopGrace):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
}

// checkRunning returns nil when container id runs, and the gone error
// (remembered) when it does not exist or has stopped.
func (s *Sandbox) checkRunning(ctx context.Context, id string) error {
	out, err := s.run(ctx, nil, s.o.StateArgs(id)...)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	detail := ""
	switch {
	case err != nil && (strings.Contains(strings.ToLower(err.Error()), "no such") || strings.Contains(strings.ToLower(err.Error()), "not found")):
		detail = "removed"
	case err != nil:
		return fmt.Errorf("checking container %s: %w", s.o.Name, err)
	case s.o.Runtime == Apple:
		return nil // it exists; Apple's inspect is not read further
	case strings.TrimSpace(out) != "true":
		detail = "stopped"
	default:
		return nil
	}
	gone := &streamclient.Gone{Kind: ErrGone, Who: "container " + s.o.Name, Detail: detail}
	s.mu.Lock()
	if s.gone == nil {
		s.gone = gone
	}
	s.mu.Unlock()
	return gone
}

// failed turns an operation's failure into what the caller should see:
// ErrClosed after Close, the gone error when the container went away.
func (s *Sandbox) failed(err error, connLost bool) error {
	s.mu.Lock()
	closed, gone, id := s.closed, s.gone, s.id
	s.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("%w: %v", sandbox.ErrClosed, err)
	case gone != nil:
		return gone
	case connLost && id != "":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if gerr := s.checkRunning(ctx, id); errors.Is(gerr, ErrGone) {
			return gerr
		}
	}
	return err
}

// run runs the runtime's program with args and returns its standard
// output; the error carries the end of its standard error.
func (s *Sandbox) run(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	c := exec.CommandContext(ctx, s.prog, args...)
	c.Stdin = stdin
	var out bytes.Buffer
	errb := &tierkit.TailBuffer{Max: 4096}
	c.Stdout = &limitedWriter{w: &out, n: 16 << 20}
	c.Stderr = errb
	c.WaitDelay = 5 * time.Second
	if err := c.Run(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		msg := runtimeSays(errb.Bytes())
		if msg == "" {
			msg = err.Error()
		}
		return out.String(), fmt.Errorf("%s %s: %s", s.o.Runtime.Program(), subcommand(args, s.o), msg)
	}
	return out.String(), nil
}

// runtimeSays is what a runtime's program printed on stderr, on one line,
// without its usage hints ("See 'docker run --help'.").
func runtimeSays(stderr []byte) string {
	var keep []string
	for _, line := range strings.Split(string(stderr), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "See '") || strings.HasPrefix(line, "Run '") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, " ")
}

func subcommand(args []string, o Options) string {
	if n := len(o.globalArgs()); n < len(args) {
		return args[n]
	}
	return ""
}

// limitedWriter keeps the first n bytes and drops the rest.
type limitedWriter struct {
	w io.Writer
	n int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(int64(len(p)), l.n)
		l.n -= k
		_, _ = l.w.Write(p[:k])
	}
	return len(p), nil
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Exec runs a command in the container, starting in cmd.Dir under the
// working directory. The environment is PATH, HOME and LANG as the image
// sets them, plus Options.Env, plus cmd.Env. When the command ends, times
// out or is cancelled, every process it started is killed.
func (s *Sandbox) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	cmd, err := s.Command(cmd, s.o.Env)
	if err != nil {
		return sandbox.Result{}, err
	}
	b, err := s.ready(ctx)
	if err != nil {
		return sandbox.Result{}, err
	}
	res, err := b.Exec(ctx, cmd)
	if err != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("container exec: %w", ctx.Err())
		}
		if errors.Is(err, ErrNotStopped) {
			return res, fmt.Errorf("container %s: %w: unpause the container, or remove it", s.o.Name, err)
		}
		return res, s.failed(err, isLost(err))
	}
	if res.Limit == "" && !res.TimedOut {
		res.Limit = boundary.RlimitHit(res.ExitCode, s.o.CPUTime > 0, s.o.FileSize > 0)
	}
	return res, nil
}

// Supports reports every capability: files and a shell; manage (List,
// Mkdir, Remove, Rename) unless the container runs without hutch's
// helper, which only shows once it has started (see Mode).
func (s *Sandbox) Supports(c sandbox.Feature) bool {
	switch c {
	case sandbox.FeatureRead, sandbox.FeatureWrite, sandbox.FeatureGlob, sandbox.FeatureStat, sandbox.FeatureShell:
		return true
	case sandbox.FeatureManage:
		m, _ := s.Mode()
		return m != ModeCLI
	}
	return false
}

// Instructions describe the container in plain words.
func (s *Sandbox) Instructions() string {
	o := s.o
	var b strings.Builder
	fmt.Fprintf(&b, "You run inside a %s container (image %s), in %s.", o.Runtime, o.Image, o.WorkDir)
	switch o.Network {
	case "none":
		b.WriteString(" There is no network access.")
	case "all":
		b.WriteString(" The network is reachable.")
	default:
		fmt.Fprintf(&b, " The container is on the network %s.", o.Network)
	}
	w := o.writable()
	if o.WritableRoot {
		b.WriteString(" The whole container filesystem is writable; changes outside the binds are lost when the sandbox closes.")
	} else {
		fmt.Fprintf(&b, " Only %s can be changed; everything else is read-only.", strings.Join(w, ", "))
	}
	var ro []string
	for _, bd := range o.Binds {
		if !bd.Writable {
			ro = append(ro, bd.Target)
		}
	}
	if len(ro) > 0 {
		fmt.Fprintf(&b, " Read-only host files are at %s.", strings.Join(ro, ", "))
	}
	if o.PidsLimit > 0 && o.Runtime != Apple {
		fmt.Fprintf(&b, " At most %d processes.", o.PidsLimit)
	}
	if o.Memory > 0 {
		fmt.Fprintf(&b, " Memory limit %d MiB.", o.Memory>>20)
	}
	if len(o.protected) > 0 && slices.ContainsFunc(o.Binds, func(b Bind) bool { return b.Writable }) {
		b.WriteString(" " + policy.ProtectedNote(o.protected, "container", !o.NoHelper))
	}
	return b.String()
}

// Close ends the session and removes the container (unless Reconnect, which
// leaves it running for the next sandbox of the same name). Running
// operations fail with sandbox.ErrClosed. It is idempotent; it returns the
// runtime's error when the container could not be removed (a container
// already gone is not an error).
func (s *Sandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ch := s.starting
	s.mu.Unlock()
	if ch != nil {
		<-ch // a start in progress finishes (or fails) first
	}
	s.mu.Lock()
	conn, id, w := s.conn, s.id, s.watch
	s.mu.Unlock()
	if conn != nil {
		conn.Close(sandbox.ErrClosed)
	}
	if id == "" || s.o.Reconnect {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.run(ctx, nil, s.o.RemoveArgs(id)...)
	if w != nil {
		w.stop()
	}
	if err != nil && !removedAlready(err) {
		return fmt.Errorf("removing container %s: %w", s.o.Name, err)
	}
	return nil
}

// removedAlready reports whether a runtime's error removing a container
// says it is gone, or on its way out (Docker removes a --rm container
// killed from outside itself, and refuses a second removal meanwhile):
// what a removal wants either way.
func removedAlready(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "no such") || strings.Contains(msg, "removal of container") && strings.Contains(msg, "already in progress")
}
