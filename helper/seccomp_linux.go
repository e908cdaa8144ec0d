package helper

import (
	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
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
	// Sockets: only the families a command needs — IPv4, IPv6, and netlink
	// (the C library's getaddrinfo asks it for local addresses). The
	// family is compared as the full 64-bit argument, so a value with high
	// bits set (which the kernel would truncate to AF_UNIX) is refused
	// too. That refuses AF_UNIX (host unix sockets, even in a readable
	// directory — a socketpair between the command's own processes still
	// works), AF_PACKET, AF_VSOCK (which no network namespace confines: on
	// a VM it reaches the hypervisor host) and every other family. Landlock
	// only scopes pathname unix sockets from ABI 9; this works on every
	// kernel and does not depend on paths.
	deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{
		Name: "socket", Conditions: seccomp.ArgumentConditions{
			{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_INET},
			{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_INET6},
			{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_NETLINK},
		},
	})
	// No set-user-ID or set-group-ID file can be made: the sandbox's root
	// may be the host's root (when hutch runs as root), and such a file
	// left in a writable directory would be a host root shell for anyone.
	// chmod-like calls with S_ISUID or S_ISGID, and creating opens with
	// them, are refused.
	const setid = unix.S_ISUID | unix.S_ISGID
	for _, c := range []struct {
		name string
		arg  uint32
	}{{"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2}} {
		deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{
			Name: c.name, Conditions: seccomp.ArgumentConditions{{Argument: c.arg, Operation: seccomp.BitsSet, Value: setid}},
		})
	}
	for _, c := range []struct {
		name        string
		flags, mode uint32
	}{{"open", 1, 2}, {"openat", 2, 3}} {
		for _, create := range []uint64{unix.O_CREAT, unix.O_TMPFILE &^ unix.O_DIRECTORY} {
			deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{
				Name: c.name, Conditions: seccomp.ArgumentConditions{
					{Argument: c.flags, Operation: seccomp.BitsSet, Value: create},
					{Argument: c.mode, Operation: seccomp.BitsSet, Value: setid},
				},
			})
		}
	}
	deny.NamesWithCondtions = append(deny.NamesWithCondtions, seccomp.NameWithConditions{
		Name: "creat", Conditions: seccomp.ArgumentConditions{{Argument: 1, Operation: seccomp.BitsSet, Value: setid}},
	})
	// clone3 passes its flags in memory seccomp cannot read: report it as
	// missing, and the C library falls back to clone, which is checked.
	// The same for openat2's struct (its mode is out of reach): callers
	// fall back to openat.
	enosys := seccomp.SyscallGroup{Names: []string{"clone3", "openat2"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)}
	return seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls:      []seccomp.SyscallGroup{deny, enosys},
		},
	}
}

// Program is the BPF program hutch loads: Filter's policy behind a check
// that kills the process on any foreign system-call ABI.
func Program() ([]bpf.Instruction, error) {
	f := Filter()
	body, err := f.Policy.Assemble()
	if err != nil {
		return nil, err
	}
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	return append([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}, body...), nil
}
