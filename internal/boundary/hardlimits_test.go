//go:build linux

package boundary

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
	type check struct {
		name     string
		l        policy.Limits
		pidsByCG bool
		fix      string // "" for no error
	}
	checks := []check{
		{"file size at the hard limit", policy.Limits{FileSize: policy.Size(fsize)}, true, ""},
		{"file size above", policy.Limits{FileSize: policy.Size(fsize + 1)}, true, "ulimit -Hf"},
		{"cpu time whose kill second fits", policy.Limits{CPUTime: 99 * time.Second}, true, ""},
		{"cpu time whose kill second does not", policy.Limits{CPUTime: 100 * time.Second}, true, "ulimit -Ht"},
		{"open files at the hard limit", policy.Limits{OpenFiles: int(nofile)}, true, ""},
		{"open files above", policy.Limits{OpenFiles: int(nofile + 1)}, true, "ulimit -Hn"},
		{"no limits", policy.Limits{}, true, ""},
	}
	if nproc := hard(unix.RLIMIT_NPROC); nproc < 1<<22 {
		// A policy may ask up to 4194304 processes: above a finite
		// hard RLIMIT_NPROC only the rlimit fallback is refused.
		checks = append(checks,
			check{"processes above, on the rlimit fallback", policy.Limits{Processes: int(nproc + 1)}, false, "ulimit -Hu"},
			check{"processes above, by a pids cgroup", policy.Limits{Processes: int(nproc + 1)}, true, ""},
			check{"processes at the hard limit", policy.Limits{Processes: int(nproc)}, false, ""})
	} else if testenv.InCI() {
		t.Errorf("CI's hard process limit is %d: the processes cases did not run", nproc)
	}
	for _, c := range checks {
		err := CheckHardLimits(c.l, c.pidsByCG)
		switch {
		case c.fix == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.fix != "" && (!errors.Is(err, sandbox.ErrConfig) || !strings.Contains(err.Error(), c.fix) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: %v; want a one-line configuration error naming %q", c.name, err, c.fix)
		}
	}
}
