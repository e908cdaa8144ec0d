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
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/wire"
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
			reserveThreads(serverThreads)
			os.Exit(initMain())
		case boundary.ExecName:
			reserveThreads(starterThreads)
			os.Exit(execMain())
		case boundary.RunnerName:
			reserveThreads(starterThreads)
			os.Exit(runnerMain())
		}
		if filepath.Base(os.Args[0]) == boundary.ContainerHelperName {
			if code, ok := containerMain(os.Args[1:]); ok {
				os.Exit(code)
			}
		}
	}
	ready.Store(true)
}

// Ready reports whether Main was called in this process, so re-executing
// the binary as a helper is safe.
func Ready() bool { return ready.Load() }

// Policy and job files carry JSON; decoding is strict.
func decodeJob(f *os.File) (wire.Job, error) {
	var j wire.Job
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return j, fmt.Errorf("reading the job: %w", err)
	}
	if len(j.Argv) == 0 {
		return j, fmt.Errorf("job has no command")
	}
	return j, nil
}
