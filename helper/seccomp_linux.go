package helper

import (
	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls are what sandboxed code never needs and what sandbox
// escapes are made of; each fails with EPERM.
var deniedSyscalls = []string{
	// debugging and reading other processes
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	// mounts and namespaces
	"mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen", "fsconfig", "fsmount",
	"fspick", "move_mount", "open_tree", "mount_setattr",
	// keyrings
	"keyctl", "add_key", "request_key",
	// bpf, perf, kernel modules, kexec
	"bpf", "perf_event_open", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	// userfaultfd and io_uring (rich kernel attack surface)
	"userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
	// host administration
	"reboot", "swapon", "swapoff", "acct", "syslog", "quotactl", "settimeofday", "clock_settime",
	"clock_adjtime", "adjtimex", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
	"iopl", "ioperm", "personality", "uselib", "vhangup", "nfsservctl",
}

// namespaceFlags are the clone flags that create namespaces.
var namespaceFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER, unix.CLONE_NEWPID,
	unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP, unix.CLONE_NEWTIME,
}

// Filter is the seccomp policy every sandboxed command runs under.
func Filter() seccomp.Filter {
	deny := seccomp.SyscallGroup{Names: deniedSyscalls, Action: seccomp.ActionErrno}
	// clone with a namespace flag; socket for unix, packet and raw sockets.
	for _, f := range namespaceFlags {
		deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{
			Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: f}},
		})
	}
	// Host unix sockets: new AF_UNIX sockets are refused outright (a
	// socketpair between the command's own processes still works), so a
	// socket file bound into a readable directory cannot be connected to.
	// Landlock only scopes pathname sockets from ABI 9, which not every
	// kernel has; this layer does not depend on the path at all.
	for _, family := range []uint64{unix.AF_UNIX, unix.AF_PACKET} {
		deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{
			Name: "socket", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: family}},
		})
	}
	// Raw IP sockets (the type may carry SOCK_NONBLOCK and SOCK_CLOEXEC).
	for _, flags := range []uint64{0, unix.SOCK_NONBLOCK, unix.SOCK_CLOEXEC, unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC} {
		deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{
			Name: "socket", Conditions: seccomp.ArgumentConditions{{Argument: 1, Operation: seccomp.Equal, Value: unix.SOCK_RAW | flags}},
		})
	}
	// clone3 passes its flags in memory seccomp cannot read: report it as
	// missing, and the C library falls back to clone, which is checked.
	enosys := seccomp.SyscallGroup{Names: []string{"clone3"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)}
	return seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls:      []seccomp.SyscallGroup{deny, enosys},
		},
	}
}

func loadSeccomp() error { return seccomp.LoadFilter(Filter()) }
