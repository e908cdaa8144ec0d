package container_test

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// The test binary is also the helper mounted into the containers, and the
// programs a command there can run (testenv.RegisterProgram): attacks
// busybox has no tool for.
func TestMain(m *testing.M) {
	helper.Main()
	testenv.RunProgram()
	os.Exit(m.Run())
}

func init() { testenv.RegisterProgram("lower-parent-nofile", lowerParentNofile) }

// lowerParentNofile does what a command can do to the reaper that started
// it (its parent, same user): lower its open-files limit for whatever it
// starts next. It prints "lowered" and exits 0, or the error and exits 1.
func lowerParentNofile([]string) {
	lim := unix.Rlimit{Cur: 20, Max: 20}
	if err := unix.Prlimit(os.Getppid(), unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		fmt.Println("prlimit:", err)
		os.Exit(1)
	}
	fmt.Println("lowered")
}
