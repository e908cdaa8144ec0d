// Package remote is the remote tier: a sandbox whose files and commands
// are on another machine, served there by `hutch serve` (package server)
// over one byte stream that a Dialer opens — `ssh host hutch serve
// --stdio`, `kubectl exec -i POD -- hutch serve --stdio`, `docker exec -i`.
//
// The guard runs where the files are: this side checks paths lexically
// (no `..` out of the root, no NUL, no overlong path) before anything is
// sent, and the served tier resolves links and enforces its policy on its
// own machine. Every call carries its deadline (a command's timeout, a
// file operation's context deadline, 30 s when it has none), so nothing
// waits on a provider's defaults. A lost stream is never reconnected
// silently: the session's state (its commands, the served sandbox) ended
// with it, so the call that sees it and every later one fail with an
// error matching ErrGone.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/streamclient"
	"github.com/hutchsandbox/hutch/sandbox"
)

// ErrGone: the session with the server ended (the stream was cut, the
// server exited or restarted). Errors matching it also match
// sandbox.ErrClosed: the sandbox is of no further use; make a new one.
var ErrGone = errors.New("the remote session is gone")

// Dialer opens one stream to a `hutch serve`: any byte stream whose other
// end is the server's standard input and output (or its network
// session). A stream that also has a `Says() string` method (what the
// program that carries it printed on stderr) gets its last line added to
// errors.
type Dialer interface {
	// Dial starts the stream; ctx bounds the start only. Close must end
	// it (kill the program, close the connection).
	Dial(ctx context.Context) (io.ReadWriteCloser, error)
	// String names the server in errors and Instructions.
	String() string
}

// Command is a Dialer that runs a program whose standard input and output
// reach `hutch serve --stdio`: Command("ssh", "box", "hutch", "serve",
// "--stdio"), or Command("kubectl", "exec", "-i", "pod", "--", "hutch",
// "serve", "--stdio"). The program's own environment is hutch's (ssh and
// kubectl need theirs); its standard error is kept, the last line added
// to errors.
func Command(name string, args ...string) Dialer {
	return commandDialer{name: name, args: args}
}

type commandDialer struct {
	name string
	args []string
}

func (d commandDialer) Dial(ctx context.Context) (io.ReadWriteCloser, error) {
	if d.name == "" {
		return nil, fmt.Errorf("%w: remote: empty command: give the program that reaches hutch serve --stdio", sandbox.ErrConfig)
	}
	prog, err := exec.LookPath(d.name)
	if err != nil {
		return nil, fmt.Errorf("%w: remote: %v", sandbox.ErrConfig, err)
	}
	return streamclient.StartCommand(exec.Command(prog, d.args...))
}

func (d commandDialer) String() string {
	return "`" + strings.Join(append([]string{d.name}, d.args...), " ") + "`"
}

// FromCmd is a Dialer that starts c, a prepared command (its environment,
// directory and arguments set as the caller wants) whose standard input
// and output reach `hutch serve --stdio`. A command starts once: a
// second Dial is an error. c's Stdin, Stdout and Stderr must be unset.
func FromCmd(c *exec.Cmd) Dialer { return &cmdDialer{c: c} }

type cmdDialer struct {
	mu   sync.Mutex
	c    *exec.Cmd
	used bool
}

func (d *cmdDialer) Dial(ctx context.Context) (io.ReadWriteCloser, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.used {
		return nil, fmt.Errorf("%w: remote: %s was started already: a command dials once, make a new one", sandbox.ErrConfig, d)
	}
	d.used = true
	return streamclient.StartCommand(d.c)
}

func (d *cmdDialer) String() string { return "`" + strings.Join(d.c.Args, " ") + "`" }

// Options configure a remote sandbox.
type Options struct {
	// Env is added to every command's environment (on top of the served
	// tier's base).
	Env map[string]string
}

// Sandbox is a session with a `hutch serve`. It is safe for concurrent
// use.
type Sandbox struct {
	// Front has the file operations: Read, ReadStat, Write, Stat, Glob,
	// List, Search, Mkdir, Remove, Rename, each the served sandbox's own.
	streamclient.Front
	peer string
	o    Options
	re   reattacher // nil: the session ends with its stream

	mu     sync.Mutex
	conn   *streamclient.Conn
	closed bool
	gone   error
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// New dials the server and waits for its hello (at most 30 s, or until ctx
// ends), so a server that cannot be reached, or speaks another protocol
// version, is New's error.
func New(ctx context.Context, d Dialer, opts Options) (*Sandbox, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: remote: no dialer: give remote.Command(...) or a server URL", sandbox.ErrConfig)
	}
	for k, v := range opts.Env {
		if err := sandbox.CheckEnvVar(k, v); err != nil {
			return nil, err
		}
	}
	rwc, err := d.Dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("remote: reaching %s: %w", d, err)
	}
	conn, err := streamclient.Open(ctx, rwc, d.String())
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	s := &Sandbox{peer: d.String(), o: opts, conn: conn}
	s.re, _ = rwc.(reattacher)
	s.Front = streamclient.NewFront(conn.Root(), "hutch serve at "+s.peer, s.isClosed, s.ready, s.failed)
	return s, nil
}

func (s *Sandbox) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// ready returns the session, or why it cannot be used.
func (s *Sandbox) ready(ctx context.Context) (streamclient.Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, sandbox.ErrClosed
	case s.gone != nil:
		return nil, s.gone
	}
	if s.conn.Alive() {
		return s.conn, nil
	}
	if s.re == nil {
		s.gone = s.goneErr(nil)
		return nil, s.gone
	}
	// The connection was lost, the session may not be: reattach (the
	// calls that were running when it was lost have failed).
	rwc, err := s.re.reattach(ctx)
	if err != nil {
		if unknownSession(err) {
			s.gone = s.goneErr(err)
			return nil, s.gone
		}
		return nil, fmt.Errorf("%w: reattaching to the session at %s: %v", streamclient.ErrLost, s.peer, err)
	}
	conn, err := streamclient.Open(ctx, rwc, s.peer)
	if err != nil {
		return nil, fmt.Errorf("%w: reattaching to the session at %s: %v", streamclient.ErrLost, s.peer, err)
	}
	s.conn = conn
	return conn, nil
}

// failed turns an operation's failure into what the caller should see:
// ErrClosed after Close, ErrGone once the stream is lost.
func (s *Sandbox) failed(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("%w: %v", sandbox.ErrClosed, err)
	case s.gone != nil:
		return s.gone
	case errors.Is(err, streamclient.ErrLost) && s.re == nil:
		s.gone = s.goneErr(err)
		return s.gone
	case errors.Is(err, streamclient.ErrLost):
		return fmt.Errorf("%w (the next call reattaches to the session)", err)
	}
	return err
}

func (s *Sandbox) goneErr(err error) error {
	detail := "the stream ended"
	if err != nil {
		detail = err.Error()
	}
	return &streamclient.Gone{Kind: ErrGone, Who: "hutch serve at " + s.peer, Detail: detail}
}

// served is what the server said of the sandbox it serves.
func (s *Sandbox) served() (tier, instructions, scope string, features []sandbox.Feature) {
	s.mu.Lock()
	h := s.conn.Hello()
	s.mu.Unlock()
	return h.Tier, h.Instructions, h.Scope, h.Features
}

// Tier is the served sandbox's tier ("isolated").
func (s *Sandbox) Tier() string { t, _, _, _ := s.served(); return t }

// Scope names the server and what it serves, so an approval for a call
// here never covers the same call on another server.
func (s *Sandbox) Scope() string {
	t, _, scope, _ := s.served()
	return "remote " + s.peer + " " + t + " " + s.Root() + " " + scope
}

// Exec runs a command on the served sandbox, starting in cmd.Dir under
// the root, with the served tier's base environment plus Options.Env plus
// cmd.Env. Its timeout goes with it and is enforced there; the served
// tier kills the command's whole tree when it ends.
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
			return res, fmt.Errorf("remote exec: %w", ctx.Err())
		}
		return res, s.failed(err)
	}
	return res, nil
}

// Supports reports what the served sandbox supports.
func (s *Sandbox) Supports(c sandbox.Feature) bool {
	_, _, _, fs := s.served()
	return slices.Contains(fs, c)
}

// Instructions say where tools act: which server, and the served
// sandbox's own instructions.
func (s *Sandbox) Instructions() string {
	t, ins, _, _ := s.served()
	what := "a hutch sandbox"
	if t != "" {
		what = "hutch's " + t + " tier"
	}
	return strings.TrimSpace(fmt.Sprintf("Tools act on another machine, reached through %s, in %s rooted at %s. %s", s.peer, what, s.Root(), ins))
}

// Close ends the session: the server cancels what still runs and closes
// its sandbox. It is idempotent.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conn := s.conn
	s.mu.Unlock()
	if s.re != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.re.end(ctx)
		cancel()
	}
	conn.Close(sandbox.ErrClosed)
	return nil
}
