package helper

import (
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// A policy rlimit above the hard limit hutch runs under is a configuration
// error naming the limit and the fix; at or below it, none. The test runs
// again as a child under finite hard limits of file size and CPU time.
func TestCheckHardLimits(t *testing.T) {
	if !testenv.InChild(t, "ulimit -f 2000 && ulimit -t 100") {
		return
	}
	hard := func(res int) uint64 {
		var l unix.Rlimit
		if err := unix.Getrlimit(res, &l); err != nil {
			t.Fatal(err)
		}
		return l.Max
	}
	fsize, cpu, nofile := hard(unix.RLIMIT_FSIZE), hard(unix.RLIMIT_CPU), hard(unix.RLIMIT_NOFILE)
	if cpu != 100 || fsize > 2000*1024 || nofile >= 1<<40 {
		t.Fatalf("the child's hard limits: file size %d, cpu %d, open files %d", fsize, cpu, nofile)
	}
	for _, c := range []struct {
		name string
		l    policy.Limits
		fix  string // "" for no error
	}{
		{"file size at the hard limit", policy.Limits{FileSize: policy.Size(fsize)}, ""},
		{"file size above", policy.Limits{FileSize: policy.Size(fsize + 1)}, "ulimit -Hf"},
		{"cpu time whose kill second fits", policy.Limits{CPUTime: 99 * time.Second}, ""},
		{"cpu time whose kill second does not", policy.Limits{CPUTime: 100 * time.Second}, "ulimit -Ht"},
		{"open files at the hard limit", policy.Limits{OpenFiles: int(nofile)}, ""},
		{"open files above", policy.Limits{OpenFiles: int(nofile + 1)}, "ulimit -Hn"},
		{"no limits", policy.Limits{}, ""},
	} {
		err := CheckHardLimits(c.l, true)
		switch {
		case c.fix == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.fix != "" && (!errors.Is(err, sandbox.ErrConfig) || !strings.Contains(err.Error(), c.fix) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: %v; want a one-line configuration error naming %q", c.name, err, c.fix)
		}
	}
}
