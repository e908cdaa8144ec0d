package sysprog

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/seccomp"
	"github.com/hutchsandbox/hutch/internal/wire"
)

// confineOps appends the layers that work per process, in an order where
// each step still has the privilege it needs: resource limits, priority,
// a Landlock ruleset (with no_new_privs), every capability dropped, the
// seccomp filter. They bind the calling thread and what it starts; the
// program runs inside the sandbox's root (the paths are the sandbox's).
func confineOps(b *builder, job wire.Job) error {
	b.limits(job)
	if n := job.Policy.Nice; n > 0 {
		b.call("nice", unix.SYS_SETPRIORITY, unix.PRIO_PROCESS, 0, uintptr(n))
	}
	// Landlock and seccomp each need it; once is enough.
	b.call("no_new_privs", unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	b.landlock(job)
	b.dropCapabilities()
	return b.seccomp()
}

// limits appends the policy's resource limits that rlimits enforce.
func (b *builder) limits(job wire.Job) {
	for _, r := range append(boundary.Rlimits(job.Policy.Limits, job.PidsByCgroup), boundary.QuotaRlimits(job.Quotas)...) {
		b.call(r.Name+" limit", unix.SYS_PRLIMIT64, 0, uintptr(r.Resource), ptr(b, &unix.Rlimit{Cur: r.Cur, Max: r.Max}), 0)
	}
}

// Landlock filesystem rights by ABI version.
func landlockRights(abi int) uint64 {
	n := 13 // ABI 1: execute ... make_sym
	switch {
	case abi >= 9:
		n = 17 // + resolve_unix
	case abi >= 5:
		n = 16 // + ioctl_dev
	case abi >= 3:
		n = 15 // + truncate
	case abi >= 2:
		n = 14 // + refer
	}
	return 1<<n - 1
}

// Rights that make sense on a single file (not a directory).
const fileRights = llsys.AccessFSExecute | llsys.AccessFSWriteFile | llsys.AccessFSReadFile | llsys.AccessFSTruncate | llsys.AccessFSIoctlDev

const readRights = llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSReadDir

// landlock appends a Landlock ruleset mirroring the policy: its readable
// paths read-only, its writable paths and the private /tmp writable,
// /dev's few devices usable; from ABI 6 also abstract unix sockets and
// signals scoped to the sandbox. Best effort by kernel ABI (this layer
// adds to the mount namespace; it is not the only wall): nothing when
// the kernel has no Landlock (hutch check says so). A path missing in the
// sandbox gets no rule.
// landlockABI is the kernel's Landlock ABI version, asked once per
// process.
var landlockABI = sync.OnceValues(llsys.LandlockGetABIVersion)

func (b *builder) landlock(job wire.Job) {
	p := job.Policy
	abi, err := landlockABI()
	if err != nil || abi < 1 {
		return
	}
	handled := landlockRights(abi)
	attr := &llsys.RulesetAttr{HandledAccessFS: handled}
	if abi >= 6 {
		attr.Scoped = llsys.ScopeAbstractUnixSocket | llsys.ScopeSignal
	}
	rs := b.slot()
	b.call("landlock: creating the ruleset", unix.SYS_LANDLOCK_CREATE_RULESET, ptr(b, attr), unsafe.Sizeof(*attr), 0).out = rs
	for _, r := range []struct {
		paths  []string
		access uint64
	}{
		{append([]string{"/proc"}, p.Read...), readRights},
		{append([]string{"/tmp", "/dev/shm"}, p.Write...), handled},
		{[]string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}, readRights | llsys.AccessFSWriteFile},
	} {
		for _, path := range r.paths {
			b.landlockRule(rs, path, r.access&handled)
		}
	}
	b.call("landlock: enforcing the ruleset", unix.SYS_LANDLOCK_RESTRICT_SELF, 0, 0).in[0] = rs
	b.close(rs)
}

// landlockRule appends a rule granting access beneath path (only the
// rights that make sense on a file, when it is not a directory).
func (b *builder) landlockRule(rs uint8, path string, access uint64) {
	what := "landlock: rule for " + path
	fd := b.slot()
	start := b.mark()
	b.call(what, unix.SYS_OPENAT, cwd, b.str(path), unix.O_PATH|unix.O_CLOEXEC).out = fd
	rule := func(allowed uint64) {
		attr := &pathBeneath{allowed: allowed}
		o := b.call(what, unix.SYS_LANDLOCK_ADD_RULE, 0, unix.LANDLOCK_RULE_PATH_BENEATH, ptr(b, attr), 0)
		o.in[0], o.patch, o.patchFrom = rs, &attr.parentFD, fd
	}
	b.ifDir(what, fd, func() { rule(access) }, func() { rule(access & fileRights) })
	b.close(fd)
	b.skipTo(start, unix.ENOENT, unix.EACCES, unix.ENOTDIR, unix.ELOOP)
}

// lastCap is the kernel's highest capability number (read once; 40 when
// the kernel does not say).
var lastCap = sync.OnceValue(func() int {
	if v, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(v))); err == nil && n >= 0 && n < 64 {
			return n
		}
	}
	return 40
})

// pathBeneath is the kernel's struct landlock_path_beneath_attr (packed:
// the kernel reads its first 12 bytes).
type pathBeneath struct {
	allowed  uint64
	parentFD int32
	_        int32
}

// dropCapabilities appends leaving the command no capability, now or
// after execve: the bounding and ambient sets are emptied, the securebits
// stop root from regaining capabilities at exec, and the thread's own
// sets are cleared.
func (b *builder) dropCapabilities() {
	for c := 0; c <= lastCap(); c++ {
		b.call("dropping capabilities: bounding set", unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0).okErrs = 1 << unix.EINVAL
	}
	b.call("dropping capabilities: ambient set", unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0).okErrs = 1 << unix.EINVAL
	// NOROOT, NO_SETUID_FIXUP and NO_CAP_AMBIENT_RAISE, each locked, and
	// KEEP_CAPS locked off.
	const bits = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<5 | 1<<6 | 1<<7
	b.call("dropping capabilities: securebits", unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, bits, 0, 0, 0)
	hdr := &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := &[2]unix.CapUserData{}
	b.call("dropping capabilities", unix.SYS_CAPSET, ptr(b, hdr), ptr(b, data))
}

// seccomp appends installing the filter (Program) on every thread of the
// process, with no_new_privs.
func (b *builder) seccomp() error {
	filters, err := seccompFilters()
	if err != nil {
		return err
	}
	b.p.keep = append(b.p.keep, filters)
	fprog := &unix.SockFprog{Len: uint16(len(filters)), Filter: &filters[0]}
	b.call("loading the seccomp filter", unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, ptr(b, fprog))
	return nil
}

// seccompFilters is Program assembled for the kernel, made once: the
// kernel copies it, so every program may point at the same one.
var seccompFilters = sync.OnceValues(func() ([]unix.SockFilter, error) {
	prog, err := seccomp.Program()
	if err != nil {
		return nil, err
	}
	return assemble(prog)
})

// Confine applies every layer that works per process to the calling
// thread (which the caller has locked), with confineOps.
func Confine(job wire.Job) error {
	b := newBuilder()
	if err := confineOps(b, job); err != nil {
		return err
	}
	prog, err := b.build()
	if err != nil {
		return err
	}
	return prog.exec()
}
