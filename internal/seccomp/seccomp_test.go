//go:build linux

package seccomp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompCase is one system call and the verdict the program must give.
type seccompCase struct {
	name string
	arch uint32
	nr   uint32
	args [6]uint64
	want uint32
}

// seccompData is struct seccomp_data for c as the kernel lays it out on a
// little-endian machine (nr, arch, instruction_pointer, args[6]; each
// argument's low word first), with every 32-bit word written big-endian:
// x/net/bpf's VM loads words big-endian, where the kernel loads them in
// the machine's order.
func seccompData(c seccompCase) []byte {
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[0:], c.nr)
	binary.BigEndian.PutUint32(data[4:], c.arch)
	for i, a := range c.args {
		binary.BigEndian.PutUint32(data[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(data[20+8*i:], uint32(a>>32))
	}
	return data
}

// seccompRun is prog's verdict on c, run in x/net/bpf's VM.
func seccompRun(t *testing.T, vm *bpf.VM, c seccompCase) uint32 {
	t.Helper()
	v, err := vm.Run(seccompData(c))
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return uint32(v)
}

// verdictName names a seccomp return value.
func verdictName(v uint32) string {
	switch v {
	case retAllow:
		return "allow"
	case retEPERM:
		return "EPERM"
	case retENOSYS:
		return "ENOSYS"
	case retKill:
		return "kill-process"
	}
	return fmt.Sprintf("%#x", v)
}

// wantDenied is every system call refused with EPERM whatever its
// arguments: a name dropped from deniedSyscalls fails the test.
var wantDenied = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	"mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen", "fsconfig", "fsmount",
	"fspick", "move_mount", "open_tree", "mount_setattr",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
	"reboot", "swapon", "swapoff", "acct", "syslog", "quotactl", "settimeofday", "clock_settime",
	"clock_adjtime", "adjtimex", "open_by_handle_at", "name_to_handle_at", "lookup_dcookie",
	"iopl", "ioperm", "personality", "uselib", "vhangup", "nfsservctl",
}

// x86Only are the system calls x86_64 has and arm64 does not.
var x86Only = []string{"open", "creat", "chmod", "mknod", "iopl", "ioperm", "uselib"}

// seccompCases is the policy, case by case, for this architecture.
func seccompCases(t *testing.T) []seccompCase {
	t.Helper()
	native := uint32(auditArch)
	var cases []seccompCase
	add := func(name string, nr int, want uint32, args ...uint64) {
		if nr == noSyscall {
			return
		}
		c := seccompCase{name: name, arch: native, nr: uint32(nr), want: want}
		copy(c.args[:], args)
		cases = append(cases, c)
	}

	// Every denied system call, with any arguments.
	var names []string
	for _, c := range deniedSyscalls {
		names = append(names, c.name)
		if c.nr == noSyscall && (runtime.GOARCH == "amd64" || !slices.Contains(x86Only, c.name)) {
			t.Errorf("%s has no number on %s", c.name, runtime.GOARCH)
		}
		add(c.name, c.nr, retEPERM)
		add(c.name+" with arguments", c.nr, retEPERM, ^uint64(0), 1, 2, 3, 4, 5)
	}
	if !slices.Equal(names, wantDenied) {
		t.Errorf("deniedSyscalls are %q, want %q", names, wantDenied)
	}

	// clone: any namespace flag refuses it; a thread does not.
	const thread = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD |
		unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	for _, f := range []struct {
		name string
		flag uint64
	}{{"CLONE_NEWNS", unix.CLONE_NEWNS}, {"CLONE_NEWUTS", unix.CLONE_NEWUTS}, {"CLONE_NEWIPC", unix.CLONE_NEWIPC},
		{"CLONE_NEWUSER", unix.CLONE_NEWUSER}, {"CLONE_NEWPID", unix.CLONE_NEWPID}, {"CLONE_NEWNET", unix.CLONE_NEWNET},
		{"CLONE_NEWCGROUP", unix.CLONE_NEWCGROUP}, {"CLONE_NEWTIME", unix.CLONE_NEWTIME}} {
		add("clone "+f.name, unix.SYS_CLONE, retEPERM, f.flag)
		add("clone thread|"+f.name, unix.SYS_CLONE, retEPERM, thread|f.flag)
	}
	add("clone CLONE_THREAD|CLONE_VM", unix.SYS_CLONE, retAllow, unix.CLONE_THREAD|unix.CLONE_VM)
	add("clone thread", unix.SYS_CLONE, retAllow, thread, ^uint64(0), ^uint64(0))
	add("clone fork", unix.SYS_CLONE, retAllow, uint64(unix.SIGCHLD))

	// socket: IPv4, IPv6 and netlink only, over all 64 bits.
	for _, f := range []struct {
		name   string
		family uint64
		want   uint32
	}{
		{"AF_INET", unix.AF_INET, retAllow}, {"AF_INET6", unix.AF_INET6, retAllow}, {"AF_NETLINK", unix.AF_NETLINK, retAllow},
		{"AF_UNIX", unix.AF_UNIX, retEPERM}, {"AF_PACKET", unix.AF_PACKET, retEPERM}, {"AF_VSOCK", unix.AF_VSOCK, retEPERM},
		{"AF_UNSPEC", unix.AF_UNSPEC, retEPERM}, {"AF_BLUETOOTH", unix.AF_BLUETOOTH, retEPERM}, {"AF_ALG", unix.AF_ALG, retEPERM},
		{"AF_UNIX|1<<32", unix.AF_UNIX | 1<<32, retEPERM}, {"AF_INET|1<<32", unix.AF_INET | 1<<32, retEPERM},
		{"AF_INET6|1<<63", unix.AF_INET6 | 1<<63, retEPERM}, {"^0", ^uint64(0), retEPERM},
	} {
		add("socket "+f.name, unix.SYS_SOCKET, f.want, f.family, unix.SOCK_STREAM, 0)
	}
	add("socket AF_INET raw", unix.SYS_SOCKET, retAllow, unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)

	// socketpair: stream and seqpacket pairs only; a datagram end could
	// sendto() a host socket. The type's high word is the kernel's to drop.
	for _, f := range []struct {
		name string
		typ  uint64
		want uint32
	}{
		{"SOCK_STREAM", unix.SOCK_STREAM, retAllow}, {"SOCK_SEQPACKET", unix.SOCK_SEQPACKET, retAllow},
		{"SOCK_STREAM|SOCK_CLOEXEC", unix.SOCK_STREAM | unix.SOCK_CLOEXEC, retAllow},
		{"SOCK_DGRAM", unix.SOCK_DGRAM, retEPERM}, {"SOCK_DGRAM|SOCK_NONBLOCK", unix.SOCK_DGRAM | unix.SOCK_NONBLOCK, retEPERM},
		{"SOCK_DGRAM|SOCK_CLOEXEC", unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, retEPERM},
		{"SOCK_DGRAM|SOCK_NONBLOCK|SOCK_CLOEXEC", unix.SOCK_DGRAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, retEPERM},
		{"SOCK_DGRAM|1<<32", unix.SOCK_DGRAM | 1<<32, retEPERM},
	} {
		add("socketpair AF_UNIX "+f.name, unix.SYS_SOCKETPAIR, f.want, unix.AF_UNIX, f.typ, 0, 0x7000_0000)
	}

	// No set-user-ID or set-group-ID file.
	for _, c := range []struct {
		name    string
		nr      int
		modeArg int
	}{{"chmod", sysChmod, 1}, {"fchmod", unix.SYS_FCHMOD, 1}, {"fchmodat", unix.SYS_FCHMODAT, 2},
		{"fchmodat2", unix.SYS_FCHMODAT2, 2}, {"creat", sysCreat, 1},
		{"mknod", sysMknod, 1}, {"mknodat", unix.SYS_MKNODAT, 2}} {
		for _, m := range []struct {
			mode uint64
			want uint32
		}{{0o4755, retEPERM}, {0o2755, retEPERM}, {0o6777, retEPERM}, {0o755, retAllow}, {0o1777, retAllow},
			{0o644 | 1<<40, retAllow}} {
			args := []uint64{3, 0x7000_0000, 0}
			args[c.modeArg] = m.mode
			add(fmt.Sprintf("%s %#o", c.name, m.mode), c.nr, m.want, args...)
		}
	}
	for _, c := range []struct {
		name        string
		nr          int
		flags, mode int
	}{{"open", sysOpen, 1, 2}, {"openat", unix.SYS_OPENAT, 2, 3}} {
		for _, o := range []struct {
			name        string
			flags, mode uint64
			want        uint32
		}{
			{"O_CREAT 02644", unix.O_WRONLY | unix.O_CREAT, 0o2644, retEPERM},
			{"O_CREAT 04755", unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC, 0o4755, retEPERM},
			{"O_CREAT|O_EXCL 06000", unix.O_CREAT | unix.O_EXCL, 0o6000, retEPERM},
			{"O_TMPFILE 04600", unix.O_TMPFILE | unix.O_RDWR, 0o4600, retEPERM},
			{"O_CREAT 0644", unix.O_WRONLY | unix.O_CREAT, 0o644, retAllow},
			{"O_TMPFILE 0600", unix.O_TMPFILE | unix.O_RDWR, 0o600, retAllow},
			{"O_RDONLY mode garbage", unix.O_RDONLY, ^uint64(0), retAllow},
			{"O_DIRECTORY mode garbage", unix.O_RDONLY | unix.O_DIRECTORY, ^uint64(0), retAllow},
			{"O_WRONLY|O_TRUNC 04755", unix.O_WRONLY | unix.O_TRUNC, 0o4755, retAllow},
		} {
			args := []uint64{3, 0x7000_0000, 0, 0}
			args[c.flags], args[c.mode] = o.flags, o.mode
			add(c.name+" "+o.name, c.nr, o.want, args...)
		}
	}

	// mknod of a set-user-ID regular file (S_IFREG, or a type of 0 which
	// means the same) is refused; of an ordinary file, a fifo or a device
	// (the kernel refuses the device for lack of CAP_MKNOD) it is not.
	for _, c := range []struct {
		name    string
		nr      int
		modeArg int
	}{{"mknod", sysMknod, 1}, {"mknodat", unix.SYS_MKNODAT, 2}} {
		for _, m := range []struct {
			name string
			mode uint64
			want uint32
		}{{"S_IFREG|04755", unix.S_IFREG | 0o4755, retEPERM}, {"S_IFREG|02755", unix.S_IFREG | 0o2755, retEPERM},
			{"04755 (no type)", 0o4755, retEPERM}, {"S_IFIFO|06644", unix.S_IFIFO | 0o6644, retEPERM},
			{"S_IFREG|0644", unix.S_IFREG | 0o644, retAllow}, {"S_IFIFO|0600", unix.S_IFIFO | 0o600, retAllow},
			{"S_IFCHR|0666", unix.S_IFCHR | 0o666, retAllow}} {
			args := []uint64{3, 0x7000_0000, 0}
			args[c.modeArg] = m.mode
			add(c.name+" "+m.name, c.nr, m.want, args...)
		}
	}

	// fcntl F_SETLEASE and ioctl TIOCSTI and TIOCLINUX are refused on the
	// command's low 32 bits, as the kernel reads it; every other command
	// passes.
	for _, c := range []struct {
		name string
		nr   int
		cmd  uint64
		want uint32
	}{
		{"fcntl F_SETLEASE", unix.SYS_FCNTL, unix.F_SETLEASE, retEPERM},
		{"fcntl F_SETLEASE|1<<32", unix.SYS_FCNTL, 1<<32 | unix.F_SETLEASE, retEPERM},
		{"fcntl F_SETLEASE|0xffffffff<<32", unix.SYS_FCNTL, 0xffffffff<<32 | unix.F_SETLEASE, retEPERM},
		{"fcntl F_GETLEASE", unix.SYS_FCNTL, unix.F_GETLEASE, retAllow},
		{"fcntl F_SETFL", unix.SYS_FCNTL, unix.F_SETFL, retAllow},
		{"fcntl F_SETLK", unix.SYS_FCNTL, unix.F_SETLK, retAllow},
		{"fcntl F_DUPFD_CLOEXEC", unix.SYS_FCNTL, unix.F_DUPFD_CLOEXEC, retAllow},
		{"ioctl TIOCSTI", unix.SYS_IOCTL, unix.TIOCSTI, retEPERM},
		{"ioctl TIOCSTI|1<<32", unix.SYS_IOCTL, 1<<32 | unix.TIOCSTI, retEPERM},
		{"ioctl TIOCLINUX", unix.SYS_IOCTL, unix.TIOCLINUX, retEPERM},
		{"ioctl TIOCLINUX|1<<63", unix.SYS_IOCTL, 1<<63 | unix.TIOCLINUX, retEPERM},
		{"ioctl TCGETS", unix.SYS_IOCTL, unix.TCGETS, retAllow},
		{"ioctl TIOCGWINSZ", unix.SYS_IOCTL, unix.TIOCGWINSZ, retAllow},
		{"ioctl FIONREAD", unix.SYS_IOCTL, unix.TIOCINQ, retAllow},
		{"ioctl SIOCSIFFLAGS", unix.SYS_IOCTL, unix.SIOCSIFFLAGS, retAllow},
	} {
		add(c.name, c.nr, c.want, 3, c.cmd, ^uint64(0))
	}

	// An argument that happens to equal another rule's system-call number
	// changes nothing: chmod 0665 (437, openat2), chmod 0663 (435,
	// clone3), clone with such flags, socket(AF_INET) with open's
	// arguments.
	var ruleNrs []uint64
	for _, group := range [][]sysCall{deniedSyscalls, enosysSyscalls} {
		for _, c := range group {
			if c.nr != noSyscall {
				ruleNrs = append(ruleNrs, uint64(c.nr))
			}
		}
	}
	for _, r := range argRules {
		if r.nr != noSyscall {
			ruleNrs = append(ruleNrs, uint64(r.nr))
		}
	}
	for _, nr := range ruleNrs {
		if nr&setid == 0 {
			add(fmt.Sprintf("fchmodat %#o", nr), unix.SYS_FCHMODAT, retAllow, 3, 0x7000_0000, nr, ^uint64(0))
			add(fmt.Sprintf("fchmod %#o", nr), unix.SYS_FCHMOD, retAllow, 3, nr, ^uint64(0), ^uint64(0))
			add(fmt.Sprintf("chmod %#o", nr), sysChmod, retAllow, 0x7000_0000, nr, ^uint64(0), ^uint64(0))
			add(fmt.Sprintf("openat O_CREAT %#o", nr), unix.SYS_OPENAT, retAllow, 3, 0x7000_0000, unix.O_CREAT, nr, ^uint64(0))
		}
		if nr&namespaceFlags == 0 {
			add(fmt.Sprintf("clone flags %#x", nr), unix.SYS_CLONE, retAllow, nr, ^uint64(0), ^uint64(0), ^uint64(0))
		}
	}
	add("socket AF_INET with open's arguments", unix.SYS_SOCKET, retAllow, unix.AF_INET, ^uint64(0), ^uint64(0), ^uint64(0))
	add("chmod 0665", sysChmod, retAllow, 0x7000_0000, 0o665)
	add("fchmodat 0663", unix.SYS_FCHMODAT, retAllow, 3, 0x7000_0000, 0o663)

	// Reported missing, for their callers to fall back.
	add("clone3", unix.SYS_CLONE3, retENOSYS)
	add("openat2", unix.SYS_OPENAT2, retENOSYS)

	// Ordinary system calls.
	add("read", unix.SYS_READ, retAllow, 0, 0x7000_0000, 4096)
	add("write", unix.SYS_WRITE, retAllow, 1, 0x7000_0000, 4096)
	add("execve", unix.SYS_EXECVE, retAllow)
	add("exit_group", unix.SYS_EXIT_GROUP, retAllow)
	add("seccomp", unix.SYS_SECCOMP, retAllow)
	add("unknown number", 1000, retAllow)

	// Another ABI is killed, whatever the call.
	for _, a := range []struct {
		name string
		arch uint32
	}{{"i386", unix.AUDIT_ARCH_I386}, {"arm", unix.AUDIT_ARCH_ARM}, {"x86_64", unix.AUDIT_ARCH_X86_64},
		{"aarch64", unix.AUDIT_ARCH_AARCH64}, {"zero", 0}} {
		if a.arch == native {
			continue
		}
		for _, nr := range []uint32{0, 26, unix.SYS_READ, unix.SYS_PTRACE, unix.SYS_SOCKET} {
			cases = append(cases, seccompCase{name: fmt.Sprintf("%s ABI, number %d", a.name, nr), arch: a.arch, nr: nr, want: retKill})
		}
	}

	// The x32 ABI fails with ENOSYS (see Program).
	if x32SyscallBit != 0 {
		for _, nr := range []uint32{x32SyscallBit | unix.SYS_READ, x32SyscallBit | 521 /* x32 ptrace */, x32SyscallBit | unix.SYS_MOUNT,
			x32SyscallBit | unix.SYS_SOCKET, 0xffffffff} {
			cases = append(cases, seccompCase{name: fmt.Sprintf("x32 number %#x", nr), arch: native, nr: nr, want: retENOSYS})
		}
	}
	return cases
}

// checkSeccompTable runs every case through prog.
func checkSeccompTable(t *testing.T, prog []bpf.Instruction) {
	t.Helper()
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	cases := seccompCases(t)
	for _, c := range cases {
		if got := seccompRun(t, vm, c); got != c.want {
			t.Errorf("%s (arch %#x, nr %#x, args %#x): %s, want %s", c.name, c.arch, c.nr, c.args, verdictName(got), verdictName(c.want))
		}
	}
	t.Logf("%d cases", len(cases))
}

func TestSeccompProgram(t *testing.T) {
	prog, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 4096 { // BPF_MAXINSNS
		t.Fatalf("%d instructions", len(raw))
	}
	// What the kernel runs is the assembled program: decode it back.
	insts := make([]bpf.Instruction, len(raw))
	for i, r := range raw {
		insts[i] = r.Disassemble()
		if _, ok := insts[i].(bpf.RawInstruction); ok {
			t.Fatalf("instruction %d (%v) does not disassemble", i, r)
		}
	}
	checkSeccompTable(t, insts)
	t.Logf("%d instructions", len(raw))
}

// Every rule's system call is known on this architecture (or listed as
// missing on it), and a second rule for one system call is an error.
func TestSeccompRules(t *testing.T) {
	for _, r := range argRules {
		if r.nr == noSyscall && (runtime.GOARCH == "amd64" || !slices.Contains(x86Only, r.name)) {
			t.Errorf("%s has no number on %s", r.name, runtime.GOARCH)
		}
	}
	saved := enosysSyscalls
	defer func() { enosysSyscalls = saved }()
	enosysSyscalls = append(slices.Clip(saved), sysCall{"ptrace again", unix.SYS_PTRACE})
	if _, err := Program(); err == nil {
		t.Error("a system call in two rules was accepted")
	}
}

// Supported is true where the kernel has seccomp (hutch's
// sandboxes need its filters, so a host that runs these tests has them),
// and installs nothing.
func TestSeccompSupported(t *testing.T) {
	runtime.LockOSThread() // seccomp state is per thread
	defer runtime.UnlockOSThread()
	status := func() []byte {
		b, err := os.ReadFile("/proc/thread-self/status")
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		for line := range bytes.Lines(b) {
			if bytes.HasPrefix(line, []byte("Seccomp")) || bytes.HasPrefix(line, []byte("NoNewPrivs")) {
				out = append(out, line...)
			}
		}
		return out
	}
	before := status()
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err == unix.EINVAL {
		t.Skip("no seccomp here (a kernel without it, or qemu-user)")
	}
	if !Supported() {
		t.Error("Supported is false on a kernel with seccomp")
	}
	if after := status(); !bytes.Equal(before, after) {
		t.Errorf("Supported changed the process: %q, then %q", before, after)
	}
}
