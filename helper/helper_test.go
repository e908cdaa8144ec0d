package helper

import (
	"os"
	"testing"
)

// The test binary calls Main first, as a program using sessions must:
// started as no helper role, it returns.
func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

// After Main returned, Ready reports that the binary can serve as its own
// helper.
func TestReadyAfterMain(t *testing.T) {
	if !Ready() {
		t.Error("Ready is false after Main returned")
	}
}
