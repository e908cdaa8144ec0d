//go:build linux && amd64

package isolated_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// The seccomp filter covers the i386 system-call ABI (int $0x80, there on
// any x86_64 kernel with IA32 emulation) as well as x86_64: a denied call
// is denied through either. Origin: review 2.

// i386 system-call numbers.
const (
	i386Ptrace     = 26
	i386AddKey     = 286
	i386Socket     = 359
	i386Connect    = 362
	i386Userfault  = 374
	i386IoUring    = 425
	i386PidfdOpen  = 434
	i386PidfdGetfd = 438
)

// int80 runs one i386 system call. Its code and every buffer it points to
// live in one page below 4 GiB (the i386 ABI passes 32-bit pointers).
type int80 struct{ page []byte }

func newInt80() (*int80, error) {
	page, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_32BIT)
	if err != nil {
		return nil, err
	}
	base := uint32(uintptr(unsafe.Pointer(&page[0])))
	blk := base + 0x800 // nr, six arguments, result: eight uint32
	le := func(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
	code := []byte{0x53, 0x55}                                               // push rbx; push rbp
	for i, modrm := range []byte{0x04, 0x1c, 0x0c, 0x14, 0x34, 0x3c, 0x2c} { // eax ebx ecx edx esi edi ebp
		code = append(code, 0x8b, modrm, 0x25)
		code = append(code, le(blk+uint32(4*i))...)
	}
	code = append(code, 0xcd, 0x80)       // int $0x80
	code = append(code, 0x89, 0x04, 0x25) // mov [blk+28], eax
	code = append(code, le(blk+28)...)    //
	code = append(code, 0x5d, 0x5b, 0xc3) // pop rbp; pop rbx; ret
	copy(page, code)
	return &int80{page: page}, nil
}

// addr returns the 32-bit address of a buffer at off in the page.
func (s *int80) addr(off int) uint32 { return uint32(uintptr(unsafe.Pointer(&s.page[off]))) }

func (s *int80) call(nr uint32, args ...uint32) int32 {
	blk := (*[8]uint32)(unsafe.Pointer(&s.page[0x800]))
	blk[0] = nr
	for i := 1; i < 7; i++ {
		blk[i] = 0
		if i-1 < len(args) {
			blk[i] = args[i-1]
		}
	}
	code := uintptr(unsafe.Pointer(&s.page[0]))
	fv := &code
	fn := *(*func())(unsafe.Pointer(&fv))
	fn()
	return int32(blk[7])
}

func attackInt80(path string) {
	s, err := newInt80()
	if err != nil {
		fmt.Println("no int80 page:", err)
		return
	}
	report := func(name string, r int32) {
		if r < 0 {
			fmt.Println(name, "BLOCKED", unix.Errno(-r))
		} else {
			fmt.Println(name, "ALLOWED", r)
		}
	}
	// AF_UNIX socket and a connection to the host's socket.
	fd := s.call(i386Socket, unix.AF_UNIX, unix.SOCK_STREAM, 0)
	report("socket-unix", fd)
	if fd >= 0 {
		sa := s.page[0x400 : 0x400+110]
		sa[0], sa[1] = unix.AF_UNIX, 0
		copy(sa[2:], path)
		report("connect-host-socket", s.call(i386Connect, uint32(fd), s.addr(0x400), 110))
	}
	// A keyring, userfaultfd (user-mode only) and io_uring.
	copy(s.page[0x300:], "user\x00hutch\x00x")
	report("add_key", s.call(i386AddKey, s.addr(0x300), s.addr(0x305), s.addr(0x30b), 1, ^uint32(1))) // KEY_SPEC_PROCESS_KEYRING = -2
	report("userfaultfd", s.call(i386Userfault, 1))                                                   // UFFD_USER_MODE_ONLY
	report("io_uring_setup", s.call(i386IoUring, 1, s.addr(0x100)))
	// ptrace of the thread that started us: in a one-shot run that is a
	// thread of the sandbox's init, whose other threads keep every
	// capability of the user namespace and the control socket.
	ppid := os.Getppid()
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", ppid))
	for _, en := range ents {
		tid, _ := strconv.Atoi(en.Name())
		r := s.call(i386Ptrace, unix.PTRACE_ATTACH, uint32(tid), 0, 0)
		if r == 0 {
			report(fmt.Sprintf("ptrace-parent-thread %d", tid), r)
			var ws unix.WaitStatus
			unix.Wait4(tid, &ws, unix.WALL, nil)
			s.call(i386Ptrace, unix.PTRACE_DETACH, uint32(tid), 0, 0)
		}
	}
	// pidfd_getfd: take a copy of the init's control socket (fd 3) from
	// that same thread.
	for _, en := range ents {
		tid, _ := strconv.Atoi(en.Name())
		pfd := s.call(i386PidfdOpen, uint32(tid), unix.PIDFD_THREAD)
		if pfd < 0 {
			continue
		}
		if r := s.call(i386PidfdGetfd, uint32(pfd), 3, 0); r >= 0 {
			link, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", r))
			report("pidfd_getfd-init-fd3 "+link, r)
			break
		}
	}
}

func TestSeccompRefusesI386ABI(t *testing.T) {
	const (
		auditArchX8664 = 0xc000003e
		auditArchI386  = 0x40000003
		allow          = 0x7fff0000
	)
	e := newEnv(t)
	prog := loadedSeccomp(t, e)
	// Control: the x86_64 mount (165) and ptrace (101) are refused.
	for _, nr := range []uint32{165, 101} {
		if v := seccompVerdict(t, prog, auditArchX8664, nr); v == allow {
			t.Fatalf("control: x86_64 syscall %d allowed", nr)
		}
	}
	if v := seccompVerdict(t, prog, auditArchX8664, unix.SYS_SOCKET, unix.AF_UNIX); v == allow {
		t.Fatal("control: x86_64 socket(AF_UNIX) allowed")
	}
	if v := seccompVerdict(t, prog, auditArchX8664, unix.SYS_SOCKET, unix.AF_INET); v != allow {
		t.Fatal("control: x86_64 socket(AF_INET) refused")
	}
	// The same calls through the i386 ABI (int $0x80): mount 21, ptrace 26,
	// unshare 310, socket 359 (AF_UNIX), keyctl 288, bpf 357, io_uring 425,
	// pidfd_getfd 438.
	for name, nr := range map[string]uint32{"mount": 21, "ptrace": 26, "unshare": 310, "socket(AF_UNIX)": 359,
		"keyctl": 288, "bpf": 357, "io_uring_setup": 425, "pidfd_getfd": 438} {
		if v := seccompVerdict(t, prog, auditArchI386, nr, unix.AF_UNIX); v == allow {
			t.Errorf("i386 %s (%d) passes the seccomp filter", name, nr)
		}
	}
	// And for real where the kernel runs i386 system calls (IA32
	// emulation, on by default in distribution kernels).
	dir, path, connected := hostUnixSocket(t)
	r := e.runWith(t, e.pol.Extend(policy.Policy{Read: []string{dir}}), sandbox.Command{Args: testenv.ProgramArgv(path),
		Env: map[string]string{testenv.ProgramEnvKey: "int80"}, Timeout: 10 * time.Second})
	out := string(r.Stdout) + string(r.Stderr)
	switch {
	case strings.Contains(out, "fatal error: fault") && !strings.Contains(out, "ALLOWED"):
		t.Logf("this kernel does not run int $0x80 (no IA32 emulation): the filter verdicts above stand for the rest")
	case strings.Contains(out, "ALLOWED"):
		t.Errorf("denied system calls succeeded through the i386 ABI:\n%s", out)
	}
	if connected() {
		t.Error("the host's unix socket accepted a connection from the sandbox")
	}
}

// loadedSeccomp reads the seccomp program a sandboxed command really runs
// under, from the kernel (PTRACE_SECCOMP_GET_FILTER, as the host's root).
func loadedSeccomp(t *testing.T, e *env) []bpf.Instruction {
	t.Helper()
	sb, err := isolated.New(bg, isolated.Options{Policy: e.pol})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	marker := fmt.Sprintf("7.%06d", time.Now().UnixNano()%1e6)
	go sb.Exec(bg, sandbox.Command{Args: []string{"sleep", marker}, Timeout: 10 * time.Second})
	pid := 0
	for deadline := time.Now().Add(5 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ents, _ := os.ReadDir("/proc")
		for _, en := range ents {
			if b, err := os.ReadFile("/proc/" + en.Name() + "/cmdline"); err == nil && string(b) == "sleep\x00"+marker+"\x00" {
				pid, _ = strconv.Atoi(en.Name())
			}
		}
	}
	if pid == 0 {
		t.Fatal("the sandboxed sleep did not show up")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.PtraceAttach(pid); err != nil {
		t.Skipf("cannot ptrace the sandboxed command from the host: %v", err)
	}
	defer unix.PtraceDetach(pid)
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
		t.Fatal(err)
	}
	const ptraceSeccompGetFilter = 0x420c
	n, _, errno := unix.Syscall6(unix.SYS_PTRACE, ptraceSeccompGetFilter, uintptr(pid), 0, 0, 0, 0)
	if errno != 0 {
		t.Skipf("PTRACE_SECCOMP_GET_FILTER: %v", errno)
	}
	raw := make([]unix.SockFilter, n)
	if _, _, errno := unix.Syscall6(unix.SYS_PTRACE, ptraceSeccompGetFilter, uintptr(pid), 0, uintptr(unsafe.Pointer(&raw[0])), 0, 0); errno != 0 {
		t.Fatal(errno)
	}
	insts := make([]bpf.Instruction, len(raw))
	for i, r := range raw {
		insts[i] = bpf.RawInstruction{Op: r.Code, Jt: r.Jt, Jf: r.Jf, K: r.K}.Disassemble()
	}
	return insts
}

// seccompVerdict runs that program on one system call as the kernel would
// (x/net/bpf's VM reads words big-endian, so each 32-bit slot of
// seccomp_data is written that way).
func seccompVerdict(t *testing.T, prog []bpf.Instruction, auditArch, nr uint32, args ...uint64) uint32 {
	t.Helper()
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[0:], nr)
	binary.BigEndian.PutUint32(data[4:], auditArch)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[16+8*i:], uint32(a))     // low word first (little-endian machine)
		binary.BigEndian.PutUint32(data[20+8*i:], uint32(a>>32)) // then the high word
	}
	v, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(v)
}
