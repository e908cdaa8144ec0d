package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/hutchsandbox/hutch/internal/search"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Client is the least a box must offer to become a sandbox through
// FromClient: a vendor's hosted sandbox reached only through its SDK, with
// no hutch on it. Paths are absolute on the box and already checked by
// FromClient (lexically: inside ClientOptions.Root, no "..", no NUL). A
// Client must be safe for concurrent use.
//
// The box must have a POSIX /bin/sh with find, stat (GNU or busybox, for
// "stat -L -c"), ls, mkdir, rmdir, rm, mv and env: everything but Read and
// Write is a fixed sh script run through Exec.
type Client interface {
	// Read returns the whole content of the file at path. A missing file
	// should be an error matching fs.ErrNotExist.
	Read(ctx context.Context, path string) ([]byte, error)
	// Write creates or replaces the file at path (its parent exists:
	// FromClient makes it first). A new file should get mode 0644 and an
	// existing one keep its mode. It need not be atomic (see
	// ClientOptions.AtomicWrite).
	Write(ctx context.Context, path string, data []byte) error
	// Exec runs req.Argv on the box, without a shell in between, and
	// waits for it (see ExecRequest). err is for a command that could not
	// be run at all; its exit status goes in the ExecResult.
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
	// Close ends the session with the box. FromClient calls it once.
	Close() error
}

// ExecRequest is one command for Client.Exec. FromClient always fills
// Timeout, so nothing waits on a provider's default.
type ExecRequest struct {
	// Argv is the program and its arguments; Argv[0] is "/bin/sh" for
	// everything FromClient sends.
	Argv []string
	// Stdin is the command's whole standard input (nil: empty).
	Stdin []byte
	// Timeout is how long the command may run; then the client should
	// stop it (and all it started, if the provider can) and say TimedOut.
	Timeout time.Duration
	// MaxOutput is how many bytes of each stream the caller keeps (the
	// last ones). A client that can should keep no more and count the
	// rest in StdoutSize and StderrSize; FromClient cuts what it is given
	// anyway.
	MaxOutput int
}

// ExecResult is what a command did, as the client saw it.
type ExecResult struct {
	// ExitCode is the exit status; 128+N for a command ended by signal N.
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	// StdoutSize and StderrSize count every byte printed when the client
	// kept less; 0 means len(Stdout) and len(Stderr).
	StdoutSize, StderrSize int64
	// TimedOut: the request's Timeout stopped the command.
	TimedOut bool
	// Signal names the signal that ended the command ("SIGKILL"), or "".
	Signal string
}

// ClientOptions configure FromClient.
type ClientOptions struct {
	// Root is the sandbox's root, an absolute path on the box. Required.
	Root string
	// Name names the box in Instructions, Scope and errors: the vendor
	// and its sandbox's ID ("acme sandbox sb-42"). Two sandboxes with the
	// same Name and Root are taken to reach the same files (an approval
	// given for one covers the other), so make it unique. Default: "the
	// client's box".
	Name string
	// Env is added to every command's environment, on top of the
	// provider's own base environment (which FromClient neither sees nor
	// changes).
	Env map[string]string
	// AtomicWrite says the client's Write replaces a file atomically (a
	// reader sees the old or the new content, never a mix). Set it only
	// when the provider documents it; it removes that gap from Gaps.
	AtomicWrite bool
}

// Bounds and waits of a sandbox made by FromClient.
const (
	// MaxStdin is the most standard input Exec hands over; more is
	// ErrTooLarge.
	MaxStdin = 16 << 20
	// StdinWait is how long Exec waits for a command's standard input to
	// end before it starts the command with what has come.
	StdinWait = 2 * time.Second
	// ClientGrace is how long past a command's timeout Exec waits for the
	// client to return; then it gives up with an error (the command may
	// still run on the box).
	ClientGrace = 10 * time.Second
	// OpTimeout bounds a file operation whose context has no deadline.
	OpTimeout = 30 * time.Second
	// maxAnswer bounds a script's answer: a listing of a tree or of one
	// directory.
	maxAnswer = 64 << 20
)

// ClientSandbox is a sandbox.Sandbox over a Client, made by FromClient. It
// is safe for concurrent use when its Client is.
//
// It guarantees what can be checked on this side before anything is sent:
// paths lexically inside the root (sandbox.Clean; ErrEscape and
// ErrInvalidPath otherwise), commands validated, every caller value
// (path, pattern, argument, environment variable) passed to the box's
// shell as a positional argument of a fixed script and never as script
// text, a deadline on every call, output and results bounded, ErrClosed
// after Close. It does not guarantee what only the box could enforce:
// see Gaps.
type ClientSandbox struct {
	c           Client
	root        string
	name        string
	env         map[string]string
	atomicWrite bool

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var (
	_ sandbox.Sandbox    = (*ClientSandbox)(nil)
	_ sandbox.Searcher   = (*ClientSandbox)(nil)
	_ sandbox.StatReader = (*ClientSandbox)(nil)
	_ sandbox.Scoper     = (*ClientSandbox)(nil)
)

// FromClient makes a sandbox of the box c reaches, rooted at opts.Root
// there. It sends nothing: a root that does not exist on the box is the
// first operation's error. Bad options are errors matching
// sandbox.ErrConfig.
func FromClient(c Client, opts ClientOptions) (*ClientSandbox, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: remote: no client: give FromClient a value with Read, Write, Exec and Close", sandbox.ErrConfig)
	}
	switch {
	case opts.Root == "":
		return nil, fmt.Errorf("%w: remote: no Root: give the sandbox's directory on the box, an absolute path", sandbox.ErrConfig)
	case !path.IsAbs(opts.Root):
		return nil, fmt.Errorf("%w: remote: Root %q is not absolute: give the directory's absolute path on the box", sandbox.ErrConfig, opts.Root)
	case strings.IndexByte(opts.Root, 0) >= 0 || len(opts.Root) > sandbox.MaxPathLen:
		return nil, fmt.Errorf("%w: remote: Root has a NUL byte or is longer than %d bytes", sandbox.ErrConfig, sandbox.MaxPathLen)
	}
	for k, v := range opts.Env {
		if err := sandbox.CheckEnvVar(k, v); err != nil {
			return nil, err
		}
	}
	name := oneLine(opts.Name)
	if name == "" {
		name = "the client's box"
	}
	return &ClientSandbox{c: c, root: path.Clean(opts.Root), name: name, env: tierkit.MergeEnv(opts.Env), atomicWrite: opts.AtomicWrite}, nil
}

// Root is the root on the box, cleaned.
func (s *ClientSandbox) Root() string { return s.root }

// Scope names the box and the root, so an approval given here never
// covers the same call on another box (see ClientOptions.Name).
func (s *ClientSandbox) Scope() string { return "client " + s.name + " " + s.root }

// Supports reports every feature: read, write, glob, stat, shell and
// manage (and it is a sandbox.Searcher). An unknown one is not supported.
func (s *ClientSandbox) Supports(c sandbox.Feature) bool {
	switch c {
	case sandbox.FeatureRead, sandbox.FeatureWrite, sandbox.FeatureGlob, sandbox.FeatureStat, sandbox.FeatureShell, sandbox.FeatureManage:
		return true
	}
	return false
}

// Gaps lists, one sentence each, what this sandbox cannot guarantee
// although the sandbox.Sandbox contract asks it: the box is reached only
// through its client, so whatever must be enforced where the files and
// processes are is the provider's, not hutch's.
func (s *ClientSandbox) Gaps() []string {
	var gaps []string
	if !s.atomicWrite {
		gaps = append(gaps, "Writes are not atomic: a reader may see a file half written.")
	}
	return append(gaps,
		"Paths are checked only as text: a symbolic link on the box that leads out of "+s.root+" is followed, not refused, and a change made on the box between a check and the operation is not seen.",
		"A command's output is bounded only once it has arrived (the client may hold all of it first), and reaches live output only when the command has ended.",
		"A timeout stops only what the provider stops: processes a command started in the background may outlive it.",
		fmt.Sprintf("Standard input is handed over whole before a command starts (at most %d MiB; a reader that has not ended within %v is cut there): a command waiting for more input gets end of file.", MaxStdin>>20, StdinWait),
	)
}

// Instructions say where tools act — the box by its name, and the root —
// and what the box cannot guarantee (Gaps).
func (s *ClientSandbox) Instructions() string {
	return fmt.Sprintf("Tools act on %s, another machine reached through its provider's client (hutch does not run there), in %s: relative paths are resolved against it. Commands run there with /bin/sh. This box cannot guarantee the following. %s",
		s.name, s.root, strings.Join(s.Gaps(), " "))
}

// Close closes the client, once; it is idempotent. Every later call
// fails with sandbox.ErrClosed.
func (s *ClientSandbox) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if err := s.c.Close(); err != nil {
			s.closeErr = s.clientErr(err)
		}
	})
	return s.closeErr
}

// resolve checks that the sandbox is open and cleans p.
func (s *ClientSandbox) resolve(op, p string) (string, error) {
	if s.closed.Load() {
		return "", tierkit.PathError(op, p, sandbox.ErrClosed)
	}
	rel, err := sandbox.Clean(s.root, p)
	if err != nil {
		return "", tierkit.PathError(op, p, err)
	}
	return rel, nil
}

// resolveDir is resolve for a directory where "" is the root.
func (s *ClientSandbox) resolveDir(op, dir string) (string, error) {
	if dir == "" {
		dir = "."
	}
	return s.resolve(op, dir)
}

func (s *ClientSandbox) abs(rel string) string { return path.Join(s.root, rel) }

// dotted is rel as the scripts take it: starting with "./", so that no
// path is ever read as an option.
func dotted(rel string) string { return "./" + rel }

// Read returns the file's content. The file is described first (one Exec),
// so a directory is ErrIsDir and a file over sandbox.MaxFileSize
// ErrTooLarge before any content is sent.
func (s *ClientSandbox) Read(ctx context.Context, p string) ([]byte, error) {
	data, _, err := s.ReadStat(ctx, p, 0)
	return data, err
}

// ReadStat describes the file, then reads it (two calls of the client;
// the description is never newer than the content). See
// sandbox.StatReader.
func (s *ClientSandbox) ReadStat(ctx context.Context, p string, max int64) ([]byte, sandbox.FileInfo, error) {
	rel, err := s.resolve("read", p)
	if err != nil {
		return nil, sandbox.FileInfo{}, err
	}
	fi, err := s.stat(ctx, rel)
	switch {
	case err != nil:
	case fi.Kind == sandbox.KindDir:
		err = sandbox.ErrIsDir
	case fi.Kind != sandbox.KindFile:
		err = fmt.Errorf("not a regular file (a device, socket or pipe): %w", sandbox.ErrUnsupported)
	case fi.Size > sandbox.MaxFileSize:
		err = fmt.Errorf("%d bytes, over %d: %w", fi.Size, sandbox.MaxFileSize, sandbox.ErrTooLarge)
	}
	if err != nil {
		return nil, sandbox.FileInfo{}, tierkit.PathError("read", p, err)
	}
	data, err := s.readFile(ctx, rel)
	if err != nil {
		return nil, sandbox.FileInfo{}, tierkit.PathError("read", p, err)
	}
	if max > 0 && int64(len(data)) > max {
		data = data[:max]
	}
	return data, fi, nil
}

// readFile reads rel through the client, refusing more than
// sandbox.MaxFileSize (once it has come).
func (s *ClientSandbox) readFile(ctx context.Context, rel string) ([]byte, error) {
	ctx, cancel := opContext(ctx)
	defer cancel()
	data, err := s.c.Read(ctx, s.abs(rel))
	if err != nil {
		return nil, s.clientErr(err)
	}
	if len(data) > sandbox.MaxFileSize {
		return nil, fmt.Errorf("%d bytes, over %d: %w", len(data), sandbox.MaxFileSize, sandbox.ErrTooLarge)
	}
	return data, nil
}

// Write makes the file's missing parents (one Exec, which also refuses a
// directory at path with ErrIsDir and a file in the way with ErrNotDir),
// then hands data to the client's Write. It is atomic only when
// ClientOptions.AtomicWrite says the client's Write is.
func (s *ClientSandbox) Write(ctx context.Context, p string, data []byte) error {
	rel, err := s.resolve("write", p)
	if err != nil {
		return err
	}
	if len(data) > sandbox.MaxFileSize {
		return tierkit.PathError("write", p, fmt.Errorf("%d bytes, over %d: %w", len(data), sandbox.MaxFileSize, sandbox.ErrTooLarge))
	}
	if _, err := s.script(ctx, writeScript, dotted(rel)); err != nil {
		return tierkit.PathError("write", p, err)
	}
	ctx, cancel := opContext(ctx)
	defer cancel()
	if err := s.c.Write(ctx, s.abs(rel), data); err != nil {
		return tierkit.PathError("write", p, s.clientErr(err))
	}
	return nil
}

// Stat describes the entry, following symbolic links (wherever they
// lead: see Gaps). Missing is sandbox.ErrNotFound.
func (s *ClientSandbox) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	rel, err := s.resolve("stat", p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := s.stat(ctx, rel)
	if err != nil {
		return sandbox.FileInfo{}, tierkit.PathError("stat", p, err)
	}
	return fi, nil
}

func (s *ClientSandbox) stat(ctx context.Context, rel string) (sandbox.FileInfo, error) {
	out, err := s.script(ctx, statScript, dotted(rel))
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	recs := records(out)
	if len(recs) != 1 {
		return sandbox.FileInfo{}, s.badAnswer(out)
	}
	_, fi, err := parseInfo(recs[0])
	if err != nil {
		return sandbox.FileInfo{}, s.badAnswer(out)
	}
	fi.Path, fi.Link = rel, false
	return fi, nil
}

// List lists the directory (one Exec, one stat(1) per entry on the box).
func (s *ClientSandbox) List(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	rel, err := s.resolve("list", p)
	if err != nil {
		return nil, err
	}
	out, err := s.script(ctx, listScript, dotted(rel))
	if err != nil {
		return nil, tierkit.PathError("list", p, err)
	}
	ents := []sandbox.FileInfo{}
	for _, rec := range records(out) {
		name, fi, err := parseInfo(rec)
		if err != nil || name == "" || strings.Contains(name, "/") {
			return nil, tierkit.PathError("list", p, s.badAnswer(out))
		}
		fi.Path = path.Join(rel, name)
		ents = append(ents, fi)
	}
	if len(ents) > sandbox.MaxGlobResults {
		return nil, tierkit.PathError("list", p, fmt.Errorf("more than %d entries: %w", sandbox.MaxGlobResults, sandbox.ErrTooLarge))
	}
	slices.SortFunc(ents, func(a, b sandbox.FileInfo) int { return strings.Compare(a.Path, b.Path) })
	return ents, nil
}

// Mkdir makes the directory and its missing parents (mkdir -p on the box).
func (s *ClientSandbox) Mkdir(ctx context.Context, p string) error {
	rel, err := s.resolve("mkdir", p)
	if err != nil {
		return err
	}
	if _, err := s.script(ctx, mkdirScript, dotted(rel)); err != nil {
		return tierkit.PathError("mkdir", p, err)
	}
	return nil
}

// Remove deletes the entry (rm, rmdir, rm -rf on the box); a link is
// removed, never followed. The root is refused here (ErrInvalidPath).
func (s *ClientSandbox) Remove(ctx context.Context, p string, recursive bool) error {
	rel, err := s.resolve("remove", p)
	if err != nil {
		return err
	}
	if rel == "." {
		return tierkit.PathError("remove", p, fmt.Errorf("the root is never removed: %w", sandbox.ErrInvalidPath))
	}
	rec, dirOnly := "", ""
	if recursive {
		rec = "r"
	}
	if len(p) > 1 && strings.HasSuffix(p, "/") {
		dirOnly = "d"
	}
	if _, err := s.script(ctx, removeScript, dotted(rel), rec, dirOnly); err != nil {
		return tierkit.PathError("remove", p, err)
	}
	return nil
}

// Rename moves the entry with mv on the box (a rename(2), atomic within
// one file system). The root, and a directory moving below itself, are
// refused here (ErrInvalidPath); a directory at to is ErrIsDir.
func (s *ClientSandbox) Rename(ctx context.Context, from, to string) error {
	src, err := s.resolve("rename", from)
	if err != nil {
		return err
	}
	dst, err := s.resolve("rename", to)
	if err != nil {
		return err
	}
	switch {
	case src == "." || dst == ".":
		return tierkit.PathError("rename", from, fmt.Errorf("the root never moves, and nothing moves onto it: %w", sandbox.ErrInvalidPath))
	case dst == src || strings.HasPrefix(dst, src+"/"):
		return tierkit.PathError("rename", from, fmt.Errorf("%s is %s itself or below it: %w", to, from, sandbox.ErrInvalidPath))
	}
	if _, err := s.script(ctx, renameScript, dotted(src), dotted(dst)); err != nil {
		return tierkit.PathError("rename", from, err)
	}
	return nil
}

// Glob lists the tree below the pattern's fixed leading directories (one
// Exec of find, only as deep as the pattern reaches) and matches it here
// with the glob of every tier (tierkit.GlobFS). Links are not descended,
// and are matched by what they point to, wherever that is (see Gaps).
func (s *ClientSandbox) Glob(ctx context.Context, pattern string) ([]string, error) {
	if s.closed.Load() {
		return nil, tierkit.PathError("glob", pattern, sandbox.ErrClosed)
	}
	pat, dirsOnly, err := sandbox.CleanPattern(s.root, pattern)
	if err != nil {
		return nil, tierkit.PathError("glob", pattern, err)
	}
	base, rest := splitPattern(pat)
	if base, err = sandbox.Clean(s.root, base); err != nil { // an escaped "\.\." is a real ".."
		return nil, tierkit.PathError("glob", pattern, err)
	}
	depth := -1
	if !strings.Contains(rest, "**") {
		depth = strings.Count(rest, "/") + 1 // at least as deep as any alternative
	}
	tree, err := s.tree(ctx, base, depth, nil)
	if err != nil {
		return nil, tierkit.PathError("glob", pattern, err)
	}
	return tierkit.GlobFS(ctx, tree, pat, dirsOnly)
}

// splitPattern is doublestar.SplitPattern with the base unescaped whole
// (SplitPattern unescapes only the wildcards): the directory the walk
// starts from, as a name on the box.
func splitPattern(pat string) (base, rest string) {
	base, rest = doublestar.SplitPattern(pat)
	var b strings.Builder
	for i := 0; i < len(base); i++ {
		if base[i] == '\\' && i+1 < len(base) {
			i++
		}
		b.WriteByte(base[i])
	}
	return b.String(), rest
}

// Search lists the tree below Dir (one Exec of find) and runs hutch's
// search over it here, reading each file it searches through the
// client's Read (see sandbox.Searcher). The rules are every tier's;
// links to directories are not followed, links to files are searched
// wherever they lead (see Gaps).
func (s *ClientSandbox) Search(ctx context.Context, req sandbox.SearchRequest) (sandbox.SearchResult, error) {
	dir := req.Dir
	rel, err := s.resolveDir("search", dir)
	if err != nil {
		return sandbox.SearchResult{}, err
	}
	req.Dir = rel
	if req.Glob, err = sandbox.CleanSearchGlob(s.root, req.Glob); err != nil {
		return sandbox.SearchResult{}, err
	}
	if _, err := search.Validate(req); err != nil {
		return sandbox.SearchResult{}, err
	}
	// The ignore files the search reads above Dir.
	extras := []string{".git/info/exclude"}
	if rel != "." {
		elems := strings.Split(rel, "/")
		for i := range elems {
			extras = append(extras, path.Join(path.Join(elems[:i]...), ".gitignore"))
		}
	}
	tree, err := s.tree(ctx, rel, -1, extras)
	if err != nil {
		return sandbox.SearchResult{}, tierkit.PathError("search", dir, err)
	}
	return search.Run(ctx, tree, req)
}

// Exec runs the command on the box through the client: a fixed sh
// wrapper changes to cmd.Dir and runs `env -- K=V... PROGRAM ARGS...`
// (Shell is `/bin/sh -c LINE`), every value a positional argument. The
// environment is the provider's base, then ClientOptions.Env, then
// cmd.Env. The timeout goes with every call; the client is waited for at
// most ClientGrace past it. Standard input is read first (MaxStdin,
// StdinWait); output is cut to cmd.MaxOutput (the end kept) once it has
// come, then given to cmd.Stdout and cmd.Stderr. A cancelled ctx returns
// at once, whatever the client does with it.
func (s *ClientSandbox) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	cmd, err := cmd.Validate()
	if err != nil {
		return sandbox.Result{}, err
	}
	rel, err := s.resolveDir("exec", cmd.Dir)
	if err != nil {
		return sandbox.Result{}, err
	}
	if rel != "." {
		fi, err := s.stat(ctx, rel)
		if err == nil && fi.Kind != sandbox.KindDir {
			err = sandbox.ErrNotDir
		}
		if err != nil {
			return sandbox.Result{}, tierkit.PathError("exec", cmd.Dir, err)
		}
	}
	stdin, err := readStdin(ctx, cmd.Stdin)
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("exec: %w", err)
	}
	begin := time.Now()
	r, err := s.call(ctx, ExecRequest{Argv: s.execArgv(cmd, rel), Stdin: stdin, Timeout: cmd.Timeout, MaxOutput: cmd.MaxOutput})
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("exec: %w", err)
	}
	res := sandbox.Result{ExitCode: r.ExitCode, TimedOut: r.TimedOut, Signal: oneLine(r.Signal), Duration: time.Since(begin)}
	res.Stdout, res.StdoutSize, res.StdoutTruncated = bound(r.Stdout, r.StdoutSize, cmd.MaxOutput)
	res.Stderr, res.StderrSize, res.StderrTruncated = bound(r.Stderr, r.StderrSize, cmd.MaxOutput)
	lives := tierkit.NewLives(cmd)
	lives.Unblock() // the command has ended: nothing waits for the writers
	_, _ = lives[0].Write(res.Stdout)
	_, _ = lives[1].Write(res.Stderr)
	lives.Close(sandbox.LiveGrace)
	return res, nil
}

// execWrapper starts a command: $1 is the directory, $2 the PATH the
// command gets when the caller sets one, $3 the program, then the
// "K=V"s and the program with its arguments, all for env(1). A program
// that is not found is 127 with "command not found", as a shell says it.
// The shell's own PWD and OLDPWD (which cd exports) and SHLVL are not
// the command's.
const execWrapper = `cd -- "$1" || exit 1
case $3 in
*/*) ;;
*)
	if [ -n "$2" ]; then PATH=$2; fi
	command -v -- "$3" >/dev/null 2>&1 || { printf '%s: command not found\n' "$3" >&2; exit 127; }
esac
shift 3
unset PWD OLDPWD SHLVL
exec env -- "$@"`

func (s *ClientSandbox) execArgv(cmd sandbox.Command, rel string) []string {
	prog := cmd.Args
	switch {
	case cmd.Shell != "":
		prog = []string{"/bin/sh", "-c", cmd.Shell}
	case strings.Contains(prog[0], "="):
		// env would take it for a variable: run it through a shell.
		prog = append([]string{"/bin/sh", "-c", `exec "$@"`, "sh"}, prog...)
	}
	env := tierkit.MergeEnv(s.env, cmd.Env)
	argv := []string{"/bin/sh", "-c", execWrapper, "sh", s.abs(rel), env["PATH"], prog[0]}
	argv = append(argv, tierkit.EnvList(env)...)
	return append(argv, prog...)
}

// bound keeps the last limit bytes of b; size is what the client counted
// when it kept less.
func bound(b []byte, size int64, limit int) ([]byte, int64, bool) {
	tb := &tierkit.TailBuffer{Max: limit}
	_, _ = tb.Write(b)
	size = tb.Total() + max(0, size-int64(len(b)))
	kept := tb.Bytes()
	return kept, size, size > int64(len(kept))
}

// call runs req through the client, returning when it does, when ctx
// ends (the client's call is then cancelled and left), or ClientGrace
// past req.Timeout.
func (s *ClientSandbox) call(ctx context.Context, req ExecRequest) (ExecResult, error) {
	if s.closed.Load() {
		return ExecResult{}, sandbox.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return ExecResult{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		r   ExecResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := s.c.Exec(ctx, req)
		done <- answer{r, err}
	}()
	late := time.NewTimer(req.Timeout + ClientGrace)
	defer late.Stop()
	select {
	case a := <-done:
		if a.err != nil {
			if err := ctx.Err(); err != nil {
				return ExecResult{}, err
			}
			return ExecResult{}, s.clientErr(a.err)
		}
		return a.r, nil
	case <-ctx.Done():
		return ExecResult{}, ctx.Err()
	case <-late.C:
		return ExecResult{}, fmt.Errorf("%s: the client has not returned %v after the command's %v timeout; the command may still run there: %w", s.name, ClientGrace, req.Timeout, context.DeadlineExceeded)
	}
}

// opContext gives ctx a deadline of OpTimeout when it has none.
func opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, OpTimeout)
}

// script runs one of the fixed scripts below (after the prelude) with
// the root and args as its positional arguments, and returns its
// standard output; its exit status says which error it met.
func (s *ClientSandbox) script(ctx context.Context, body string, args ...string) ([]byte, error) {
	timeout := OpTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	argv := append([]string{"/bin/sh", "-c", prelude + body, "sh", s.root}, args...)
	r, err := s.call(ctx, ExecRequest{Argv: argv, Timeout: timeout, MaxOutput: maxAnswer})
	switch {
	case err != nil:
		return nil, err
	case r.TimedOut:
		return nil, fmt.Errorf("%s did not answer within %v: %w", s.name, timeout, context.DeadlineExceeded)
	case len(r.Stdout) > maxAnswer || r.StdoutSize > int64(len(r.Stdout)):
		return nil, fmt.Errorf("%s answered more than %d MiB: narrow the path or pattern: %w", s.name, maxAnswer>>20, sandbox.ErrTooLarge)
	case r.ExitCode == 0:
		return r.Stdout, nil
	case r.ExitCode == 90:
		return nil, fmt.Errorf("%w: the root %s is not a directory on %s: set Root to one that exists there", sandbox.ErrConfig, s.root, s.name)
	}
	if e, ok := scriptErrors[r.ExitCode]; ok {
		return nil, e
	}
	msg := lastLine(r.Stderr)
	if msg == "" {
		msg = "exit status " + strconv.Itoa(r.ExitCode)
	}
	return nil, fmt.Errorf("%s: %s", s.name, msg)
}

var scriptErrors = map[int]error{91: sandbox.ErrNotFound, 92: sandbox.ErrNotDir, 93: sandbox.ErrIsDir, 94: sandbox.ErrNotEmpty}

func (s *ClientSandbox) badAnswer(out []byte) error {
	return fmt.Errorf("%s: an answer hutch cannot read (%d bytes): does the box have a POSIX sh, find and stat?", s.name, len(out))
}

// clientError is an error of the client, on one line, naming the box.
type clientError struct {
	name string
	err  error
}

func (e *clientError) Error() string { return e.name + ": " + oneLine(e.err.Error()) }
func (e *clientError) Unwrap() error { return e.err }

func (s *ClientSandbox) clientErr(err error) error { return &clientError{s.name, err} }

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return oneLine(lines[len(lines)-1])
}

// The scripts. Each is the prelude, then a body; "$1" of the prelude is
// the root, and the body's "$1"... are paths starting with "./" (relative
// to the root) or words of FromClient's own. Exit statuses: 90 the root
// is no directory, 91 not found, 92 not a directory, 93 is a directory,
// 94 not empty.
const prelude = `export LC_ALL=C
unset CDPATH
cd -- "$1" 2>/dev/null || exit 90
shift
notdir() {
	q=$1
	while [ "$q" != . ]; do
		if [ -e "$q" ] && [ ! -d "$q" ]; then exit 92; fi
		q=${q%/*}
	done
}
gone() { notdir "${1%/*}"; exit 91; }
mkd() { [ -d "$1" ] || mkdir -p -- "$1" || { notdir "$1"; exit 1; }; }
info() {
	if [ -h "$1" ]; then l=l; else l=-; fi
	s=$(stat -L -c '%f %s %i %y|%z' -- "$1") || return 1
	printf '%s\t%s\t%s\0' "$l" "$s" "$2"
}
`

const (
	statScript = `[ -e "$1" ] || gone "$1"
info "$1" .`

	writeScript = `[ -d "$1" ] && exit 93
mkd "${1%/*}"`

	mkdirScript = `mkd "$1"`

	listScript = `[ -e "$1" ] || gone "$1"
[ -d "$1" ] || exit 92
cd -- "$1" || exit 1
for e in * .[!.]* ..?*; do
	if [ -e "./$e" ]; then info "./$e" "$e" || :
	elif [ -h "./$e" ]; then printf 'l\tx\t%s\0' "$e"
	fi
done`

	// $2 is "r" for recursive, $3 "d" when the caller named a directory.
	removeScript = `[ -e "$1" ] || [ -h "$1" ] || gone "$1"
if [ -n "$3" ] && [ ! -d "$1" ]; then exit 92; fi
if [ -h "$1" ] || [ ! -d "$1" ]; then exec rm -f -- "$1"; fi
if [ -n "$2" ]; then exec rm -rf -- "$1"; fi
rmdir -- "$1" 2>/dev/null && exit 0
if [ -d "$1" ] && [ -n "$(ls -A -- "$1")" ]; then exit 94; fi
exec rmdir -- "$1"`

	// A link at $2 is replaced, never entered (mv would move into the
	// directory it points to).
	renameScript = `[ -e "$1" ] || [ -h "$1" ] || gone "$1"
if [ -d "$2" ] && [ ! -h "$2" ]; then exit 93; fi
mkd "${2%/*}"
if [ -h "$2" ]; then
	mv -fT -- "$1" "$2" 2>/dev/null && exit 0
	rm -f -- "$2" || exit 1
fi
exec mv -f -- "$1" "$2"`

	// treeScript describes $1 (the start) and the extra paths after $2,
	// then an empty record, then everything below the start, not below
	// what matches the find -path pattern $2: records "LK SIZE PATH\0",
	// L "l" for a link, K the kind (d, f, x for missing; GNU find's %y
	// letters where it has -printf), SIZE -1 when unknown.
	treeScript = `start=$1 prune=$2
shift 2
d='for p do
	if [ -h "$p" ]; then l=l; else l=-; fi
	if [ -d "$p" ]; then k=d; elif [ -f "$p" ]; then k=f; elif [ -e "$p" ]; then k=o; else k=x; fi
	printf "%s%s -1 %s\0" "$l" "$k" "$p"
done'
/bin/sh -c "$d" sh "$start" "$@"
printf '\0'
cd -- "$start" 2>/dev/null || exit 0
if find . -maxdepth 0 -printf '' 2>/dev/null; then
	find . -path "$prune" -prune -o ! -name . -printf '%y%Y %s %p\0'
else
	find . -path "$prune" -prune -o ! -name . -exec /bin/sh -c "$d" sh {} +
fi
[ $? -le 1 ]`
)

// records splits a script's NUL-terminated records.
func records(out []byte) []string {
	recs := strings.Split(string(out), "\x00")
	if n := len(recs); n > 0 && recs[n-1] == "" {
		recs = recs[:n-1]
	}
	return recs
}

// parseInfo reads one record of info(): "L\tSTAT\tNAME", STAT being
// stat's "%f %s %i %y|%z", or "x" for a dangling link.
func parseInfo(rec string) (string, sandbox.FileInfo, error) {
	bad := errors.New("bad record")
	flag, rest, ok1 := strings.Cut(rec, "\t")
	st, name, ok2 := strings.Cut(rest, "\t")
	if !ok1 || !ok2 {
		return "", sandbox.FileInfo{}, bad
	}
	fi := sandbox.FileInfo{Link: flag == "l", Kind: sandbox.KindOther}
	if st == "x" {
		return name, fi, nil
	}
	f := strings.SplitN(st, " ", 4)
	if len(f) != 4 {
		return "", fi, bad
	}
	mode, err1 := strconv.ParseUint(f[0], 16, 32)
	size, err2 := strconv.ParseInt(f[1], 10, 64)
	ino, err3 := strconv.ParseUint(f[2], 10, 64)
	mt, ct, ok := strings.Cut(f[3], "|")
	mtime, err4 := time.Parse(statTime, mt)
	ctime, err5 := time.Parse(statTime, ct)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil || !ok {
		return "", fi, bad
	}
	fi.Mode, fi.Kind = tierkit.UnixMode(uint32(mode))
	fi.Size, fi.Inode, fi.ModTime, fi.Changed = size, ino, mtime, ctime
	if fi.Kind == sandbox.KindDir {
		fi.Size = 0
	}
	return name, fi, nil
}

// statTime is stat's %y (the fraction of a second is parsed without
// being in the layout).
const statTime = "2006-01-02 15:04:05 -0700"

// readStdin reads r until it ends, for at most StdinWait; a reader still
// blocked then is left to its goroutine, and the command gets what came.
func readStdin(ctx context.Context, r io.Reader) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	in := &stdinBuffer{done: make(chan struct{})}
	go in.fill(r)
	wait := time.NewTimer(StdinWait)
	defer wait.Stop()
	select {
	case <-in.done:
	case <-wait.C:
	case <-ctx.Done():
		in.take()
		return nil, ctx.Err()
	}
	return in.take()
}

type stdinBuffer struct {
	mu            sync.Mutex
	buf           []byte
	over, stopped bool
	done          chan struct{}
}

func (in *stdinBuffer) fill(r io.Reader) {
	defer close(in.done)
	p := make([]byte, 32<<10)
	for {
		n, err := r.Read(p)
		in.mu.Lock()
		if in.stopped {
			in.mu.Unlock()
			return
		}
		if len(in.buf)+n > MaxStdin {
			in.over, in.stopped = true, true
			in.mu.Unlock()
			return
		}
		in.buf = append(in.buf, p[:n]...)
		in.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (in *stdinBuffer) take() ([]byte, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.stopped = true
	if in.over {
		return nil, fmt.Errorf("standard input over %d bytes: give a file instead: %w", MaxStdin, sandbox.ErrTooLarge)
	}
	return in.buf, nil
}

// tree lists the box below start (root-relative), at most depth levels
// down (-1: all), and the extra paths, as an fs.FS (treeFS) for Glob and
// Search.
func (s *ClientSandbox) tree(ctx context.Context, start string, depth int, extras []string) (*treeFS, error) {
	prune := "/" // matches nothing: every path starts with "."
	if depth >= 0 {
		prune = "./*" + strings.Repeat("/*", depth)
	}
	args := []string{dotted(start), prune}
	for _, e := range extras {
		args = append(args, dotted(e))
	}
	out, err := s.script(ctx, treeScript, args...)
	if err != nil {
		return nil, err
	}
	t := &treeFS{s: s, ctx: ctx, ents: map[string]treeEntry{".": {kind: 'd', size: -1}}, kids: map[string][]string{}}
	below := false
	for _, rec := range records(out) {
		if rec == "" {
			below = true
			continue
		}
		if len(rec) < 4 || rec[2] != ' ' {
			return nil, s.badAnswer(out)
		}
		sz, p, ok := strings.Cut(rec[3:], " ")
		size, err := strconv.ParseInt(sz, 10, 64)
		if !ok || err != nil {
			return nil, s.badAnswer(out)
		}
		p = strings.TrimPrefix(p, "./")
		if below {
			p = path.Join(start, p)
		} else {
			p = path.Clean(p)
		}
		e := treeEntry{link: rec[0] == 'l', size: size}
		switch rec[1] {
		case 'd', 'f':
			e.kind = rec[1]
		case 'x', 'N', 'L', 'l', '?':
			e.kind = 'x'
		default:
			e.kind = 'o'
		}
		if e.link {
			e.size = -1 // find's %s is the link's own
		}
		t.add(p, e)
	}
	return t, nil
}

// treeFS is a listing of the box as an fs.FS: directories and kinds from
// the listing, file content read through the client when opened and
// read. It holds nothing outside the listing, so it never leads out of
// the root itself.
type treeFS struct {
	s    *ClientSandbox
	ctx  context.Context
	ents map[string]treeEntry
	kids map[string][]string
}

type treeEntry struct {
	kind byte // 'd', 'f', 'o' (other), 'x' (a link that dangles)
	link bool
	size int64 // -1: unknown
}

func (t *treeFS) add(p string, e treeEntry) {
	if e.kind == 'x' && !e.link {
		return // missing
	}
	if _, ok := t.ents[p]; ok || p == "." {
		return
	}
	t.ents[p] = e
	for p != "." {
		dir := path.Dir(p)
		t.kids[dir] = append(t.kids[dir], path.Base(p))
		if _, ok := t.ents[dir]; ok {
			break
		}
		t.ents[dir] = treeEntry{kind: 'd', size: -1}
		p = dir
	}
}

func (t *treeFS) get(op, name string) (treeEntry, error) {
	e, ok := t.ents[name]
	if !ok || e.kind == 'x' {
		return e, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return e, nil
}

func (t *treeFS) Open(name string) (fs.File, error) {
	e, err := t.get("open", name)
	if err != nil {
		return nil, err
	}
	return &treeFile{t: t, name: name, info: treeInfo{name: path.Base(name), e: e}}, nil
}

func (t *treeFS) Stat(name string) (fs.FileInfo, error) {
	e, err := t.get("stat", name)
	if err != nil {
		return nil, err
	}
	return treeInfo{name: path.Base(name), e: e}, nil
}

func (t *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	e, err := t.get("readdir", name)
	if err != nil {
		return nil, err
	}
	if e.kind != 'd' {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: sandbox.ErrNotDir}
	}
	names := slices.Sorted(slices.Values(t.kids[name]))
	out := make([]fs.DirEntry, len(names))
	for i, n := range names {
		out[i] = treeDirEntry{treeInfo{name: n, e: t.ents[path.Join(name, n)]}}
	}
	return out, nil
}

// treeInfo describes an entry as Stat does: a link as what it points to.
type treeInfo struct {
	name string
	e    treeEntry
}

func (i treeInfo) Name() string { return i.name }
func (i treeInfo) Size() int64  { return max(i.e.size, 0) }
func (i treeInfo) Mode() fs.FileMode {
	switch i.e.kind {
	case 'd':
		return fs.ModeDir | 0o755
	case 'f':
		return 0o644
	}
	return fs.ModeIrregular
}
func (i treeInfo) ModTime() time.Time { return time.Time{} }
func (i treeInfo) IsDir() bool        { return i.e.kind == 'd' }
func (i treeInfo) Sys() any           { return nil }

// treeDirEntry is an entry as a listing shows it: a link as a link.
type treeDirEntry struct{ i treeInfo }

func (d treeDirEntry) Name() string               { return d.i.name }
func (d treeDirEntry) IsDir() bool                { return !d.i.e.link && d.i.IsDir() }
func (d treeDirEntry) Info() (fs.FileInfo, error) { return d.i, nil }
func (d treeDirEntry) Type() fs.FileMode {
	if d.i.e.link {
		return fs.ModeSymlink
	}
	return d.i.Mode().Type()
}

// treeFile reads its content through the client at its first Read.
type treeFile struct {
	t    *treeFS
	name string
	info treeInfo
	r    *bytes.Reader
}

func (f *treeFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *treeFile) Close() error               { return nil }
func (f *treeFile) Read(p []byte) (int, error) {
	if f.info.IsDir() {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: sandbox.ErrIsDir}
	}
	if f.r == nil {
		data, err := f.t.s.readFile(f.t.ctx, f.name)
		if err != nil {
			return 0, &fs.PathError{Op: "read", Path: f.name, Err: err}
		}
		f.r = bytes.NewReader(data)
	}
	return f.r.Read(p)
}
