package local_test

import (
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

func newLocal(t *testing.T) *local.Sandbox {
	t.Helper()
	sb, err := local.New(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return newLocal(t) }, sandboxtest.Options{HostProcesses: true})
}
