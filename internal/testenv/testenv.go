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
