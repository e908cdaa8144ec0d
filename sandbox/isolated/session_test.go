package isolated_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
		sb, err := isolated.New(context.Background(), policy.Default().Extend(policy.Policy{Write: []string{dir}}))
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
	sb, err := isolated.New(bg, e.pol)
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
	sb, err := isolated.New(bg, policy.Default().Extend(policy.Policy{Write: []string{dir}, Dir: dir}))
	if err == nil {
		sb.Close()
		t.Fatal("New succeeded with a missing start directory")
	}
	if !strings.Contains(err.Error(), "start directory") {
		t.Errorf("error does not name the start directory: %v", err)
	}
}
