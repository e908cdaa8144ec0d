package container_test

import (
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

// protectedContainer is a container with the host directory dir bound
// writable at the same path, its working directory, default protection.
func protectedContainer(t *testing.T, dir string) sandbox.Sandbox {
	t.Helper()
	return newSB(t, container.Options{Binds: []container.Bind{{Source: dir, Target: dir, Writable: true}}, WorkDir: dir})
}

// Protected paths stay read-only in a writable root: the file tools
// refuse every one, existing or not; a command cannot write, create,
// rename or remove one that existed when the container started, by
// redirection, cp, mv, ln (soft or hard), mkdir, touch, chmod or rm, nor
// through a link. The missing-path case for commands skips naming the
// gap docs/security.md states.
func TestProtectedPathsStayReadOnly(t *testing.T) {
	sandboxtest.RunProtectedAll(t, protectedContainer, "a read-only bind needs an existing source and mount point, and hutch makes none in the host's directory")
}
