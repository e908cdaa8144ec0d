//go:build linux

package seccomp

import (
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// NotifyProgram hands to the supervisor exactly the calls that can make,
// replace or write a name, and allows every other, of this ABI or not.
func TestNotifyProgram(t *testing.T) {
	prog, err := NotifyProgram()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		t.Fatal(err)
	}
	insts := make([]bpf.Instruction, len(raw))
	for i, r := range raw {
		insts[i] = r.Disassemble()
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatal(err)
	}
	native := uint32(auditArch)
	type c = seccompCase
	cases := []c{
		{name: "openat O_RDONLY", nr: unix.SYS_OPENAT, args: [6]uint64{0, 0, unix.O_RDONLY}, want: retAllow},
		{name: "openat O_RDONLY|O_CLOEXEC|O_DIRECTORY", nr: unix.SYS_OPENAT, args: [6]uint64{0, 0, unix.O_CLOEXEC | unix.O_DIRECTORY}, want: retAllow},
		{name: "openat O_PATH", nr: unix.SYS_OPENAT, args: [6]uint64{0, 0, unix.O_PATH}, want: retAllow},
		{name: "openat O_WRONLY", nr: unix.SYS_OPENAT, args: [6]uint64{0, 0, unix.O_WRONLY}, want: retNotify},
		{name: "openat O_RDWR", nr: unix.SYS_OPENAT, args: [6]uint64{0, 0, unix.O_RDWR}, want: retNotify},
		{name: "openat accmode 3", nr: unix.SYS_OPENAT, args: [6]uint64{0, 0, 3}, want: retNotify},
		{name: "openat O_CREAT", nr: unix.SYS_OPENAT, args: [6]uint64{0, 0, unix.O_CREAT}, want: retNotify},
		{name: "openat O_RDONLY|O_TRUNC", nr: unix.SYS_OPENAT, args: [6]uint64{0, 0, unix.O_TRUNC}, want: retNotify},
		{name: "openat O_TMPFILE", nr: unix.SYS_OPENAT, args: [6]uint64{0, 0, unix.O_TMPFILE | unix.O_RDWR}, want: retNotify},
		{name: "openat O_CREAT in the high word only (the kernel reads an int)", nr: unix.SYS_OPENAT, args: [6]uint64{0, 0, unix.O_CREAT << 32}, want: retAllow},
		{name: "openat O_CREAT with high bits", nr: unix.SYS_OPENAT, args: [6]uint64{0, 0, 1<<40 | unix.O_CREAT}, want: retNotify},
		{name: "read", nr: unix.SYS_READ, args: [6]uint64{0, 0, unix.O_CREAT}, want: retAllow},
		{name: "getpid", nr: unix.SYS_GETPID, want: retAllow},
		{name: "unlinkat", nr: unix.SYS_UNLINKAT, want: retAllow},
		{name: "fchmodat", nr: unix.SYS_FCHMODAT, want: retAllow},
		{name: "openat2 (Program refuses it)", nr: unix.SYS_OPENAT2, want: retAllow},
		{name: "mkdirat", nr: unix.SYS_MKDIRAT, want: retNotify},
		{name: "mknodat", nr: unix.SYS_MKNODAT, want: retNotify},
		{name: "symlinkat", nr: unix.SYS_SYMLINKAT, want: retNotify},
		{name: "linkat", nr: unix.SYS_LINKAT, want: retNotify},
		{name: "renameat2", nr: unix.SYS_RENAMEAT2, want: retNotify},
	}
	for _, n := range notified {
		if n.nr != noSyscall {
			cases = append(cases, c{name: n.name, nr: uint32(n.nr), args: [6]uint64{^uint64(0), ^uint64(0), ^uint64(0)}, want: retNotify})
		}
	}
	if open := sysOpen; open != noSyscall {
		cases = append(cases, c{name: "open O_RDONLY", nr: uint32(open), want: retAllow},
			c{name: "open O_CREAT", nr: uint32(open), args: [6]uint64{0, unix.O_CREAT}, want: retNotify},
			c{name: "open O_CREAT as its third argument", nr: uint32(open), args: [6]uint64{0, 0, unix.O_CREAT}, want: retAllow})
	}
	for i := range cases {
		cases[i].arch = native
	}
	// Another ABI: Program kills it; this filter stays out of the way.
	cases = append(cases, c{name: "openat O_CREAT of another ABI", arch: native ^ 1, nr: unix.SYS_OPENAT, args: [6]uint64{0, 0, unix.O_CREAT}, want: retAllow})
	if x32SyscallBit != 0 {
		cases = append(cases, c{name: "x32 openat O_CREAT", arch: native, nr: x32SyscallBit | unix.SYS_OPENAT, args: [6]uint64{0, 0, unix.O_CREAT}, want: retAllow})
	}
	for _, tc := range cases {
		if got := seccompRun(t, vm, tc); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
	if len(notified) != len(NotifiedSyscalls) {
		t.Errorf("NotifiedSyscalls lists %d calls, the program %d", len(NotifiedSyscalls), len(notified))
	}
	for i, n := range notified {
		if NotifiedSyscalls[i] != n.name {
			t.Errorf("NotifiedSyscalls[%d] = %s, want %s", i, NotifiedSyscalls[i], n.name)
		}
	}
}
