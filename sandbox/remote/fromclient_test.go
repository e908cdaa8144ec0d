package remote_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/remote"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

// hostBox stands in for a vendor's SDK: a "box" whose files are this
// machine's (Read and Write are os.ReadFile and os.WriteFile, so Write is
// not atomic) and whose commands run here through os/exec, in a process
// group of their own that the timeout kills, with an environment of
// PATH, HOME and LANG only, keeping at most MaxOutput bytes of each
// stream. It does what a Client is asked and no more: it checks no path.
// Close ends every process still running with its working directory
// under the box's directory (what a provider tearing a sandbox down
// does), so a command's escaped background processes do not outlive the
// test.
type hostBox struct {
	dir  string
	path string // PATH of the commands

	calls  atomic.Int64 // Read, Write and Exec calls
	closes atomic.Int64
}

func newHostBox(t *testing.T) *hostBox {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &hostBox{dir: dir, path: sandbox.DefaultPath}
}

func (b *hostBox) Read(ctx context.Context, p string) ([]byte, error) {
	b.calls.Add(1)
	return os.ReadFile(p)
}

func (b *hostBox) Write(ctx context.Context, p string, data []byte) error {
	b.calls.Add(1)
	return os.WriteFile(p, data, 0o644)
}

func (b *hostBox) Exec(ctx context.Context, req remote.ExecRequest) (remote.ExecResult, error) {
	b.calls.Add(1)
	if req.Timeout <= 0 {
		return remote.ExecResult{}, errors.New("no timeout given")
	}
	tctx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, req.Argv[0], req.Argv[1:]...)
	cmd.Env = []string{"PATH=" + b.path, "HOME=" + b.dir, "LANG=C.UTF-8"}
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(req.Stdin)
	stdout, stderr := &tierkit.TailBuffer{Max: req.MaxOutput}, &tierkit.TailBuffer{Max: req.MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return remote.ExecResult{}, ctx.Err()
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return remote.ExecResult{}, err
	}
	r := remote.ExecResult{
		Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), StdoutSize: stdout.Total(), StderrSize: stderr.Total(),
		TimedOut: tctx.Err() != nil,
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		r.ExitCode, r.Signal = 128+int(ws.Signal()), unix.SignalName(ws.Signal())
	} else {
		r.ExitCode = ws.ExitStatus()
	}
	return r, nil
}

func (b *hostBox) Close() error {
	b.closes.Add(1)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && (cwd == b.dir || strings.HasPrefix(cwd, b.dir+"/")) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

func fromHostBox(t *testing.T, b *hostBox) *remote.ClientSandbox {
	t.Helper()
	sb, err := remote.FromClient(b, remote.ClientOptions{Root: b.dir, Name: "test box " + filepath.Base(b.dir)})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// gaps are the conformance cases FromClient skips, one per thing it cannot
// guarantee (see ClientSandbox.Gaps).
var gaps = sandboxtest.Options{
	Name: "FromClient", HostProcesses: true,
	LexicalPathsOnly: true, NoAtomicWrite: true, NoTreeKill: true, NoLiveOutput: true, WholeStdin: true,
}

// FromClient keeps the contract but for its gaps, each skipped by name.
func TestFromClientConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return fromHostBox(t, newHostBox(t)) }, gaps)
}

// The same over busybox's find, stat, ls, mv, rm, mkdir, rmdir and env: a
// box without GNU find's -printf (the portable listing) nor GNU stat.
func TestFromClientConformanceBusybox(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox on this host")
	}
	shim := t.TempDir()
	for _, tool := range []string{"find", "stat", "ls", "mv", "rm", "mkdir", "rmdir", "env"} {
		if err := os.Symlink(bb, filepath.Join(shim, tool)); err != nil {
			t.Fatal(err)
		}
	}
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox {
		b := newHostBox(t)
		b.path = shim + ":" + sandbox.DefaultPath
		return fromHostBox(t, b)
	}, gaps)
}

// Paths outside the root, with NUL bytes or too long, are refused before
// anything is sent: the client sees no call at all.
func TestFromClientRefusesBeforeSending(t *testing.T) {
	b := newHostBox(t)
	sb := fromHostBox(t, b)
	defer sb.Close()
	bad := map[string]error{
		"..": sandbox.ErrEscape, "../x": sandbox.ErrEscape, "a/../../x": sandbox.ErrEscape,
		"/etc/passwd": sandbox.ErrEscape, b.dir + "-sibling/x": sandbox.ErrEscape, filepath.Dir(b.dir): sandbox.ErrEscape,
		"a\x00b": sandbox.ErrInvalidPath, "": sandbox.ErrInvalidPath, strings.Repeat("a/", sandbox.MaxPathLen): sandbox.ErrInvalidPath,
	}
	for p, want := range bad {
		_, err := sb.Read(bg, p)
		check(t, "Read", p, err, want)
		check(t, "Write", p, sb.Write(bg, p, []byte("x")), want)
		_, err = sb.Stat(bg, p)
		check(t, "Stat", p, err, want)
		_, err = sb.List(bg, p)
		check(t, "List", p, err, want)
		check(t, "Mkdir", p, sb.Mkdir(bg, p), want)
		check(t, "Remove", p, sb.Remove(bg, p, true), want)
		check(t, "Rename from", p, sb.Rename(bg, p, "x"), want)
		check(t, "Rename to", p, sb.Rename(bg, "x", p), want)
		if p != "" { // "" is the root for Search and Exec
			_, err = sb.Search(bg, sandbox.SearchRequest{Dir: p, Pattern: "x"})
			check(t, "Search", p, err, want)
			_, err = sb.Exec(bg, sandbox.Command{Args: []string{"true"}, Dir: p})
			check(t, "Exec", p, err, want)
			_, err = sb.Glob(bg, p+"/*")
			check(t, "Glob", p, err, want)
		}
	}
	for _, pat := range []string{`\.\./*`, `\.\./x/**`, "../*", "/etc/*", "a\x00*", "["} {
		if _, err := sb.Glob(bg, pat); err == nil {
			t.Errorf("Glob(%q) was sent", pat)
		}
	}
	for _, c := range []sandbox.Command{{}, {Shell: "true", Env: map[string]string{"A=B": "c"}}, {Args: []string{"echo", "a\x00"}}, {Shell: "true", Timeout: -1}} {
		if _, err := sb.Exec(bg, c); !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("Exec(%+v): %v, want ErrConfig", c, err)
		}
	}
	if n := b.calls.Load(); n != 0 {
		t.Errorf("the client got %d calls for refused paths and commands", n)
	}
}

func check(t *testing.T, op, p string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s(%.40q): %v, want %v", op, p, err, want)
	}
	if err != nil && strings.Contains(err.Error(), "\n") {
		t.Errorf("%s(%.40q): error of more than one line: %q", op, p, err)
	}
}

// hostile are names that a script interpolating them would run: each one
// would make a file named pwned.
var hostile = []string{
	`'; touch pwned; '`,
	`"; touch pwned; "`,
	`$(touch pwned)`,
	"`touch pwned`",
	"x\ntouch pwned\n",
	`x; touch pwned`,
	`x && touch pwned #`,
	`-rf`,
	`--`,
	`${IFS}touch${IFS}pwned`,
}

// No name, pattern, argument or variable is interpreted by the box's
// shell: every operation on hostile names works on those names, and the
// canary file pwned is never made.
func TestFromClientInterpretsNothing(t *testing.T) {
	b := newHostBox(t)
	sb := fromHostBox(t, b)
	defer sb.Close()
	for i, n := range hostile {
		dir := "d" + strconv.Itoa(i) + "/" + n
		file := dir + "/" + n
		if err := sb.Write(bg, file, []byte(n)); err != nil {
			t.Errorf("Write(%q): %v", file, err)
			continue
		}
		if got, err := sb.Read(bg, file); err != nil || string(got) != n {
			t.Errorf("Read(%q) = %q, %v", file, got, err)
		}
		if fi, err := sb.Stat(bg, dir); err != nil || fi.Kind != sandbox.KindDir {
			t.Errorf("Stat(%q) = %+v, %v", dir, fi, err)
		}
		if ents, err := sb.List(bg, dir); err != nil || len(ents) != 1 || ents[0].Path != file {
			t.Errorf("List(%q) = %+v, %v", dir, ents, err)
		}
		if got, err := sb.Glob(bg, "d"+strconv.Itoa(i)+"/**"); err != nil || !slices.Equal(got, []string{file}) {
			t.Errorf("Glob(d%d/**) = %q, %v", i, got, err)
		}
		res, err := sb.Search(bg, sandbox.SearchRequest{Dir: dir, Pattern: ".", Mode: sandbox.SearchFiles})
		if err != nil || len(res.Files) != 1 || res.Files[0].Path != file {
			t.Errorf("Search(Dir %q) = %+v, %v", dir, res, err)
		}
		r, err := sb.Exec(bg, sandbox.Command{Args: []string{"printf", "%s|%s", n, "$X"}, Dir: dir, Env: map[string]string{"X": n}})
		if err != nil || string(r.Stdout) != n+"|$X" {
			t.Errorf("Exec(printf %q) in %q = %q %q, %v", n, dir, r.Stdout, r.Stderr, err)
		}
		r, err = sb.Exec(bg, sandbox.Command{Shell: `printf %s "$X"`, Dir: dir, Env: map[string]string{"X": n}})
		if err != nil || string(r.Stdout) != n {
			t.Errorf("Exec(printf $X) with X=%q = %q %q, %v", n, r.Stdout, r.Stderr, err)
		}
		moved := dir + "/moved " + n
		if err := sb.Rename(bg, file, moved); err != nil {
			t.Errorf("Rename(%q): %v", file, err)
		}
		if err := sb.Mkdir(bg, dir+"/"+n+"2/"+n); err != nil {
			t.Errorf("Mkdir below %q: %v", dir, err)
		}
		if err := sb.Remove(bg, moved, false); err != nil {
			t.Errorf("Remove(%q): %v", moved, err)
		}
		if err := sb.Remove(bg, "d"+strconv.Itoa(i), true); err != nil {
			t.Errorf("Remove(d%d): %v", i, err)
		}
	}
	// A glob pattern and a search pattern are the caller's too.
	for _, n := range hostile {
		if _, err := sb.Glob(bg, n+"/**"); err != nil && !errors.Is(err, sandbox.ErrInvalidPath) {
			t.Errorf("Glob(%q): %v", n, err)
		}
		if _, err := sb.Search(bg, sandbox.SearchRequest{Glob: n, Pattern: n, Literal: true}); err != nil {
			t.Errorf("Search(%q): %v", n, err)
		}
	}
	var found []string
	_ = filepath.WalkDir(b.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), "pwned") && !strings.Contains(d.Name(), "touch") {
			found = append(found, p)
		}
		return nil
	})
	if len(found) > 0 {
		t.Fatalf("a name was run as a command: %q", found)
	}
	if left, err := sb.List(bg, "."); err != nil || len(left) != 0 {
		t.Errorf("after removing everything the root holds %+v, %v", left, err)
	}
}

// After Close every method fails with ErrClosed without calling the
// client, and the client is closed once.
func TestFromClientClosed(t *testing.T) {
	b := newHostBox(t)
	sb := fromHostBox(t, b)
	if err := sb.Write(bg, "f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := sb.Close(); err != nil {
			t.Fatal(err)
		}
	}
	before := b.calls.Load()
	errs := map[string]error{}
	_, errs["Read"] = sb.Read(bg, "f")
	_, _, errs["ReadStat"] = sb.ReadStat(bg, "f", 0)
	errs["Write"] = sb.Write(bg, "f", nil)
	_, errs["Stat"] = sb.Stat(bg, "f")
	_, errs["Glob"] = sb.Glob(bg, "*")
	_, errs["List"] = sb.List(bg, ".")
	errs["Mkdir"] = sb.Mkdir(bg, "d")
	errs["Remove"] = sb.Remove(bg, "f", false)
	errs["Rename"] = sb.Rename(bg, "f", "g")
	_, errs["Search"] = sb.Search(bg, sandbox.SearchRequest{Pattern: "x"})
	_, errs["Exec"] = sb.Exec(bg, sandbox.Command{Shell: "true"})
	for op, err := range errs {
		if !errors.Is(err, sandbox.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", op, err)
		}
	}
	if n := b.calls.Load() - before; n != 0 {
		t.Errorf("the client got %d calls after Close", n)
	}
	if n := b.closes.Load(); n != 1 {
		t.Errorf("the client was closed %d times, want once", n)
	}
}

// Bad options are ErrConfig, on one line.
func TestFromClientOptions(t *testing.T) {
	b := newHostBox(t)
	for name, c := range map[string]struct {
		c    remote.Client
		opts remote.ClientOptions
	}{
		"no client":    {nil, remote.ClientOptions{Root: "/"}},
		"no root":      {b, remote.ClientOptions{}},
		"relative":     {b, remote.ClientOptions{Root: "work"}},
		"nul":          {b, remote.ClientOptions{Root: "/a\x00b"}},
		"too long":     {b, remote.ClientOptions{Root: "/" + strings.Repeat("a", sandbox.MaxPathLen)}},
		"bad env name": {b, remote.ClientOptions{Root: "/", Env: map[string]string{"A=B": "c"}}},
		"bad env":      {b, remote.ClientOptions{Root: "/", Env: map[string]string{"A": "c\x00"}}},
	} {
		sb, err := remote.FromClient(c.c, c.opts)
		if !errors.Is(err, sandbox.ErrConfig) || sb != nil {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: more than one line: %q", name, err)
		}
	}
	// A root that is not on the box is the first operation's error.
	sb, err := remote.FromClient(b, remote.ClientOptions{Root: b.dir + "/missing/", Name: "box"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if sb.Root() != b.dir+"/missing" {
		t.Errorf("Root() = %q, want it cleaned", sb.Root())
	}
	if _, err := sb.Stat(bg, "x"); !errors.Is(err, sandbox.ErrConfig) || !strings.Contains(err.Error(), "not a directory on box") {
		t.Errorf("Stat with a missing root: %v", err)
	}
}

// Instructions name the box and the root and state every gap; Gaps drops
// the write's when the client says its Write is atomic.
func TestFromClientStatesItsGaps(t *testing.T) {
	b := newHostBox(t)
	sb, err := remote.FromClient(b, remote.ClientOptions{Root: "/home/user", Name: "acme sandbox sb-42"})
	if err != nil {
		t.Fatal(err)
	}
	ins := sb.Instructions()
	gaps := sb.Gaps()
	if len(gaps) != 5 {
		t.Errorf("Gaps() = %q, want 5", gaps)
	}
	for _, want := range append([]string{"acme sandbox sb-42", "/home/user", "another machine"}, gaps...) {
		if !strings.Contains(ins, want) {
			t.Errorf("Instructions %q lack %q", ins, want)
		}
	}
	for _, want := range []string{"atomic", "symbolic link", "bounded only once it has arrived", "timeout stops only what the provider stops", "Standard input"} {
		if !strings.Contains(strings.Join(gaps, " "), want) {
			t.Errorf("Gaps %q do not say %q", gaps, want)
		}
	}
	if sb.Scope() == "" || !strings.Contains(sb.Scope(), "acme sandbox sb-42") {
		t.Errorf("Scope() = %q", sb.Scope())
	}
	atomicSB, _ := remote.FromClient(b, remote.ClientOptions{Root: "/home/user", AtomicWrite: true})
	if g := atomicSB.Gaps(); len(g) != 4 || strings.Contains(strings.Join(g, " "), "atomic") {
		t.Errorf("Gaps with AtomicWrite = %q", g)
	}
	if !sb.Supports(sandbox.FeatureManage) || !sb.Supports(sandbox.FeatureShell) || sb.Supports("teleport") {
		t.Error("Supports is wrong")
	}
	// What hutch check shows of a sandbox: the probe carries the gaps.
	hostSB, err := remote.FromClient(b, remote.ClientOptions{Root: b.dir})
	if err != nil {
		t.Fatal(err)
	}
	if env := sandbox.Probe(bg, hostSB, "sh"); env.Error != "" || !slices.Equal(env.Gaps, hostSB.Gaps()) || env.Commands["sh"].Path == "" {
		t.Errorf("Probe = %+v, want the gaps %q", env, hostSB.Gaps())
	}
}

// recorder is a Client over another that records every Exec request and
// can answer in place of the box.
type recorder struct {
	remote.Client
	mu     sync.Mutex
	reqs   []remote.ExecRequest
	answer func(ctx context.Context, req remote.ExecRequest) (remote.ExecResult, error)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

func (r *recorder) Exec(ctx context.Context, req remote.ExecRequest) (remote.ExecResult, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	if r.answer != nil {
		return r.answer(ctx, req)
	}
	return r.Client.Exec(ctx, req)
}

// Every call to the client carries a timeout: the command's (the default
// when it has none), a file operation's context deadline, OpTimeout
// without one.
func TestFromClientAlwaysGivesATimeout(t *testing.T) {
	b := newHostBox(t)
	rec := &recorder{Client: b}
	sb, err := remote.FromClient(rec, remote.ClientOptions{Root: b.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	last := func() time.Duration {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.reqs[len(rec.reqs)-1].Timeout
	}
	if _, err := sb.Exec(bg, sandbox.Command{Shell: "true"}); err != nil || last() != sandbox.DefaultTimeout {
		t.Errorf("Exec without a timeout sent %v, %v", last(), err)
	}
	if _, err := sb.Exec(bg, sandbox.Command{Shell: "true", Timeout: 3 * time.Second}); err != nil || last() != 3*time.Second {
		t.Errorf("Exec with 3 s sent %v, %v", last(), err)
	}
	if err := sb.Mkdir(bg, "d"); err != nil || last() != remote.OpTimeout {
		t.Errorf("Mkdir without a deadline sent %v, %v", last(), err)
	}
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if _, err := sb.Glob(ctx, "**"); err != nil || last() > 5*time.Second || last() < 4*time.Second {
		t.Errorf("Glob with a 5 s deadline sent %v, %v", last(), err)
	}
}

// A client that keeps all the output is cut to MaxOutput here, the end
// kept, the sizes and truncation told; live writers get the kept part.
func TestFromClientBoundsOutputItIsGiven(t *testing.T) {
	b := newHostBox(t)
	big := append(bytes.Repeat([]byte("x"), 5<<20), "END"...)
	rec := &recorder{Client: b, answer: func(context.Context, remote.ExecRequest) (remote.ExecResult, error) {
		return remote.ExecResult{ExitCode: 3, Stdout: big, Stderr: []byte("small")}, nil
	}}
	sb, err := remote.FromClient(rec, remote.ClientOptions{Root: b.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var live bytes.Buffer
	r, err := sb.Exec(bg, sandbox.Command{Shell: "whatever", MaxOutput: 1000, Stdout: &live})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stdout) != 1000 || !bytes.HasSuffix(r.Stdout, []byte("END")) || !r.StdoutTruncated || r.StdoutSize != int64(len(big)) || r.ExitCode != 3 {
		t.Errorf("kept %d bytes, truncated %v, size %d, exit %d", len(r.Stdout), r.StdoutTruncated, r.StdoutSize, r.ExitCode)
	}
	if string(r.Stderr) != "small" || r.StderrTruncated || r.StderrSize != 5 {
		t.Errorf("stderr %q %v %d", r.Stderr, r.StderrTruncated, r.StderrSize)
	}
	if !bytes.Equal(live.Bytes(), r.Stdout) {
		t.Errorf("live writer got %d bytes, want the %d kept", live.Len(), len(r.Stdout))
	}
}

// A client that never returns holds Exec only as long as its context; a
// standard input over MaxStdin is refused before anything runs.
func TestFromClientDoesNotWaitForAStuckClient(t *testing.T) {
	b := newHostBox(t)
	release := make(chan struct{})
	defer close(release)
	rec := &recorder{Client: b, answer: func(context.Context, remote.ExecRequest) (remote.ExecResult, error) {
		<-release // ignores its context, as a bad SDK may
		return remote.ExecResult{}, nil
	}}
	sb, err := remote.FromClient(rec, remote.ClientOptions{Root: b.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := sb.Exec(ctx, sandbox.Command{Shell: "sleep 100"}); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("Exec on a stuck client: %v after %v", err, time.Since(start))
	}
	if _, err := sb.Stat(ctx, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stat on a stuck client: %v", err)
	}
	n := rec.count()
	_, err = sb.Exec(bg, sandbox.Command{Args: []string{"cat"}, Stdin: bytes.NewReader(make([]byte, remote.MaxStdin+1))})
	if !errors.Is(err, sandbox.ErrTooLarge) || rec.count() != n {
		t.Errorf("Exec with too much stdin: %v, %d calls", err, rec.count()-n)
	}
}
