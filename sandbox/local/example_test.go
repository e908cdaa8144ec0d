package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
)

func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "hutch-example-")
	defer os.RemoveAll(dir)

	sb, err := local.New(context.Background(), local.Options{Dir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close()

	_ = sb.Write(ctx, "src/main.txt", []byte("hello"))
	_, err = sb.Read(ctx, "../../etc/passwd")
	fmt.Println("escape refused:", errors.Is(err, sandbox.ErrEscape))

	res, err := sb.Exec(ctx, sandbox.Command{
		Shell:   `cat main.txt; echo " $GREETING"`,
		Dir:     "src",
		Env:     map[string]string{"GREETING": "world"},
		Timeout: 10 * time.Second,
	})
	fmt.Printf("%q exit=%d timed_out=%v err=%v\n", res.Stdout, res.ExitCode, res.TimedOut, err)

	res, _ = sb.Exec(ctx, sandbox.Command{Args: []string{"sleep", "5"}, Timeout: 100 * time.Millisecond})
	fmt.Println("timed out:", res.TimedOut, res.Signal)
	// Output:
	// escape refused: true
	// "hello world\n" exit=0 timed_out=false err=<nil>
	// timed out: true SIGKILL
}
