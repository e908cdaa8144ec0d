package main

import (
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hutchsandbox/hutch/internal/nofile/nofiletest"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// hutch run gives its command the soft open-files limit hutch started
// with (Go raised hutch's own), or --open-files, soft and hard.
func TestRunOpenFilesLimit(t *testing.T) {
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "the isolated tier: %v", err)
	}
	if !nofiletest.InChild(t, 300) {
		return
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	script := `echo "$(ulimit -Sn) $(ulimit -Hn)"`
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--", "sh", "-c", script}, "300 " + strconv.FormatUint(lim.Max, 10)},
		{[]string{"run", "--open-files", "64", "--", "sh", "-c", script}, "64 64"},
	} {
		code, out, errOut := hutch(t, "", c.args...)
		if got := strings.TrimSpace(out); code != 0 || got != c.want {
			t.Errorf("hutch %q: exit %d, soft and hard %q (want %q), stderr %q", c.args, code, got, c.want, errOut)
		}
	}
}

// --open-files (or open_files in a policy) above the hard limit hutch runs
// under, though within the policy's range (16 to 1048576), fails on one
// line naming that hard limit: no sandboxed process may raise a hard limit
// (the capability is checked in the initial user namespace), so the
// isolated tier says so, as the container tier says "the container allows
// at most N", rather than "operation not permitted".
// Origin: review 13.
func TestRunOpenFilesAboveTheHardLimit(t *testing.T) {
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "the isolated tier: %v", err)
	}
	if !nofiletest.InChild(t, 300) {
		return
	}
	// In this child only: a hard limit well under the policy's maximum.
	lim := syscall.Rlimit{Cur: 300, Max: 1000}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--open-files", "1001", "--", "true"}
	code, _, errOut := hutch(t, "", args...)
	if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, strconv.FormatUint(lim.Max, 10)) {
		t.Errorf("hutch %q under a hard open-files limit of %d: exit %d, stderr %q; want one line naming the hard limit %d", args, lim.Max, code, errOut, lim.Max)
	}
}
