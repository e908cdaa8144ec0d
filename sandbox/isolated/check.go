package isolated

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/seccomp"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Layer is one enforcement layer and whether this host has it.
type Layer struct {
	Name   string `json:"name"`
	Active bool   `json:"active"`
	Detail string `json:"detail"`
}

var (
	supportOnce sync.Once
	supportErr  error
)

// Supported reports whether this host can build isolated sandboxes: nil,
// or an error matching sandbox.ErrUnsupported naming the missing feature
// and the fix. It never falls back to weaker isolation.
func Supported() error {
	supportOnce.Do(func() { supportErr = probeNamespaces() })
	return supportErr
}

func probeNamespaces() error {
	c := exec.Command("/bin/true")
	c.SysProcAttr = namespaces(false, os.Getuid(), os.Getgid())
	if err := c.Run(); err != nil {
		return fmt.Errorf("%w: cannot create user, mount and PID namespaces (%v); fix: allow unprivileged user namespaces "+
			"(sysctl user.max_user_namespaces=15000; kernel.unprivileged_userns_clone=1 where it exists; on Ubuntu 24.04 "+
			"sysctl kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile granting userns to hutch)", sandbox.ErrUnsupported, err)
	}
	// The root is built from detached mounts: open_tree and move_mount
	// (Linux 5.2), mount_setattr (5.12).
	empty := []byte{0}
	if _, _, errno := unix.Syscall6(unix.SYS_MOUNT_SETATTR, ^uintptr(0), uintptr(unsafe.Pointer(&empty[0])), 0, 0, 0, 0); errno == unix.ENOSYS {
		var u unix.Utsname
		_ = unix.Uname(&u)
		return fmt.Errorf("%w: this kernel (%s) lacks mount_setattr, which the isolated tier builds its root with; fix: Linux 5.12 or later, or --tier container",
			sandbox.ErrUnsupported, unix.ByteSliceToString(u.Release[:]))
	}
	return nil
}

// Layers lists each enforcement layer and whether it is active here.
func Layers() []Layer {
	var out []Layer
	ns := Layer{Name: "namespaces", Active: Supported() == nil, Detail: "user, mount, pid, ipc, uts, cgroup, net; a /proc without hutch's processes or the host's root-only entries"}
	if err := Supported(); err != nil {
		ns.Detail = err.Error()
	}
	out = append(out, ns)
	abi, err := landlockABI()
	ll := Layer{Name: "landlock", Active: err == nil && abi > 0}
	if ll.Active {
		ll.Detail = fmt.Sprintf("ABI %d", abi)
		if abi < 9 {
			ll.Detail += " (pathname unix sockets are refused by seccomp instead)"
		}
	} else {
		ll.Detail = "not available in this kernel (CONFIG_SECURITY_LANDLOCK, lsm=landlock): mount namespaces still confine paths"
	}
	out = append(out, ll)
	sc := Layer{Name: "seccomp", Active: seccomp.Supported(), Detail: "denies ptrace, mounts, namespaces, keyrings, bpf, perf, modules, kexec, userfaultfd, io_uring, unix/packet/raw sockets, set-user-ID and set-group-ID files, leases, typing into terminals"}
	out = append(out, sc)
	out = append(out, Layer{Name: "no_new_privs+capabilities", Active: true, Detail: "no_new_privs set; bounding, ambient, effective and permitted sets emptied; root regains nothing at exec"})
	out = append(out, Layer{Name: "rlimits", Active: true, Detail: "cpu time, file size, open files, processes (per user namespace), memory (private writable per process), core dumps off; a quarter of the host user's inotify, fanotify, message-queue, signal and locked-memory counts"})
	cgl := Layer{Name: "cgroups", Detail: "memory and pids limits per sandbox; OOM kills and refused forks reported as limit"}
	if cg, err := newCgroup(policy.Limits{Memory: 64 << 20, Processes: 64}); err != nil || cg == nil {
		cgl.Detail = fmt.Sprintf("not available (%v): memory is bounded per process (RLIMIT_DATA: private memory only, shared mappings are not counted) and processes by RLIMIT_NPROC; "+
			"fix: run as root or delegate a cgroup v2 subtree with memory and pids to this user", err)
	} else {
		cgl.Active = true
		if cg.v2 {
			cgl.Detail += " (cgroup v2)"
		} else {
			cgl.Detail += " (cgroup v1)"
		}
		cg.remove()
	}
	out = append(out, cgl)
	out = append(out, Layer{Name: "network allow-list", Active: ns.Active,
		Detail: "with --network allow=...: the private network namespace's only way out is hutch's filtering proxy (HTTP CONNECT, HTTP, SOCKS5), bridged from loopback port 3128; refusals reported as blocked"})
	return out
}

func landlockABI() (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
