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
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// The argv[0] values that select a helper role. They cannot be confused
// with a real invocation: no program is started with these names.
const (
	InitName   = "hutch-sandbox-init"
	ExecName   = "hutch-sandbox-exec"
	RunnerName = "hutch-sandbox-runner"
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
		case InitName:
			reserveThreads(serverThreads)
			os.Exit(initMain())
		case ExecName:
			reserveThreads(starterThreads)
			os.Exit(execMain())
		case RunnerName:
			reserveThreads(starterThreads)
			os.Exit(runnerMain())
		}
		if filepath.Base(os.Args[0]) == ContainerHelperName {
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

// HelperEnv is the whole environment hutch gives its own processes in a
// sandbox (a session's init, runners, exec helpers). It stops the Go
// runtime's cgroup CPU-limit reader, which otherwise opens the host's
// cpu.cfs_quota_us and cpu.cfs_period_us at start (before the init
// changes root) and keeps them open for the life of the process: no
// descriptor opened on the host may live on inside. Their GOMAXPROCS is
// then the CPUs they may run on.
var HelperEnv = []string{"GODEBUG=containermaxprocs=0,updatemaxprocs=0"}

// Quotas are a sandbox's shares of the kernel counts that are kept per
// host user through every user namespace: a sandbox's processes count
// against the host user hutch runs as, together with every other process
// of that user (other sandboxes, hutch itself, and with hutch running as
// root the whole system's root processes). Bounded here, one sandbox
// cannot use up the share the others need: without it a command holding
// 128 inotify instances left every process of the user with "too many
// open files" from inotify_init1.
type Quotas struct {
	// Sysctls are the sandbox's user namespace's own maxima, by their
	// name under /proc/sys/user (max_inotify_instances and friends). The
	// kernel checks a namespace's count against its own maximum and each
	// parent's, so these bound the sandbox and everything in it; its
	// processes have no capability to raise them, and cannot make a
	// namespace of their own.
	Sysctls map[string]int64 `json:"sysctls,omitempty"`
	// MsgQueue, SigPending and MemLock are the commands' RLIMIT_MSGQUEUE
	// (bytes of POSIX message queues), RLIMIT_SIGPENDING (queued
	// signals) and RLIMIT_MEMLOCK (bytes of locked memory), soft and
	// hard; 0 leaves one as it is. The kernel compares each with the
	// sandbox's own count, so they bound the sandbox as a whole.
	MsgQueue, SigPending, MemLock uint64
}

// Job is what the host hands the init process: the policy and the command.
// It travels as JSON on the init's file descriptor 3.
type Job struct {
	Policy policy.Policy `json:"policy"`
	Argv   []string      `json:"argv"`
	Env    []string      `json:"env"`
	// Dir is where the command starts (inside the sandbox's view).
	Dir string `json:"dir"`
	// HostUID and HostGID are the ids the sandbox's root maps to.
	HostUID int `json:"host_uid"`
	HostGID int `json:"host_gid"`
	// MemoryByCgroup and PidsByCgroup say the host bounds memory and
	// processes with control groups; otherwise the exec helper uses
	// rlimits.
	MemoryByCgroup bool `json:"memory_by_cgroup,omitempty"`
	PidsByCgroup   bool `json:"pids_by_cgroup,omitempty"`
	// CmdGroup says commands start in the commands' control group (see
	// CommandGroup), whose files the helpers hold at CmdGroupFD and
	// CountFD.
	CmdGroup bool `json:"cmd_group,omitempty"`
	// Quotas are the sandbox's shares of the kernel's per-user counts
	// (see SandboxQuotas); the zero value sets none.
	Quotas Quotas `json:"quotas,omitzero"`
	// Quoted, on the wire only, says Argv, Env and Dir are in Go's quoted
	// form (see quoteWords).
	Quoted bool `json:"quoted,omitempty"`
}

// pathEnv is the command's PATH: the last PATH= of its environment, or
// sandbox.DefaultPath.
func (j Job) pathEnv() string {
	p := sandbox.DefaultPath
	for _, kv := range j.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			p = v
		}
	}
	return p
}

// Status is what the init process reports on its file descriptor 4 when
// the command has ended, or when it could not be started.
type Status struct {
	// SetupError is set when the sandbox could not be built; nothing ran.
	SetupError string `json:"setup_error,omitempty"`
	Exited     bool   `json:"exited"`
	ExitCode   int    `json:"exit_code"`
	Signal     int    `json:"signal"`
	CPUMillis  int64  `json:"cpu_ms"`
	MaxRSSKiB  int64  `json:"max_rss_kib"`
}

// Report sets how the command ended on r: its exit code, or 128+N and the
// signal's name when signal N ended it (as a shell reports it).
func (st Status) Report(r *sandbox.Result) {
	r.ExitCode = st.ExitCode
	if st.Signal != 0 {
		r.ExitCode, r.Signal = 128+st.Signal, unix.SignalName(unix.Signal(st.Signal))
	}
}

// Policy and job files carry JSON; decoding is strict.
func decodeJob(f *os.File) (Job, error) {
	var j Job
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
