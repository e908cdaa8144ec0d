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
	os.Exit(m.Run())
}
