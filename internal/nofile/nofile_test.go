package nofile_test

import (
	"runtime"
	"syscall"
	"testing"

	"github.com/hutchsandbox/hutch/internal/nofile"
	"github.com/hutchsandbox/hutch/internal/nofile/nofiletest"
)

// startSoft is the soft limit the re-executed test starts with.
const startSoft = 200

// TestStartIsTheLimitBeforeGoRaisedIt runs in a process started with a
// soft limit of 200 under a higher hard one; there Go raises the soft
// limit to the hard one less one, and Start must still say 200.
func TestStartIsTheLimitBeforeGoRaisedIt(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		if _, _, ok := nofile.Start(); ok {
			t.Fatal("Start says it knows the limit on a platform where it is not read")
		}
		t.Skip("the start limit is read on linux/amd64 and linux/arm64 only")
	}
	if !nofiletest.InChild(t, startSoft) {
		return
	}
	soft, hard, ok := nofile.Start()
	if !ok {
		t.Fatal("Start does not know the limit")
	}
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	if soft != startSoft || hard != now.Max {
		t.Errorf("Start = %d, %d; want %d, %d", soft, hard, startSoft, now.Max)
	}
	// The control: Go did raise the soft limit, so the value above was
	// read before it did.
	if now.Cur != now.Max-1 {
		t.Errorf("the soft limit now is %d, want Go's raised %d", now.Cur, now.Max-1)
	}
}

func TestStartOfThisProcess(t *testing.T) {
	soft, hard, ok := nofile.Start()
	if !ok {
		t.Skip("not read on this platform")
	}
	if soft == 0 || soft > hard {
		t.Errorf("Start = %d, %d: a soft limit of zero or above the hard one", soft, hard)
	}
}
