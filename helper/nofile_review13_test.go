package helper

import (
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/nofile/nofiletest"
)

// Review 13 found that startOpenFiles puts the start soft limit back
// whenever the soft limit now is the hard one less one, whatever the hard
// limit now is. Go's own test (syscall's forkAndExecInChild1) also wants
// the hard limit unchanged since the start: after another process sets
// hutch's limit to K-1/K (prlimit(1), a supervisor), os/exec's children
// get K-1/K while hutch's own commands got the start soft limit under K,
// contrary to "hutch puts the original back, as os/exec does". Fix:
// restore only when now.Max is also the start hard limit (nofile.Start's
// second value).
func TestReview13RestoreOnlyAsOSExecWould(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max < 304 {
		t.Fatalf("hard open-files limit %d: no room for a lowered hard limit above the start soft one (raise it with ulimit -Hn)", lim.Max)
	}
	if !nofiletest.InChild(t, 300) {
		return
	}
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// As another process's prlimit would: a raw system call leaves Go's
	// record of the start limit as it is, as an outside change does.
	k := 301 + (lim.Max-301)/2 // 300 < k-1, k < the start hard limit
	set := unix.Rlimit{Cur: k - 1, Max: k}
	if _, _, e := syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&set)), 0, 0, 0); e != 0 {
		t.Fatal(e)
	}
	want := strconv.FormatUint(k-1, 10) + "\n" + strconv.FormatUint(k, 10) + "\n"
	script := "ulimit -Sn; ulimit -Hn"
	viaExec, err := exec.Command("/bin/sh", "-c", script).Output()
	if err != nil || string(viaExec) != want {
		t.Fatalf("control: os/exec's child has %q, %v (want %q)", viaExec, err, want)
	}
	job := Job{Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/"}
	code, out, errOut := spawnWait(t, job, "/bin/sh", "", false)
	if code != 0 || out != want {
		t.Errorf("after this process's limit was set to %d/%d from outside, spawn's command has %q (os/exec's child has %q), exit %d, stderr %q", k-1, k, out, viaExec, code, errOut)
	}
}
