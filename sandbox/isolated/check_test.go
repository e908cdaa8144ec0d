package isolated_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// On a kernel without mount_setattr (before 5.12) the tier says so, with
// the fix, rather than failing at the first sandbox. The test makes such a
// kernel: it reruns itself under a seccomp filter that answers
// mount_setattr with ENOSYS, as an old kernel does.
func TestSupportedWithoutMountSetattr(t *testing.T) {
	if os.Getenv("HUTCH_CHECK_INNER") == "no-mount-setattr" {
		if err := denyMountSetattr(); err != nil {
			fmt.Println("INNER no filter:", err)
			return
		}
		err := isolated.Supported()
		fmt.Printf("INNER unsupported=%v: %v\n", errors.Is(err, sandbox.ErrUnsupported), err)
		return
	}
	newEnv(t) // this host itself must build sandboxes (under CI)
	self, _ := os.Executable()
	c := exec.Command(self, "-test.run=^TestSupportedWithoutMountSetattr$", "-test.v")
	c.Env = append(os.Environ(), "HUTCH_CHECK_INNER=no-mount-setattr")
	out, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "INNER") {
		t.Fatalf("inner run: %v\n%s", err, out)
	}
	line := string(out)[strings.Index(string(out), "INNER"):]
	line, _, _ = strings.Cut(line, "\n")
	for _, want := range []string{"unsupported=true", "mount_setattr", "Linux 5.12", "--tier container"} {
		if !strings.Contains(line, want) {
			t.Errorf("want %q in the refusal: %s", want, line)
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
