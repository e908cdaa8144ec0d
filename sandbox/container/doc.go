// Package container is hutch's container tier: tools act inside an OCI
// container driven through the runtime's own command-line program —
// docker, podman or Apple's container — never through an SDK. It
// implements the [sandbox.Sandbox] contract; open one with [New].
//
// # Hardening
//
// Hardened by default, each hardening an explicit opt-out in [Options]:
// no network (only loopback), every capability dropped,
// no-new-privileges, a read-only root filesystem with a writable tmpfs at
// the working directory and at /tmp, at most [DefaultPidsLimit]
// processes, and the identity label hutch.sandbox.id=<name>. What a
// runtime cannot honour is listed by [Options.HardeningGaps], never
// dropped silently. [FromPolicy] maps a [policy.Policy] onto these
// options and names what it cannot carry over.
//
// # Fast path and fallback
//
// hutch's own static binary is mounted read-only into the container (at
// [HelperPath]) and started once per session with `exec -i`; every
// operation then travels over that one stream as frames (the stream
// protocol of internal/wire). File operations act inside the container
// through the same os.Root guard as the local tier, rooted at the working
// directory, so symbolic links resolve where they live and a link to /etc
// is an escape. Programs using the fast path must call [helper.Main] at
// the start of main (and of TestMain): the helper is this same binary,
// and it must be static (CGO_ENABLED=0) to run in any image — a
// dynamically linked one is tried through exec, never as the container's
// init.
//
// When the helper cannot run there (a foreign architecture, no helper
// binary, a remote engine without [Options].Helper, or
// [Options].NoHelper), the sandbox falls back to one runtime exec per
// operation, with paths and patterns passed as arguments and never
// spliced into shell text.
//
// # Commands
//
// Commands may overlap. On the fast path each runs under a reaper of its
// own, in a session of its own, so a command's end, timeout or cancel
// kills exactly the processes it started — daemons that called setsid or
// double-forked included — and never those of a command running beside
// it. In the fallback, a command's end kills its tree and every process
// orphaned in the container since it started (the runtime cannot tell
// whose an orphan is), which may take a concurrent command's daemons
// along.
//
// Environment values ([Options].Env, [sandbox.Command].Env) never appear
// on a command line or in the container's configuration: the fast path
// sends them per command over the stream, the fallback through a 0600
// file given to --env-file and removed afterwards.
//
// # Lifetime
//
// The container starts lazily, on the first operation, and
// [Sandbox.Close] removes it (unless [Options].Reconnect; the working
// directory's tmpfs then lives as long as the container runs, and a stop
// empties it). A container that is not Reconnect dies with the process
// that made it, however that process ends: it is started attached, its
// main process reading a standard input only that process holds
// ([Options.WatchedRunArgs]); [GC] removes the ones left anyway. A
// container that went away under a sandbox makes its operations fail
// with [ErrGone].
//
// # Engines
//
// [Options].Engine selects a docker context or host, or a podman
// connection, so remote engines work; on a remote engine the helper is a
// path on the engine's machine ([Options].Helper). docs/container.md has
// the whole model and the measured costs.
package container
