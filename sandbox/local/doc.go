// Package local is hutch's host tier: a root directory on the host, opened
// with [New]. It implements the [sandbox.Sandbox] contract; its file
// operations are confined to the root, its commands are not.
//
// # Files
//
// File operations (Read, Write, Stat, Glob) go through os.Root, which
// resolves every path component at the system-call level: "..", absolute
// paths elsewhere and symbolic links pointing out — at any depth, dangling
// or swapped after a check — fail with [sandbox.ErrEscape] and nothing
// outside the root is touched. Absolute symbolic links are refused even
// when their target is inside the root (os.Root does not follow them).
//
// # Commands
//
// Exec is NOT confined: the command runs on the host with hutch's own user
// and can reach anything that user can. What the tier does guarantee:
//
//   - the working directory is inside the root;
//   - the environment is exactly PATH, HOME and LANG (taken from hutch's
//     environment when set) plus what [Options].Env and
//     [sandbox.Command].Env add — no other variable of hutch's environment
//     reaches the command;
//   - the command is PID 1 of a new PID namespace, so when it exits, times
//     out or is cancelled, the kernel kills every process it started,
//     including those that called setsid or double-forked.
//
// # Limitations
//
// Signals the command sends itself without installing a handler are
// ignored, as for any PID 1. When hutch runs without root the PID
// namespace needs unprivileged user namespaces; a host without them
// reports [sandbox.ErrUnsupported] with the fix (see [Check]), it never
// runs the command with weaker cleanup. Use the local tier for trusted
// work; use sandbox/isolated to confine untrusted commands.
package local
