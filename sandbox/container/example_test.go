package container_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
)

// A hardened throwaway container: no network, no capabilities, a read-only
// root with a writable /workspace. It needs a container engine (docker
// here) and the image; without them it says so and stops.
func Example() {
	ctx := context.Background()
	sb, err := container.New(context.Background(), container.Options{Image: "hutch-test-busybox:latest"})
	if err != nil {
		fmt.Println("not available:", err) // no image given, docker not installed...
		return
	}
	defer sb.Close() // removes the container

	// Lexical escapes are refused before anything starts.
	_, err = sb.Read(ctx, "../etc/passwd")
	fmt.Println("escape refused:", errors.Is(err, sandbox.ErrEscape))

	if err := sb.Start(ctx); err != nil {
		fmt.Println("no engine here:", err)
		return
	}
	_ = sb.Write(ctx, "main.txt", []byte("hello"))
	res, err := sb.Exec(ctx, sandbox.Command{
		Shell:   `cat main.txt; echo " $GREETING"; touch /etc/x 2>/dev/null || echo "root is read-only"`,
		Env:     map[string]string{"GREETING": "world"},
		Timeout: 10 * time.Second,
	})
	fmt.Printf("%q exit=%d err=%v\n", res.Stdout, res.ExitCode, err)
	mode, _ := sb.Mode()
	fmt.Println("mode:", mode, "gaps:", sb.HardeningGaps())
}
