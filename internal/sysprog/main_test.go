package sysprog

import (
	"os"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
)

// Some tests start this test binary again as one of its programs
// (testenv.RegisterProgram).
func TestMain(m *testing.M) {
	testenv.RunProgram()
	// The tests' walks, and the lists they set as the last walk, stay
	// out of the host's /run/hutch.
	dir, err := os.MkdirTemp("", "hutch-walk-")
	if err != nil {
		panic(err)
	}
	walkDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
