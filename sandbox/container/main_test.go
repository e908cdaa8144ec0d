package container_test

import (
	"os"
	"testing"

	"github.com/hutchsandbox/hutch/helper"
)

// The test binary is also the helper mounted into the containers.
func TestMain(m *testing.M) {
	helper.Main()
	os.Exit(m.Run())
}
