package remote_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/remote"
)

// acmeSandbox pretends to be a vendor SDK's handle on a hosted sandbox
// (here its "box" is a directory of this machine, and its commands run
// here). A real program imports the vendor's package instead.
type acmeSandbox struct{ ID string }

func (a *acmeSandbox) DownloadFile(ctx context.Context, p string) ([]byte, error) {
	return os.ReadFile(p)
}

func (a *acmeSandbox) UploadFile(ctx context.Context, p string, data []byte) error {
	return os.WriteFile(p, data, 0o644)
}

// RunCommand is the SDK's way to run a program: argv, stdin, a timeout.
func (a *acmeSandbox) RunCommand(ctx context.Context, argv []string, stdin []byte, timeout time.Duration) (code int, stdout, stderr []byte, timedOut bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + sandbox.DefaultPath}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errOut
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code, err = ee.ExitCode(), nil
	}
	return code, out.Bytes(), errOut.Bytes(), ctx.Err() != nil, err
}

func (a *acmeSandbox) Kill() error { return nil }

// acmeClient is the whole adapter: four methods over the SDK.
type acmeClient struct{ sb *acmeSandbox }

func (c acmeClient) Read(ctx context.Context, p string) ([]byte, error) {
	return c.sb.DownloadFile(ctx, p)
}
func (c acmeClient) Write(ctx context.Context, p string, data []byte) error {
	return c.sb.UploadFile(ctx, p, data)
}
func (c acmeClient) Exec(ctx context.Context, r remote.ExecRequest) (remote.ExecResult, error) {
	code, out, errOut, timedOut, err := c.sb.RunCommand(ctx, r.Argv, r.Stdin, r.Timeout)
	return remote.ExecResult{ExitCode: code, Stdout: out, Stderr: errOut, TimedOut: timedOut}, err
}
func (c acmeClient) Close() error { return c.sb.Kill() }

func ExampleFromClient() {
	root, _ := os.MkdirTemp("", "acme-box-")
	defer os.RemoveAll(root)

	vendor := &acmeSandbox{ID: "sb-42"}
	sb, err := remote.FromClient(acmeClient{vendor}, remote.ClientOptions{Root: root, Name: "acme sandbox " + vendor.ID})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close()

	ctx := context.Background()
	if err := sb.Write(ctx, "notes/hello.txt", []byte("hello from the box\n")); err != nil {
		fmt.Println(err)
		return
	}
	r, err := sb.Exec(ctx, sandbox.Command{Shell: "cat hello.txt", Dir: "notes"})
	fmt.Printf("%s%v\n", r.Stdout, err)
	matches, _ := sb.Glob(ctx, "**/*.txt")
	fmt.Println(matches)
	_, err = sb.Read(ctx, "../etc/passwd")
	fmt.Println(err)
	fmt.Println(len(sb.Gaps()), "gaps, stated in Instructions")
	// Output:
	// hello from the box
	// <nil>
	// [notes/hello.txt]
	// read ../etc/passwd: path escapes the sandbox root
	// 5 gaps, stated in Instructions
}
