//go:build linux && !amd64

package isolated_test

import (
	"fmt"
	"runtime"
)

// attackInt80 has nothing to try where there is no i386 system-call ABI.
func attackInt80(string) { fmt.Println("no i386 ABI on", runtime.GOARCH) }
