package container_test

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

// testImage is the image scripts/docker-up.sh builds: busybox only.
var testImage = envOr("HUTCH_TEST_IMAGE", "hutch-test-busybox:latest")

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

var (
	engineOnce sync.Once
	engineErr  string
)

// needDocker skips (or, under CI=true, fails) when no Docker engine with
// the test image answers.
func needDocker(t testing.TB) {
	t.Helper()
	engineOnce.Do(func() {
		if _, err := exec.LookPath("docker"); err != nil {
			engineErr = "no docker program in PATH"
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", testImage).CombinedOutput(); err != nil {
			engineErr = "docker engine or image " + testImage + " not available: " + strings.TrimSpace(string(out))
		}
	})
	if engineErr == "" {
		return
	}
	testenv.Missing(t, "%s (run scripts/docker-up.sh to install docker.io, start dockerd and build the image)", engineErr)
}

var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
)

// staticHelper returns a static build of this test binary when the running
// one is dynamically linked (cgo): a busybox image has no C library, and
// the helper must run there. "" means the test binary itself will do.
func staticHelper(t testing.TB) string {
	t.Helper()
	helperOnce.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			helperErr = err
			return
		}
		if f, err := elf.Open(exe); err == nil {
			dynamic := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
			f.Close()
			if !dynamic {
				return
			}
		}
		dir, err := os.MkdirTemp("", "hutch-helper-")
		if err != nil {
			helperErr = err
			return
		}
		out := filepath.Join(dir, "container.test")
		c := exec.Command("go", "test", "-c", "-o", out, ".")
		c.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := c.CombinedOutput(); err != nil {
			helperErr = fmt.Errorf("building a static helper: %v: %s", err, b)
			return
		}
		helperPath = out
	})
	if helperErr != nil {
		t.Fatal(helperErr)
	}
	return helperPath
}

// newSB makes a sandbox on the test image and removes it at the end.
func newSB(t testing.TB, o container.Options) *container.Sandbox {
	t.Helper()
	needDocker(t)
	if o.Image == "" {
		o.Image = testImage
	}
	if o.Helper == "" && !o.NoHelper {
		o.Helper = staticHelper(t)
	}
	sb, err := container.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb
}

// onHelper starts sb and fails unless it runs on the helper path.
func onHelper(t testing.TB, sb *container.Sandbox) *container.Sandbox {
	t.Helper()
	if err := sb.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m, why := sb.Mode(); m != container.ModeHelper {
		t.Fatalf("mode %q (%s), want the helper", m, why)
	}
	return sb
}

func TestConformanceHelper(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox {
		return onHelper(t, newSB(t, container.Options{}))
	}, sandboxtest.Options{HostProcesses: true})
}

func TestConformanceCLI(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox {
		sb := newSB(t, container.Options{NoHelper: true})
		if err := sb.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if m, _ := sb.Mode(); m != container.ModeCLI {
			t.Fatalf("mode %q, want the fallback", m)
		}
		return sb
	}, sandboxtest.Options{HostProcesses: true})
}
