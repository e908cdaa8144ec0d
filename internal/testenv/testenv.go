// Package testenv holds the project's rule for tests that need a
// component the host may lack (a Docker engine, root, a pids control
// group, curl, an IPv6 loopback, ...): such a test skips only outside CI,
// and says so; under CI=true, where every component is installed, a
// missing component is a failure.
//
// It imports only the standard library, so any package's tests may use it.
package testenv

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// InCI reports whether the tests run under CI: true exactly when the
// environment variable CI is "true" (any other value, or none, is not CI).
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing ends t for want of a component described by format and args
// (fmt.Sprintf's rules). Under CI (InCI) it fails t with t.Fatalf, the
// message starting "CI has every component: "; elsewhere it skips t with
// t.Skipf, the message ending " (outside CI only)". Either way it does not
// return: the test's goroutine exits, as with t.FailNow and t.SkipNow, so
// it must be called from the goroutine running the test. It is a helper
// (t.Helper): the message names the caller's line.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI has every component: "+format, args...)
	}
	t.Skipf(format+" (outside CI only)", args...)
}

// childEnv names, in a child made by InChild, the test it runs.
const childEnv = "HUTCH_TEST_CHILD"

// IsChild reports whether this process is the child InChild starts for
// t's test, without starting one: for work the parent alone must do
// before InChild.
func IsChild(t *testing.T) bool {
	return os.Getenv(childEnv) == strings.SplitN(t.Name(), "/", 2)[0]
}

// InChild reports whether this process is the child InChild starts for
// t's test. When it is not, it runs t's top-level test again in a new
// process of this test binary, which /bin/sh starts after running setup
// (shell commands, such as "ulimit -S -n 300": what the test needs set
// before the process starts), fails t unless the test passed there, and
// returns false; the caller then does nothing more, and the child does
// the test's work:
//
//	if !testenv.InChild(t, "ulimit -t 100") {
//		return
//	}
func InChild(t *testing.T, setup string) bool {
	t.Helper()
	return InChildVia(t, nil, setup)
}

// InChildVia is InChild with the child's /bin/sh started through wrap, a
// command that takes the rest of the command line as the program to run
// (such as "unshare", "-m", "--propagation", "private": the child, and its
// setup, then run in a mount namespace of their own).
func InChildVia(t *testing.T, wrap []string, setup string) bool {
	t.Helper()
	if IsChild(t) {
		return true
	}
	top := strings.SplitN(t.Name(), "/", 2)[0]
	self, err := os.Executable() // os.Args[0] may be relative to a directory since left
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append([]string{}, wrap...), "/bin/sh", "-c", setup+` && exec "$0" -test.run="$1" -test.v -test.count=1`, self, "^"+regexp.QuoteMeta(top)+"$")
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = append(os.Environ(), childEnv+"="+top)
	out, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+top) {
		t.Fatalf("the test in a child after %q: %v\n%s", setup, err, out)
	}
	return false
}

// FindProcess returns the pid of a process whose command line holds
// marker (a test gives its command a unique argument), or 0 when there is
// none.
func FindProcess(marker string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), marker) {
			pid, _ := strconv.Atoi(e.Name())
			return pid
		}
	}
	return 0
}

// Alive reports whether pid is a process that has not exited; a zombie
// waiting for its parent to reap it has exited.
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return rest != "" && rest[0] != 'Z'
}
