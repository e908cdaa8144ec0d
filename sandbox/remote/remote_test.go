package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/sandbox/remote"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
	"github.com/hutchsandbox/hutch/server"
)

var bg = context.Background()

// The test binary is also the server: the program "serve" is `hutch
// serve --stdio` for the tier its arguments name (local ROOT, or isolated
// POLICY-JSON), and the isolated tier's helper.
func TestMain(m *testing.M) {
	helper.Main()
	testenv.RunProgram()
	os.Exit(m.Run())
}

func init() {
	testenv.RegisterProgram("serve", func(args []string) {
		if err := serveProgram(args); err != nil {
			fmt.Fprintf(os.Stderr, "serve: %v\n", err)
			os.Exit(1)
		}
	})
}

func serveProgram(args []string) error {
	var sb sandbox.Sandbox
	var err error
	switch args[0] {
	case "local":
		sb, err = local.New(bg, local.Options{Dir: args[1]})
	case "isolated":
		var pol policy.Policy
		if err := json.Unmarshal([]byte(args[1]), &pol); err != nil {
			return err
		}
		sb, err = isolated.New(bg, isolated.Options{Policy: pol})
	}
	if err != nil {
		return err
	}
	defer sb.Close()
	return server.ServeStream(bg, os.Stdin, os.Stdout, sb, server.Served{Tier: args[0]})
}

// serving is a Dialer that starts this test binary as the server.
func serving(args ...string) remote.Dialer {
	argv := testenv.ProgramArgv(args...)
	return remote.Command(argv[0], argv[1:]...)
}

func newRemote(t *testing.T, args ...string) *remote.Sandbox {
	t.Helper()
	t.Setenv(testenv.ProgramEnvKey, "serve") // the dialer's child inherits it
	sb, err := remote.New(bg, serving(args...), remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// serveTier starts a server of the named tier (local or isolated) whose
// root is dir.
func serveTier(t *testing.T, tier, dir string) *remote.Sandbox {
	t.Helper()
	if tier == "local" {
		return newRemote(t, "local", dir)
	}
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "this host cannot build isolated sandboxes: %v", err)
	}
	pol, err := json.Marshal(policy.Default().Extend(policy.Policy{Write: []string{dir}}))
	if err != nil {
		t.Fatal(err)
	}
	return newRemote(t, "isolated", string(pol))
}

var tiers = []string{"local", "isolated"}

func localServer(t *testing.T) *remote.Sandbox { return serveTier(t, "local", t.TempDir()) }

// The remote tier keeps the contract of the tier it serves: the whole
// conformance suite over `hutch serve --stdio` (a subprocess), serving
// the local and the isolated tier.
func TestConformanceOverStdio(t *testing.T) {
	for _, tier := range tiers {
		t.Run(tier, func(t *testing.T) {
			sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return serveTier(t, tier, t.TempDir()) }, sandboxtest.Options{HostProcesses: true})
		})
	}
}

// Instructions say where tools act: another machine, how it is reached,
// the served tier and its root.
func TestInstructionsNameTheServerAndTier(t *testing.T) {
	sb := localServer(t)
	defer sb.Close()
	ins := sb.Instructions()
	for _, want := range []string{"another machine", "local tier", sb.Root()} {
		if !strings.Contains(ins, want) {
			t.Errorf("Instructions %q lack %q", ins, want)
		}
	}
	if sb.Tier() != "local" || !sb.Supports(sandbox.FeatureShell) || sb.Supports("teleport") {
		t.Errorf("Tier %q, shell %v, teleport %v", sb.Tier(), sb.Supports(sandbox.FeatureShell), sb.Supports("teleport"))
	}
}

// A server that dies under a command gives the caller a clear error
// within a bounded time, and every later call the same error: the
// session is gone, never silently redialled.
func TestServerKilledDuringExecIsGone(t *testing.T) {
	for _, tier := range tiers {
		t.Run(tier, func(t *testing.T) { testServerKilled(t, tier) })
	}
}

func testServerKilled(t *testing.T, tier string) {
	root := t.TempDir()
	sb := serveTier(t, tier, root)
	defer sb.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := sb.Exec(bg, sandbox.Command{Shell: "touch started; sleep 30", Timeout: time.Minute})
		errc <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(root + "/started"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	pid := testenv.FindProcess(root)
	if pid == 0 {
		t.Fatal("no server process")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-errc:
	case <-time.After(20 * time.Second):
		t.Fatal("Exec still waits 20 s after its server was killed")
	}
	if !errors.Is(err, remote.ErrGone) || !errors.Is(err, sandbox.ErrClosed) {
		t.Fatalf("Exec: %v, want ErrGone", err)
	}
	if _, err := sb.Read(bg, "x"); !errors.Is(err, remote.ErrGone) {
		t.Fatalf("Read after the loss: %v, want ErrGone", err)
	}
	// Nothing the session ran outlives its server.
	for deadline := time.Now().Add(10 * time.Second); testenv.FindProcess("touch started; sleep 30") != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the session's command still runs 10 s after its server was killed")
		}
	}
}

// A server that cannot be started, or is no hutch, is New's error, one
// line naming the command.
func TestNewRefusesWhatIsNoServer(t *testing.T) {
	for _, d := range []remote.Dialer{remote.Command("/nonexistent/hutch", "serve"), remote.Command("true"), remote.Command("echo", "hello")} {
		sb, err := remote.New(bg, d, remote.Options{})
		if err == nil {
			sb.Close()
			t.Errorf("New(%v) worked", d)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("New(%v): more than one line: %q", d, err)
		}
	}
	if _, err := remote.New(bg, nil, remote.Options{}); !errors.Is(err, sandbox.ErrConfig) {
		t.Errorf("New(nil): %v, want ErrConfig", err)
	}
}

// listening starts `hutch serve --listen` in this process, on loopback,
// serving sandboxes of tier rooted at a fresh directory each, and returns
// its URL and token. The server stops when the test ends.
func listening(t *testing.T, tier string, cfg server.Config) (url, token string) {
	t.Helper()
	if tier == "isolated" {
		if err := isolated.Supported(); err != nil {
			testenv.Missing(t, "this host cannot build isolated sandboxes: %v", err)
		}
	}
	token = "test-token-0123456789abcdef"
	cfg.Token = token
	if cfg.Open == nil {
		cfg.Open = func(ctx context.Context, n policy.Narrowing) (sandbox.Sandbox, server.Served, error) {
			dir := t.TempDir()
			if tier == "local" {
				sb, err := local.New(ctx, local.Options{Dir: dir})
				return sb, server.Served{Tier: tier}, err
			}
			pol, err := policy.Default().Extend(policy.Policy{Write: []string{dir}}).Narrow(n)
			if err != nil {
				return nil, server.Served{}, err
			}
			sb, err := isolated.New(ctx, isolated.Options{Policy: pol})
			return sb, server.Served{Tier: tier, Summary: pol.Summary()}, err
		}
	}
	ln, err := server.ListenAddr("127.0.0.1:0", cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, ln, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String(), token
}

// The same contract over `hutch serve --listen` on loopback: a session
// per sandbox.
func TestConformanceOverListen(t *testing.T) {
	for _, tier := range tiers {
		t.Run(tier, func(t *testing.T) {
			url, token := listening(t, tier, server.Config{})
			sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox {
				sb, err := remote.New(bg, remote.Server{URL: url, Token: token}, remote.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return sb
			}, sandboxtest.Options{HostProcesses: true})
		})
	}
}
