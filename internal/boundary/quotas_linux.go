package boundary

import (
	"math"
	"strconv"
	"strings"

	"github.com/hutchsandbox/hutch/internal/wire"
	"golang.org/x/sys/unix"
)

// QuotaShare is the part of the host user's per-user kernel counts one
// sandbox may use: a quarter, which leaves the rest to hutch, to the
// user's other processes and to other sandboxes (four sandboxes that each
// take all of theirs still use up the user's counts: the bound is per
// sandbox).
const QuotaShare = 4

// QuotaSysctls are the per-user-namespace maxima SandboxQuotas sets, under
// /proc/sys/user.
var QuotaSysctls = []string{"max_inotify_instances", "max_inotify_watches", "max_fanotify_groups", "max_fanotify_marks"}

// Defaults for a per-user rlimit that is unlimited where hutch runs: the
// kernel's own defaults (a quarter of which a sandbox then gets), so that
// "unlimited" for hutch's user never means unlimited for a sandbox.
const (
	defaultMsgQueue = 819200  // bytes; MQ_BYTES_MAX
	defaultMemLock  = 8 << 20 // bytes; MLOCK_LIMIT
	// defaultThreads stands for kernel.threads-max where it cannot be
	// read (the kernel's own default for pending signals is that limit).
	defaultThreads = 819200
)

// SandboxQuotas reads, on the host, the counts of the user namespace
// hutch runs in (/proc/sys/user) and its own per-user rlimits, and
// returns a sandbox's share of each (QuotaShare; at least 1). A count
// this kernel does not have is left out.
func SandboxQuotas() wire.Quotas {
	q := wire.Quotas{Sysctls: map[string]int64{}}
	for _, name := range QuotaSysctls {
		b, err := ReadKernelFile("/proc/sys/user/" + name)
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 {
			q.Sysctls[name] = max(n/QuotaShare, 1)
		}
	}
	share := func(resource int, unlimited uint64) uint64 {
		var r unix.Rlimit
		if unix.Getrlimit(resource, &r) != nil {
			return 0
		}
		cur := r.Cur
		if cur == unix.RLIM_INFINITY || cur > math.MaxInt64 {
			cur = unlimited
		}
		return max(cur/QuotaShare, 1)
	}
	q.MsgQueue = share(unix.RLIMIT_MSGQUEUE, defaultMsgQueue)
	q.MemLock = share(unix.RLIMIT_MEMLOCK, defaultMemLock)
	// The kernel's own default for pending signals is the system's
	// thread limit; an unlimited one here gets a quarter of that.
	threads := uint64(defaultThreads)
	if b, err := ReadKernelFile("/proc/sys/kernel/threads-max"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			threads = n
		}
	}
	q.SigPending = share(unix.RLIMIT_SIGPENDING, threads)
	return q
}

// QuotaRlimits are q's rlimits, soft and hard alike.
func QuotaRlimits(q wire.Quotas) []Rlimit {
	var rs []Rlimit
	for _, r := range []struct {
		resource int
		v        uint64
		name     string
	}{{unix.RLIMIT_MSGQUEUE, q.MsgQueue, "message queue"}, {unix.RLIMIT_SIGPENDING, q.SigPending, "pending signals"},
		{unix.RLIMIT_MEMLOCK, q.MemLock, "locked memory"}} {
		if r.v > 0 {
			rs = append(rs, Rlimit{Resource: r.resource, Cur: r.v, Max: r.v, Name: r.name})
		}
	}
	return rs
}
