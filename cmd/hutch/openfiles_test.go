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
