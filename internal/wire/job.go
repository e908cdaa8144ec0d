package wire

import (
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

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
	Policy policy.Policy `json:"policy,omitzero"`
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
	// HiddenProc are the /proc entries a session's init hides in the
	// sandbox's /proc besides its fixed list: those the host's
	// unprivileged users cannot read, walked on the host (sysprog's
	// WalkProcAhead), where alone it can be told whether the sandbox's
	// root could read them. None when it could not.
	HiddenProc []string `json:"hidden_proc,omitempty"`
	// Quoted, on the wire only, says Argv, Env and Dir are in Go's quoted
	// form (see quoteWords).
	Quoted bool `json:"quoted,omitempty"`
}

// PathEnv is the command's PATH: the last PATH= of its environment, or
// sandbox.DefaultPath.
func (j Job) PathEnv() string {
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
