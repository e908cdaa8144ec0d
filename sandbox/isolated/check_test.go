package isolated_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// On a kernel without mount_setattr (before 5.12) the tier says so, with
// the fix, rather than failing at the first sandbox. The test makes such a
// kernel: it reruns itself under a seccomp filter that answers
// mount_setattr with ENOSYS, as an old kernel does.
func TestSupportedWithoutMountSetattr(t *testing.T) {
	if !testenv.IsChild(t) {
		newEnv(t) // this host itself must build sandboxes (under CI)
	}
	// The child checks, before anything asks the tier once (Supported
	// remembers its answer).
	if !testenv.InChild(t, "true") {
		return
	}
	if err := denyMountSetattr(); err != nil {
		t.Fatalf("the filter answering mount_setattr with ENOSYS: %v", err)
	}
	err := isolated.Supported()
	if !errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatalf("without mount_setattr: %v, want ErrUnsupported", err)
	}
	for _, want := range []string{"mount_setattr", "Linux 5.12", "--tier container"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in the refusal: %v", want, err)
		}
	}
}

// denyMountSetattr makes mount_setattr fail with ENOSYS in every thread of
// this process and what it starts.
func denyMountSetattr() error {
	const auditArchX8664, auditArchAarch64 = 0xc000003e, 0xc00000b7
	arch := uint32(auditArchX8664)
	if runtime.GOARCH == "arm64" {
		arch = auditArchAarch64
	}
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: arch, SkipTrue: 3},
		bpf.LoadAbsolute{Off: 0, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.SYS_MOUNT_SETATTR, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
	})
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return errno
	}
	return nil
}
