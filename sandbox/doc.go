// Package sandbox defines the contract every hutch tier implements: where an
// agent's tools read, write, glob, stat and execute. It holds the
// [Sandbox] interface, the types its methods take and return, the errors
// callers branch on, the limits every tier keeps, and a few functions over
// the contract ([Probe], [ReadStat], [ReadStream]) that use an optional
// interface when a tier has one and fall back on the contract when not, the
// way io/fs does.
//
// The tiers are packages of their own: sandbox/virtual (in memory, no
// shell), sandbox/local (a host directory), sandbox/isolated (kernel
// isolation) and sandbox/container (a container engine). Each builds its
// sandbox with New(ctx, Options). The conformance suite in package
// sandbox/sandboxtest proves the contract below for each of them.
//
// # Paths
//
// Paths are relative to [Sandbox.Root]; absolute paths inside the root are
// accepted. Anything that resolves outside the root — "..", an absolute
// path elsewhere, a symbolic link pointing out at any depth, dangling or
// swapped after a check — is an error matching [ErrEscape], and nothing
// is touched. An empty path, a NUL byte or a path longer than [MaxPathLen]
// is [ErrInvalidPath]. [Clean] and [CleanPattern] state the rules as
// code. Errors of path operations are *fs.PathError values whose Path is
// the caller's path, byte for byte.
//
// # Files and globs
//
// [Sandbox.Write] creates missing parent directories and never leaves a torn
// file. [Sandbox.Glob] supports "**", returns root-relative
// slash-separated paths, sorted, without duplicates, and at most
// [MaxGlobResults] of them. [Sandbox.Stat] follows symbolic links inside the
// root, so a [FileInfo] never has a link's kind.
//
// # Commands
//
// [Sandbox.Exec] runs a [Command] and returns its [Result]: the exit code,
// both output streams (the last [DefaultMaxOutput] bytes of each, however
// much is printed), and why the command stopped. A timeout
// ([DefaultTimeout] unless the Command says) kills every process the
// command started. A tier without a shell ([Feature] [FeatureShell] not
// supported) returns [ErrUnsupported].
//
// # Optional interfaces
//
//   - [StatReader]: read and describe a file in one step ([ReadStat]).
//   - [Streamer]: hand a file over as it is read ([ReadStream]).
//   - [Scoper]: name everything a call reaches beyond the root, so an
//     approval for one sandbox never covers another.
//   - [InMemory]: the files exist only in hutch's memory.
//
// # Errors
//
// Callers branch with errors.Is on [ErrEscape], [ErrNotFound] (which also
// matches fs.ErrNotExist), [ErrUnsupported], [ErrConfig],
// [ErrInvalidPath], [ErrIsDir], [ErrNotDir], [ErrTooLarge] and
// [ErrClosed]. After Close every method returns an error matching
// ErrClosed.
//
// # Limits
//
// The contract does not confine Exec by itself: what a command can reach
// is the tier's to say (the local tier runs it on the host as hutch's
// user; the isolated and container tiers confine it). See each tier's
// package documentation and docs/security.md.
package sandbox
