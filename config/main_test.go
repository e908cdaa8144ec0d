package config_test

import (
	"os"
	"testing"

	"github.com/hutchsandbox/hutch/helper"
)

// The test binary is the isolated tier's sandbox helper too: run_code's
// sandboxes re-execute it.
func TestMain(m *testing.M) {
	helper.Main()
	os.Exit(m.Run())
}
