package mcpserver_test

import (
	"os"
	"testing"

	"github.com/hutchsandbox/hutch/helper"
)

// The test binary is also the isolated tier's helper.
func TestMain(m *testing.M) {
	helper.Main()
	os.Exit(m.Run())
}
