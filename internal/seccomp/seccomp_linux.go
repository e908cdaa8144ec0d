package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp program is built here, from golang.org/x/sys/unix's
// system-call numbers for the architecture the binary is built for
// (seccomp_linux_amd64.go, seccomp_linux_arm64.go). Nothing is computed
// until Program runs: every table below is constant data.

// sysCall is one system call: its name, for messages and tests, and its
// number on this architecture, or noSyscall where the architecture does
// not have it (open, creat, chmod, iopl, ioperm and uselib exist on
// x86_64 but not on arm64). Rules for a missing system call are left out
// of the program: there is nothing to refuse.
type sysCall struct {
	name string
	nr   int
}

// noSyscall is the number of a system call this architecture lacks.
const noSyscall = -1

// deniedSyscalls are what sandboxed code never needs and what sandbox
// escapes are made of; each fails with EPERM.
var deniedSyscalls = []sysCall{
	// debugging and reading other processes
	{"ptrace", unix.SYS_PTRACE}, {"process_vm_readv", unix.SYS_PROCESS_VM_READV},
	{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV}, {"kcmp", unix.SYS_KCMP},
	{"pidfd_getfd", unix.SYS_PIDFD_GETFD},
	// mounts and namespaces
	{"mount", unix.SYS_MOUNT}, {"umount2", unix.SYS_UMOUNT2}, {"pivot_root", unix.SYS_PIVOT_ROOT},
	{"chroot", unix.SYS_CHROOT}, {"unshare", unix.SYS_UNSHARE}, {"setns", unix.SYS_SETNS},
	{"fsopen", unix.SYS_FSOPEN}, {"fsconfig", unix.SYS_FSCONFIG}, {"fsmount", unix.SYS_FSMOUNT},
	{"fspick", unix.SYS_FSPICK}, {"move_mount", unix.SYS_MOVE_MOUNT}, {"open_tree", unix.SYS_OPEN_TREE},
	{"mount_setattr", unix.SYS_MOUNT_SETATTR},
	// keyrings
	{"keyctl", unix.SYS_KEYCTL}, {"add_key", unix.SYS_ADD_KEY}, {"request_key", unix.SYS_REQUEST_KEY},
	// bpf, perf, kernel modules, kexec
	{"bpf", unix.SYS_BPF}, {"perf_event_open", unix.SYS_PERF_EVENT_OPEN}, {"init_module", unix.SYS_INIT_MODULE},
	{"finit_module", unix.SYS_FINIT_MODULE}, {"delete_module", unix.SYS_DELETE_MODULE},
	{"kexec_load", unix.SYS_KEXEC_LOAD}, {"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD},
	// userfaultfd and io_uring (rich kernel attack surface)
	{"userfaultfd", unix.SYS_USERFAULTFD}, {"io_uring_setup", unix.SYS_IO_URING_SETUP},
	{"io_uring_enter", unix.SYS_IO_URING_ENTER}, {"io_uring_register", unix.SYS_IO_URING_REGISTER},
	// host administration
	{"reboot", unix.SYS_REBOOT}, {"swapon", unix.SYS_SWAPON}, {"swapoff", unix.SYS_SWAPOFF},
	{"acct", unix.SYS_ACCT}, {"syslog", unix.SYS_SYSLOG}, {"quotactl", unix.SYS_QUOTACTL},
	{"settimeofday", unix.SYS_SETTIMEOFDAY}, {"clock_settime", unix.SYS_CLOCK_SETTIME},
	{"clock_adjtime", unix.SYS_CLOCK_ADJTIME}, {"adjtimex", unix.SYS_ADJTIMEX},
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT}, {"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT},
	{"lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE}, {"iopl", sysIopl}, {"ioperm", sysIoperm},
	{"personality", unix.SYS_PERSONALITY}, {"uselib", sysUselib}, {"vhangup", unix.SYS_VHANGUP},
	{"nfsservctl", unix.SYS_NFSSERVCTL},
}

// enosysSyscalls fail with ENOSYS, as if this kernel did not have them.
// clone3 passes its flags in memory seccomp cannot read: report it as
// missing, and the C library falls back to clone, which is checked. The
// same for openat2's struct (its mode is out of reach): callers fall back
// to openat.
var enosysSyscalls = []sysCall{{"clone3", unix.SYS_CLONE3}, {"openat2", unix.SYS_OPENAT2}}

// dgramTypes are the type arguments of socket and socketpair that make a
// datagram socket: SOCK_DGRAM alone or with SOCK_NONBLOCK, SOCK_CLOEXEC
// or both (any other bit is EINVAL to the kernel).
var dgramTypes = []uint32{
	unix.SOCK_DGRAM, unix.SOCK_DGRAM | unix.SOCK_NONBLOCK,
	unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, unix.SOCK_DGRAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC,
}

// namespaceFlags are the clone flags that create namespaces.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// setid are the mode bits no sandboxed command may set: see argRules.
const setid = unix.S_ISUID | unix.S_ISGID

// creating are the open flags that create a file: O_CREAT, and O_TMPFILE
// without the O_DIRECTORY bit it includes (O_DIRECTORY alone creates
// nothing).
const creating = unix.O_CREAT | unix.O_TMPFILE&^unix.O_DIRECTORY

// argTest is a test of one 64-bit argument (arg, 0 to 5) of a system
// call. With anyBits, it holds when the argument has any of those bits
// set. With lowOneOf, it holds when the argument's low 32 bits equal one
// of those values, whatever its high bits: for an argument the kernel
// declares as a 32-bit int (ioctl's and fcntl's command), which it
// truncates, so that 1<<32|TIOCSTI is TIOCSTI to the kernel and must be
// to the filter too. Otherwise it holds when the argument, compared as
// all 64 bits, is none of noneOf.
type argTest struct {
	arg      uint32
	anyBits  uint64
	lowOneOf []uint32
	noneOf   []uint64
}

// argRule refuses its system call with EPERM when all of its tests hold
// and lets it through otherwise.
type argRule struct {
	sysCall
	all []argTest
}

// argRules are the system calls refused only for some arguments.
var argRules = []argRule{
	// clone with a namespace flag.
	{sysCall{"clone", unix.SYS_CLONE}, []argTest{{arg: 0, anyBits: namespaceFlags}}},
	// Sockets: only the families a command needs — IPv4, IPv6, and netlink
	// (the C library's getaddrinfo asks it for local addresses). The
	// family is compared as the full 64-bit argument, so a value with high
	// bits set (which the kernel would truncate to AF_UNIX) is refused
	// too. That refuses AF_UNIX (host unix sockets, even in a readable
	// directory — a stream or seqpacket socketpair between the command's
	// own processes still works; datagram pairs are refused below),
	// AF_PACKET, AF_VSOCK (which no network namespace confines: on
	// a VM it reaches the hypervisor host) and every other family. Landlock
	// only scopes pathname unix sockets from ABI 9; this works on every
	// kernel and does not depend on paths.
	{sysCall{"socket", unix.SYS_SOCKET}, []argTest{{arg: 0, noneOf: []uint64{unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}}}},
	// A datagram socketpair: unlike a stream or seqpacket pair, either end
	// may still sendto() or connect() any pathname datagram socket it can
	// see (the host's /dev/log, journald's or systemd's notify socket),
	// with descriptors and its credentials (uid 0 when hutch runs as root)
	// attached. The type is an int the kernel truncates and takes only
	// with SOCK_NONBLOCK and SOCK_CLOEXEC beside it, so these four values
	// are every datagram pair, whatever the domain.
	{sysCall{"socketpair", unix.SYS_SOCKETPAIR}, []argTest{{arg: 1, lowOneOf: dgramTypes}}},
	// No set-user-ID or set-group-ID file can be made: the sandbox's root
	// may be the host's root (when hutch runs as root), and such a file
	// left in a writable directory would be a host root shell for anyone.
	// chmod-like calls with S_ISUID or S_ISGID, and creating opens with
	// them, are refused.
	{sysCall{"chmod", sysChmod}, []argTest{{arg: 1, anyBits: setid}}},
	{sysCall{"fchmod", unix.SYS_FCHMOD}, []argTest{{arg: 1, anyBits: setid}}},
	{sysCall{"fchmodat", unix.SYS_FCHMODAT}, []argTest{{arg: 2, anyBits: setid}}},
	{sysCall{"fchmodat2", unix.SYS_FCHMODAT2}, []argTest{{arg: 2, anyBits: setid}}},
	{sysCall{"open", sysOpen}, []argTest{{arg: 1, anyBits: creating}, {arg: 2, anyBits: setid}}},
	{sysCall{"openat", unix.SYS_OPENAT}, []argTest{{arg: 2, anyBits: creating}, {arg: 3, anyBits: setid}}},
	{sysCall{"creat", sysCreat}, []argTest{{arg: 1, anyBits: setid}}},
	// mknod makes regular files too (S_IFREG, or a type of 0): with
	// S_ISUID or S_ISGID in its mode it left a set-user-ID file owned by
	// the sandbox's root on the host. The mode is a 16-bit umode_t, so
	// its low word holds the bits.
	{sysCall{"mknod", sysMknod}, []argTest{{arg: 1, anyBits: setid}}},
	{sysCall{"mknodat", unix.SYS_MKNODAT}, []argTest{{arg: 2, anyBits: setid}}},
	// fcntl F_SETLEASE: a read lease on a file the sandbox's root owns
	// (in a readable directory too) makes every host open for writing
	// wait for the lease's holder, up to the host's lease-break-time.
	// Nothing a command needs takes leases (Samba and NFS servers do).
	{sysCall{"fcntl", unix.SYS_FCNTL}, []argTest{{arg: 1, lowOneOf: []uint32{unix.F_SETLEASE}}}},
	// ioctl TIOCSTI pushes input into a terminal, TIOCLINUX's selection
	// calls paste into one: both type commands into whatever shell reads
	// a terminal the command was handed (bubblewrap's CVE-2017-5226).
	// Commands have no controlling terminal, which the kernel already
	// requires for TIOCSTI; this holds even on kernels that do not.
	{sysCall{"ioctl", unix.SYS_IOCTL}, []argTest{{arg: 1, lowOneOf: []uint32{unix.TIOCSTI, unix.TIOCLINUX}}}},
}

// Where the kernel's struct seccomp_data puts each field. The program
// loads 32-bit words in the machine's byte order; both architectures
// Program supports are little-endian, so an argument's low word comes
// first.
const (
	offNr   = 0  // int nr
	offArch = 4  // __u32 arch
	offArgs = 16 // __u64 args[6]
)

// argLo and argHi are the offsets of the low and high 32 bits of
// argument i.
func argLo(i uint32) uint32 { return offArgs + 8*i }
func argHi(i uint32) uint32 { return offArgs + 8*i + 4 }

// What the program returns.
const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	retKill   = unix.SECCOMP_RET_KILL_PROCESS
)

// Program is the BPF program hutch loads. It guarantees, for every system
// call it is asked about:
//
//   - a system-call ABI other than the binary's own (seccomp_data.arch
//     not this architecture's audit arch: i386 through int $0x80 on
//     x86_64, AArch32 on arm64) kills the process
//     (SECCOMP_RET_KILL_PROCESS): none of the rules below would apply to
//     its numbers;
//   - on x86_64, an x32 ABI call (number 0x40000000 or above) fails with
//     ENOSYS without running;
//   - deniedSyscalls fail with EPERM, enosysSyscalls with ENOSYS, and
//     argRules' system calls with EPERM when their arguments match;
//   - everything else is allowed.
//
// Each system call number appears in one rule at most, so the order of the
// rules does not change a verdict. Program returns an error, never a
// weaker program, on an architecture it has no system-call numbers for or
// if a rule cannot be assembled.
func Program() ([]bpf.Instruction, error) {
	if auditArch == 0 {
		return nil, fmt.Errorf("seccomp: no system-call policy for %s", runtime.GOARCH)
	}
	seen := map[int]string{}
	for _, group := range [][]sysCall{deniedSyscalls, enosysSyscalls} {
		for _, c := range group {
			if err := claim(seen, c); err != nil {
				return nil, err
			}
		}
	}
	for _, r := range argRules {
		if err := claim(seen, r.sysCall); err != nil {
			return nil, err
		}
	}

	var a bpfAsm
	nativeABI := a.newLabel()
	a.add(bpf.LoadAbsolute{Off: offArch, Size: 4})
	a.jumpIf(bpf.JumpEqual, auditArch, nativeABI, next)
	a.add(bpf.RetConstant{Val: retKill})
	a.mark(nativeABI)
	a.add(bpf.LoadAbsolute{Off: offNr, Size: 4})
	if x32SyscallBit != 0 {
		// The x32 ABI shares x86_64's audit arch and is told apart only
		// by this bit in the number; its numbers are not the ones the
		// rules use, so none of them may run. ENOSYS, not a kill: it is
		// what distribution kernels (built without x32) answer, and it
		// keeps number -1 (0xffffffff, which a tracer writes to skip a
		// system call, and seccomp sees after the tracer) from killing
		// the sandbox. hutch's filter has always answered so.
		x86 := a.newLabel()
		a.jumpIf(bpf.JumpGreaterOrEqual, x32SyscallBit, next, x86)
		a.add(bpf.RetConstant{Val: retENOSYS})
		a.mark(x86)
	}
	a.refuse(deniedSyscalls, retEPERM)
	a.refuse(enosysSyscalls, retENOSYS)
	for _, r := range argRules {
		if err := a.argRule(r); err != nil {
			return nil, err
		}
	}
	a.add(bpf.RetConstant{Val: retAllow})
	return a.program()
}

// claim records c's number in seen, and fails if another rule has it.
func claim(seen map[int]string, c sysCall) error {
	if c.nr == noSyscall {
		return nil
	}
	if c.nr < 0 {
		return fmt.Errorf("seccomp: %s has number %d", c.name, c.nr)
	}
	if other, ok := seen[c.nr]; ok {
		return fmt.Errorf("seccomp: %s and %s are both system call %d", other, c.name, c.nr)
	}
	seen[c.nr] = c.name
	return nil
}

// refuse appends a block, entered with the system-call number in A, that
// returns ret for every call in calls and falls through, A unchanged, for
// any other.
func (a *bpfAsm) refuse(calls []sysCall, ret uint32) {
	var nrs []uint32
	for _, c := range calls {
		if c.nr != noSyscall {
			nrs = append(nrs, uint32(c.nr))
		}
	}
	if len(nrs) == 0 {
		return
	}
	hit, miss := a.newLabel(), a.newLabel()
	for i, nr := range nrs {
		if i == len(nrs)-1 {
			a.jumpIf(bpf.JumpEqual, nr, next, miss)
		} else {
			a.jumpIf(bpf.JumpEqual, nr, hit, next)
		}
	}
	a.mark(hit)
	a.add(bpf.RetConstant{Val: ret})
	a.mark(miss)
}

// argRule appends a block, entered with the system-call number in A,
// that decides r's system call (EPERM when all of r's tests hold, allow
// otherwise) and falls through, A unchanged, for any other call. For its
// own call the block always returns: it never falls through with an
// argument in A for the next block to compare as a system-call number.
// (The assembler hutch used before did, and chmod 665 failed with ENOSYS:
// 0665 is 437, openat2's number.)
func (a *bpfAsm) argRule(r argRule) error {
	if r.nr == noSyscall {
		return nil
	}
	if len(r.all) == 0 {
		return fmt.Errorf("seccomp: the rule for %s has no tests", r.name)
	}
	other, allow := a.newLabel(), a.newLabel()
	a.jumpIf(bpf.JumpEqual, uint32(r.nr), next, other)
	for _, t := range r.all {
		holds := a.newLabel()
		if err := a.argTest(t, holds, allow); err != nil {
			return fmt.Errorf("seccomp: the rule for %s: %w", r.name, err)
		}
		a.mark(holds)
	}
	a.add(bpf.RetConstant{Val: retEPERM})
	a.mark(allow)
	a.add(bpf.RetConstant{Val: retAllow})
	a.mark(other)
	return nil
}

// argTest appends the code of t, which jumps to holds when t holds and to
// fails when not.
func (a *bpfAsm) argTest(t argTest, holds, fails label) error {
	if t.arg > 5 {
		return fmt.Errorf("argument %d", t.arg)
	}
	if t.anyBits != 0 {
		hi, lo := uint32(t.anyBits>>32), uint32(t.anyBits)
		if hi != 0 {
			a.add(bpf.LoadAbsolute{Off: argHi(t.arg), Size: 4})
			if lo == 0 {
				a.jumpIf(bpf.JumpBitsSet, hi, holds, fails)
				return nil
			}
			a.jumpIf(bpf.JumpBitsSet, hi, holds, next)
		}
		a.add(bpf.LoadAbsolute{Off: argLo(t.arg), Size: 4})
		a.jumpIf(bpf.JumpBitsSet, lo, holds, fails)
		return nil
	}
	if len(t.lowOneOf) > 0 {
		a.add(bpf.LoadAbsolute{Off: argLo(t.arg), Size: 4})
		for i, v := range t.lowOneOf {
			if i == len(t.lowOneOf)-1 {
				a.jumpIf(bpf.JumpEqual, v, holds, fails)
			} else {
				a.jumpIf(bpf.JumpEqual, v, holds, next)
			}
		}
		return nil
	}
	if len(t.noneOf) == 0 {
		return fmt.Errorf("argument %d: an empty test", t.arg)
	}
	// The values grouped by their high word: when the argument's high
	// word is a group's, only that group's low words can equal it.
	var his []uint32
	los := map[uint32][]uint32{}
	for _, v := range t.noneOf {
		hi := uint32(v >> 32)
		if _, ok := los[hi]; !ok {
			his = append(his, hi)
		}
		los[hi] = append(los[hi], uint32(v))
	}
	for g, hi := range his {
		nextGroup := holds
		if g < len(his)-1 {
			nextGroup = a.newLabel()
		}
		a.add(bpf.LoadAbsolute{Off: argHi(t.arg), Size: 4})
		a.jumpIf(bpf.JumpEqual, hi, next, nextGroup)
		a.add(bpf.LoadAbsolute{Off: argLo(t.arg), Size: 4})
		for i, lo := range los[hi] {
			if i == len(los[hi])-1 {
				a.jumpIf(bpf.JumpEqual, lo, fails, holds)
			} else {
				a.jumpIf(bpf.JumpEqual, lo, fails, next)
			}
		}
		if g < len(his)-1 {
			a.mark(nextGroup)
		}
	}
	return nil
}

// bpfAsm assembles a classic BPF program whose conditional jumps go
// forward to labels.
type bpfAsm struct {
	insts []bpf.Instruction
	jumps []pendingJump
	at    []int // the instruction each label marks; -1 until marked
}

// label is a place in a bpfAsm program; next is the instruction after a
// jump.
type label int

const next label = -1

// pendingJump is a conditional jump whose skips are resolved by program.
type pendingJump struct {
	index           int
	cond            bpf.JumpTest
	val             uint32
	ifTrue, ifFalse label
}

func (a *bpfAsm) newLabel() label {
	a.at = append(a.at, -1)
	return label(len(a.at) - 1)
}

// mark makes l the place of the next instruction added.
func (a *bpfAsm) mark(l label) { a.at[l] = len(a.insts) }

func (a *bpfAsm) add(i bpf.Instruction) { a.insts = append(a.insts, i) }

// jumpIf adds a jump to t when A cond val holds and to f otherwise. cond
// must be one of JumpEqual, JumpGreaterOrEqual and JumpBitsSet, which
// assemble to one instruction as written.
func (a *bpfAsm) jumpIf(cond bpf.JumpTest, val uint32, t, f label) {
	a.jumps = append(a.jumps, pendingJump{index: len(a.insts), cond: cond, val: val, ifTrue: t, ifFalse: f})
	a.add(bpf.JumpIf{Cond: cond, Val: val}) // a placeholder until program
}

// program resolves every jump and returns the instructions, or an error
// if a label is unmarked, behind its jump, or more than 255 instructions
// ahead (the most a conditional jump skips).
func (a *bpfAsm) program() ([]bpf.Instruction, error) {
	for _, j := range a.jumps {
		switch j.cond {
		case bpf.JumpEqual, bpf.JumpGreaterOrEqual, bpf.JumpBitsSet:
		default:
			return nil, fmt.Errorf("seccomp: jump condition %v", j.cond)
		}
		t, err := a.skip(j.index, j.ifTrue)
		if err != nil {
			return nil, err
		}
		f, err := a.skip(j.index, j.ifFalse)
		if err != nil {
			return nil, err
		}
		a.insts[j.index] = bpf.JumpIf{Cond: j.cond, Val: j.val, SkipTrue: t, SkipFalse: f}
	}
	return a.insts, nil
}

// skip is how many instructions a jump at index skips to reach l.
func (a *bpfAsm) skip(index int, l label) (uint8, error) {
	if l == next {
		return 0, nil
	}
	to := a.at[l]
	if to < 0 {
		return 0, fmt.Errorf("seccomp: jump at %d to an unmarked label", index)
	}
	n := to - index - 1
	if n < 0 || n > 255 {
		return 0, fmt.Errorf("seccomp: jump at %d to %d is out of reach", index, to)
	}
	return uint8(n), nil
}

// Supported reports whether this kernel can load Program: it has
// the seccomp system call with filter mode (CONFIG_SECCOMP_FILTER) and
// the kill-process action Program uses (Linux 4.14). It installs nothing:
// the first probe only asks, the second passes no program and fails
// before anything is loaded — with EFAULT where filters are supported,
// EINVAL where they are not. A filter already on this process that
// refuses seccomp makes it false, rightly: hutch could not load its own.
func Supported() bool {
	action := uint32(unix.SECCOMP_RET_KILL_PROCESS)
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action))); e != 0 {
		return false
	}
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, 0)
	return e == unix.EFAULT
}
