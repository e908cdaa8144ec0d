// Package helper is the part of hutch that runs inside a sandbox boundary.
//
// A session (isolated.New) re-executes hutch's own binary
// (/proc/self/exe) to become the init process of the sandbox's
// namespaces, and again, inside them, as the runner or exec helper that
// confines commands just before they start. A one-shot run (RunOnce) does
// not start this binary at all: the caller forks itself, and the child
// builds and confines the sandbox with a program of raw system calls
// (the same programs the init and runner use) before it starts the
// command. Programs that use sessions of the isolated tier must call Main
// first thing in main (hutch's CLI does; test binaries do it from
// TestMain):
//
//	func main() {
//		helper.Main()
//		...
//	}
//
// When the process was started as a helper, Main does the helper's work and
// exits; otherwise it returns at once and records that the program can
// serve as its own helper (see Ready).
package helper

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/containerhelper"
	"github.com/hutchsandbox/hutch/internal/session"
	"github.com/hutchsandbox/hutch/internal/sysprog"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/policy"
)

var ready atomic.Bool

// Main runs the helper role this process was started for, and never
// returns in that case. Otherwise it returns and Ready reports true.
//
// Either way it first marks every inherited descriptor above 2 close-on-
// exec: whatever the parent left open (a terminal, a pipe, a socket) must
// not leak into a command that hutch runs, in any tier.
func Main() {
	closeInheritedOnExec()
	if len(os.Args) > 0 {
		switch os.Args[0] {
		case boundary.InitName:
			sysprog.ReserveThreads(sysprog.ServerThreads)
			os.Exit(session.InitMain())
		case boundary.ExecName:
			sysprog.ReserveThreads(sysprog.StarterThreads)
			os.Exit(session.ExecMain())
		case boundary.RunnerName:
			sysprog.ReserveThreads(sysprog.StarterThreads)
			os.Exit(session.RunnerMain())
		}
		if filepath.Base(os.Args[0]) == boundary.ContainerHelperName {
			if code, ok := containerhelper.Main(os.Args[1:]); ok {
				os.Exit(code)
			}
		}
	}
	ready.Store(true)
}

// Ready reports whether Main was called in this process, so re-executing
// the binary as a helper is safe.
func Ready() bool { return ready.Load() }

// NeedsSupervision reports whether the commands of a sandbox with
// policy p (normalized) need the session's supervisor: a protected path
// is missing in one of its writable directories (see
// [sysprog.NeedsSupervision]). RunOnce refuses such a policy; a session
// supervises its commands.
func NeedsSupervision(p policy.Policy) bool { return sysprog.NeedsSupervision(p) }

// ErrNeedsSupervisor is RunOnce's error (with sandbox.ErrUnsupported) for
// a policy whose commands need a session's supervisor.
var ErrNeedsSupervisor = sysprog.ErrNeedsSupervisor

// OneShot is what RunOnce takes besides its job and streams (see
// [sysprog.OneShot]).
type OneShot = sysprog.OneShot

// ProcWalk is a walk of /proc for a sandbox's root started ahead (see
// [sysprog.ProcWalk]).
type ProcWalk = sysprog.ProcWalk

// WalkProcAhead starts the walk of /proc a sandbox's root needs: a
// one-shot's (give it to RunOnce in OneShot.Proc) or a session init's
// (give its Result in the start request's job). See
// [sysprog.WalkProcAhead].
func WalkProcAhead(pol policy.Policy) *ProcWalk { return sysprog.WalkProcAhead(pol) }

// RunOnce runs job's command once in a fresh sandbox built from its
// policy, and tears the sandbox down: the isolated tier's one-shot run,
// with no helper process to start (see [sysprog.RunOnce], which it is).
// This process forks itself with the sandbox's namespaces; the child
// builds the root and confines itself exactly as a session's init and
// exec helper do, then starts the command as the sandbox's PID 1 and
// reaps everything. The policy's network must be none or all. A positive
// opt.Timeout, or ctx, kills the whole sandbox (timedOut says it was the
// timeout); err is for a sandbox that could not be built or run, or a
// cancelled ctx.
func RunOnce(ctx context.Context, job wire.Job, stdin, stdout, stderr *os.File, opt OneShot) (st wire.Status, timedOut bool, err error) {
	return sysprog.RunOnce(ctx, job, stdin, stdout, stderr, opt)
}
