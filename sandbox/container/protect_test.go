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

// The helper's file operations keep the protected paths read-only in a
// writable bind, whether they existed when the container started or not.
func TestFileToolsKeepProtectedPaths(t *testing.T) {
	sandboxtest.RunProtected(t, protectedContainer)
}

// missingGap is why a command can still make a protected path that did
// not exist when the container started (docs/security.md).
const missingGap = "a read-only bind needs an existing source and mount point, and hutch makes none in the host's directory"

// A command cannot write, create, rename or remove a protected path that
// existed when the container started (read-only binds over each).
func TestCommandsKeepExistingProtectedPaths(t *testing.T) {
	sandboxtest.RunProtectedCommands(t, protectedContainer, true, missingGap)
}

// The gap stated in docs/security.md, as a test: the case skips naming it.
func TestCommandsKeepMissingProtectedPaths(t *testing.T) {
	sandboxtest.RunProtectedCommands(t, protectedContainer, false, missingGap)
}
