package local_test

import (
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

func newLocal(t *testing.T) *local.Sandbox { return newLocalB(t) }

func newLocalB(tb testing.TB) *local.Sandbox {
	tb.Helper()
	sb, err := local.New(tb.TempDir(), local.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sb.Close() })
	return sb
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return newLocal(t) }, sandboxtest.Options{HostProcesses: true})
}
