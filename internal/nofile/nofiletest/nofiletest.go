// Package nofiletest runs a test again in a new process that starts with
// a low soft open-files limit, for tests of what hutch does with the limit
// it started with (package nofile).
package nofiletest

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// env marks the re-executed test binary.
const env = "HUTCH_NOFILE_TEST_CHILD"

// InChild reports whether this process is the re-executed one. When it
// is not, it first runs the calling test (t.Name(), a top-level test) in
// a new process of this test binary whose soft RLIMIT_NOFILE starts at
// soft, under the hard limit in force, and fails t unless it passed there.
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
	if os.Getenv(env) == "1" {
		return true
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max < soft+2 {
		t.Fatalf("this host's hard open-files limit is %d; the test needs more than %d (raise it with ulimit -Hn)", lim.Max, soft+1)
	}
	self, err := os.Executable() // os.Args[0] may be relative to a directory since left
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.QuoteMeta(strings.SplitN(t.Name(), "/", 2)[0])
	c := exec.Command("/bin/sh", "-c", `ulimit -S -n `+strconv.FormatUint(soft, 10)+` && exec "$0" -test.run="$1" -test.v -test.count=1`, self, "^"+name+"$")
	c.Env = append(os.Environ(), env+"=1")
	out, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test under a soft open-files limit of %d: %v\n%s", soft, err, out)
	}
	return false
}
