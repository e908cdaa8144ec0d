package isolated_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

// The isolated tier passes the same conformance suite as every tier. Each
// sandbox may write its own fresh directory and starts there.
func TestConformance(t *testing.T) {
	newEnv(t) // skips outside CI on hosts that cannot isolate
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox {
		dir := t.TempDir()
		sb, err := isolated.New(context.Background(), isolated.Options{Policy: policy.Default().Extend(policy.Policy{Write: []string{dir}})})
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}, sandboxtest.Options{HostProcesses: true})
}

// A sandbox is a session: many commands and file operations, concurrently,
// in one set of namespaces; a command's leftovers die with it; Close ends
// everything.
func TestSession(t *testing.T) {
	e := newEnv(t)
	sb, err := isolated.New(bg, isolated.Options{Policy: e.pol})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 8 {
				r, err := sb.Exec(bg, sandbox.Command{Args: []string{"echo", "hi"}, Timeout: 10 * time.Second})
				if err != nil || string(r.Stdout) != "hi\n" {
					errs <- errors.New("exec: " + string(r.Stdout) + " " + errString(err))
				}
				if err := sb.Write(bg, "f"+strings.Repeat("x", i)+".txt", []byte{byte(j)}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The file tools act inside the boundary: under the same policy.
	if err := sb.Write(bg, "/usr/x", []byte("x")); err == nil {
		t.Error("write_file outside the policy succeeded")
	}
	if _, err := sb.Read(bg, e.secret); !errors.Is(err, sandbox.ErrEscape) {
		t.Errorf("reading a host file outside the root: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(e.work, "fxxx.txt")); err != nil || len(b) != 1 {
		t.Errorf("a file written through the session is not on the host: %v", err)
	}
	// Close kills a running command and later calls fail.
	go func() { time.Sleep(200 * time.Millisecond); sb.Close() }()
	if _, err := sb.Exec(bg, sandbox.Command{Shell: "sleep 30"}); err == nil {
		t.Error("a command outlived Close")
	}
	if _, err := sb.Read(bg, "fx.txt"); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A start directory missing on the host fails New with a reason, not a
// session that dies on its first call.
func TestMissingStartDir(t *testing.T) {
	newEnv(t)
	dir := filepath.Join(t.TempDir(), "not-there")
	sb, err := isolated.New(bg, isolated.Options{Policy: policy.Default().Extend(policy.Policy{Write: []string{dir}, Dir: dir})})
	if err == nil {
		sb.Close()
		t.Fatal("New succeeded with a missing start directory")
	}
	if !strings.Contains(err.Error(), "start directory") {
		t.Errorf("error does not name the start directory: %v", err)
	}
}

// The start directory and the writable paths are checked on the host
// before anything is built: a missing or unusable one, or a symbolic
// link to somewhere the policy leaves out (the sandbox holds the link,
// never what it names), is an error naming it and the fix (ErrNotFound
// for a missing start directory, else ErrConfig), in a
// one-shot run and a session alike. A link whose target the policy gives
// works.
func TestStartDirAndWritableLinksCheckedOnTheHost(t *testing.T) {
	newEnv(t)
	dir := t.TempDir()
	real, outside := filepath.Join(dir, "real"), t.TempDir()
	file := filepath.Join(dir, "file")
	for _, err := range []error{
		os.Mkdir(real, 0o755),
		os.WriteFile(file, nil, 0o644),
		os.Symlink("real", filepath.Join(dir, "to-real")),
		os.Symlink(outside, filepath.Join(dir, "to-outside")),
		os.Symlink("gone", filepath.Join(dir, "dangling")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	at := func(name string) string { return filepath.Join(dir, name) }
	cases := []struct {
		name string
		pol  policy.Policy
		want string // "" runs
		is   error
	}{
		{"missing start directory", policy.Policy{Write: []string{dir}, Dir: at("missing")}, "start directory " + at("missing") + " does not exist", sandbox.ErrNotFound},
		{"start directory is a file", policy.Policy{Write: []string{dir}, Dir: file}, "is not a directory", sandbox.ErrConfig},
		{"start directory links outside", policy.Policy{Read: []string{dir}, Dir: at("to-outside")}, "is a symbolic link to " + outside + ", which the policy does not give", sandbox.ErrConfig},
		{"writable link outside", policy.Policy{Write: []string{at("to-outside")}, Dir: "/tmp"}, "writable path " + at("to-outside") + " is a symbolic link to " + outside, sandbox.ErrConfig},
		{"writable dangling link", policy.Policy{Write: []string{at("dangling")}, Dir: "/tmp"}, "symbolic link that leads nowhere", sandbox.ErrConfig},
		{"writable link, its target too", policy.Policy{Write: []string{at("to-real"), real}, Dir: real}, "", nil},
		{"start directory links inside", policy.Policy{Write: []string{dir}, Dir: at("to-real")}, "", nil},
	}
	for _, c := range cases {
		pol := policy.Default().Extend(c.pol)
		t.Run(c.name, func(t *testing.T) {
			r, err := isolated.Run(bg, pol, sandbox.Command{Args: []string{"true"}, Timeout: 20 * time.Second})
			sb, serr := isolated.New(bg, isolated.Options{Policy: pol})
			if serr == nil {
				sb.Close()
			}
			for mode, err := range map[string]error{"one-shot": err, "session": serr} {
				switch {
				case c.want == "" && err != nil:
					t.Errorf("%s: %v", mode, err)
				case c.want != "" && (!errors.Is(err, c.is) || !strings.Contains(errString(err), c.want)):
					t.Errorf("%s: %v; want %v with %q", mode, err, c.is, c.want)
				}
			}
			if c.want == "" && r.ExitCode != 0 {
				t.Errorf("exit %d, stderr %q", r.ExitCode, r.Stderr)
			}
		})
	}
}

// An exec helper (a session's path when its open-files limit is below
// what a runner needs) keeps its own stderr, for its Go runtime's last
// words, and hands the command the command's at boundary.ExecStderrFD. The
// command's stderr, and the helper's own lines for it ("command not
// found"), still reach the result; the descriptor does not reach the
// command.
func TestExecHelperStreams(t *testing.T) {
	e := newEnv(t)
	sb := a2Session(t, e.pol.Extend(policy.Policy{Limits: policy.Limits{OpenFiles: 16}}))
	inSession := func(script string) sandbox.Result { return a2Exec(t, sb, script, 20*time.Second) }
	if name, _ := startedBy(t, e.work, inSession, "true"); name != "hutch-sandbox-exec" {
		t.Fatalf("commands of this session run through %q, not an exec helper", name)
	}
	cases := []struct {
		name           string
		cmd            sandbox.Command
		code           int
		stdout, stderr string
	}{
		{"both streams", sh("echo to-stdout; echo to-stderr >&2"), 0, "to-stdout\n", "to-stderr\n"},
		{"not found", sandbox.Command{Args: []string{"hutch-no-such-program"}}, 127, "", "hutch: hutch-no-such-program: command not found\n"},
		{"no descriptor beyond 2", sh(fmt.Sprintf("ls /proc/self/fd/%d 2>/dev/null; ls /proc/self/fd | sort -n | tr '\\n' ' '", boundary.ExecStderrFD)), 0, "0 1 2 3 ", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cmd.Timeout = 20 * time.Second
			r, err := sb.Exec(bg, c.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if r.ExitCode != c.code || string(r.Stdout) != c.stdout || string(r.Stderr) != c.stderr {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", r.ExitCode, r.Stdout, r.Stderr, c.code, c.stdout, c.stderr)
			}
		})
	}
}

// Arguments, environment values and the start directory reach a
// session's command byte for byte, also when they are not UTF-8 (the
// helpers' JSON records alone would turn those bytes into U+FFFD), through
// the runner and through an exec helper alike.
func TestSessionArgumentsNotUTF8(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.work, "d\xe9j\xe0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, pol := range map[string]policy.Policy{
		"runner":      e.pol,
		"exec helper": e.pol.Extend(policy.Policy{Limits: policy.Limits{OpenFiles: 16}}),
	} {
		t.Run(name, func(t *testing.T) {
			sb := a2Session(t, pol)
			r, err := sb.Exec(bg, sandbox.Command{
				Args:    []string{"sh", "-c", `printf '%s|%s|%s' "$1" "$V" "$(pwd)"`, "sh", "a\xffb"},
				Env:     map[string]string{"V": "\xfe"},
				Dir:     dir,
				Timeout: 20 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := "a\xffb|\xfe|" + dir; string(r.Stdout) != want {
				t.Errorf("got %q, want %q (stderr %q)", r.Stdout, want, r.Stderr)
			}
		})
	}
}
