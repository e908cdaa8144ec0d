package container_test

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/helper"
)

// The test binary is also the helper mounted into the containers, and an
// attacker a command there can run (HUTCH_ATTACK, see attack).
func TestMain(m *testing.M) {
	helper.Main()
	if name := os.Getenv("HUTCH_ATTACK"); name != "" {
		os.Exit(attack(name))
	}
	os.Exit(m.Run())
}

// attack runs one attack from inside a container (busybox has no tool for
// it) and returns the exit status.
func attack(name string) int {
	switch name {
	case "lower-parent-nofile":
		// What a command can do to the reaper that started it (its parent,
		// same user): lower its open-files limit for whatever it starts next.
		lim := unix.Rlimit{Cur: 20, Max: 20}
		if err := unix.Prlimit(os.Getppid(), unix.RLIMIT_NOFILE, &lim, nil); err != nil {
			fmt.Println("prlimit:", err)
			return 1
		}
		fmt.Println("lowered")
		return 0
	}
	fmt.Println("no such attack:", name)
	return 2
}
