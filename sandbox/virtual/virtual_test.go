package virtual_test

import (
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
)

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(*testing.T) sandbox.Sandbox { return virtual.New() }, sandboxtest.Options{})
}
