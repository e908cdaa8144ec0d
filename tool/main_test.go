package tool_test

import (
	"os"
	"testing"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// The test binary is also the isolated tier's helper: run_code's tests
// run their code in real isolated sandboxes.
func TestMain(m *testing.M) {
	helper.Main()
	testenv.RunProgram()
	os.Exit(m.Run())
}
