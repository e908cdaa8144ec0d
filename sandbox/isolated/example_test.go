package isolated_test

import (
	"context"
	"fmt"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// One command in a fresh sandbox of the default policy (the host's system
// directories read-only, no network, limits), then the end of its
// teardown. It needs Linux namespaces, Landlock and seccomp (hutch check
// says which are missing); without them Run says so and nothing runs.
func ExampleRun() {
	ctx := context.Background()
	res, err := isolated.Run(ctx, policy.Default(), sandbox.Command{
		Shell: `echo "hello from $(hostname)"; touch /usr/x 2>/dev/null || echo "/usr is read-only"`,
	})
	if err != nil {
		fmt.Println("not available here:", err)
		return
	}
	fmt.Printf("%sexit %d\n", res.Stdout, res.ExitCode)
	// Run returned once the command ended; before exiting, wait for the
	// sandbox's PID 1 to be gone and its control groups removed.
	if err := isolated.Drain(ctx); err != nil {
		fmt.Println("teardown:", err)
	}
}
