// Package nofiletest runs a test again in a new process that starts with
// a low soft open-files limit, for tests of what hutch does with the limit
// it started with (package nofile).
package nofiletest

import (
	"strconv"
	"syscall"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
)

// InChild is testenv.InChild with a soft RLIMIT_NOFILE of soft, under the
// hard limit in force, at the child's start: it reports whether this
// process is the child; when not, it runs the calling test there and
// fails t unless it passed.
// The caller then does nothing more, and the child does the test's work:
//
//	if !nofiletest.InChild(t, 200) {
//		return
//	}
//
// It fails t when the hard limit leaves no room for soft below it (Go
// would not raise the limit, so nothing would be tested).
func InChild(t *testing.T, soft uint64) bool {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max < soft+2 {
		t.Fatalf("this host's hard open-files limit is %d; the test needs more than %d (raise it with ulimit -Hn)", lim.Max, soft+1)
	}
	return testenv.InChild(t, "ulimit -S -n "+strconv.FormatUint(soft, 10))
}
