package streamserver_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/streamclient"
	"github.com/hutchsandbox/hutch/internal/streamserver"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
)

// blocking serves a virtual sandbox's files; its commands wait until
// release is closed or they are cancelled.
type blocking struct {
	*virtual.Sandbox
	started chan struct{}
	release chan struct{}
}

func (b blocking) ReadStat(ctx context.Context, p string, max int64) ([]byte, sandbox.FileInfo, error) {
	return sandbox.ReadStat(ctx, b.Sandbox, p, max)
}

func (b blocking) Exec(ctx context.Context, _ wire.StreamRequest, _ streamserver.Stdio) wire.StreamResponse {
	b.started <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return wire.StreamResponse{Status: &wire.Status{Exited: true}}
}

// A client cannot hold more than MaxOps operations on one stream: the
// next is answered ErrBusy (in words: it crosses the stream as a message) and nothing runs for it; once some end, calls
// run again. When the stream ends, what runs is cancelled.
func TestServeBoundsOperationsInFlight(t *testing.T) {
	b := blocking{Sandbox: virtual.New(virtual.Options{}), started: make(chan struct{}, streamserver.MaxOps+1), release: make(chan struct{})}
	cli, srv := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- streamserver.Serve(context.Background(), srv, srv, b, wire.Hello{Root: "/"}) }()
	conn, err := streamclient.Open(context.Background(), cli, "the test server")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range streamserver.MaxOps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = conn.Exec(context.Background(), sandbox.Command{Args: []string{"x"}, Timeout: time.Minute})
		}()
	}
	for range streamserver.MaxOps {
		<-b.started
	}
	_, err = conn.Stat(context.Background(), ".")
	if err == nil || !strings.Contains(err.Error(), streamserver.ErrBusy.Error()) {
		t.Fatalf("operation %d: %v, want %q", streamserver.MaxOps+1, err, streamserver.ErrBusy)
	}
	if len(b.started) != 0 {
		t.Fatal("a command started past the bound")
	}
	close(b.release)
	wg.Wait()
	if _, err := conn.Stat(context.Background(), "."); err != nil {
		t.Fatalf("after the commands ended: %v", err)
	}
	conn.Close(sandbox.ErrClosed)
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// tailing serves a virtual sandbox's files; its command reports more
// output than it streamed, with tails of MaxOutput bytes.
type tailing struct{ *virtual.Sandbox }

func (b tailing) ReadStat(ctx context.Context, p string, max int64) ([]byte, sandbox.FileInfo, error) {
	return sandbox.ReadStat(ctx, b.Sandbox, p, max)
}

func (b tailing) Exec(_ context.Context, req wire.StreamRequest, _ streamserver.Stdio) wire.StreamResponse {
	out := []byte(strings.Repeat("o", int(req.MaxOutput)-1) + "E")
	return wire.StreamResponse{Status: &wire.Status{Exited: true}, StdoutSize: 3 << 20, Stdout: out, StderrSize: 4, Stderr: []byte("err\n")}
}

// The server's own tails of a command's output reach the client whole,
// however large the command's MaxOutput: a tail of 1 MiB or more does
// not fit in one response frame (a client once waited for such a
// response until its guard ran out).
func TestServeSendsOutputTailsBiggerThanAFrame(t *testing.T) {
	cli, srv := net.Pipe()
	go func() {
		_ = streamserver.Serve(context.Background(), srv, srv, tailing{virtual.New(virtual.Options{})}, wire.Hello{Root: "/"})
	}()
	conn, err := streamclient.Open(context.Background(), cli, "the test server")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(sandbox.ErrClosed)
	for _, max := range []int{1 << 10, sandbox.DefaultMaxOutput, 3 << 20} {
		r, err := conn.Exec(context.Background(), sandbox.Command{Args: []string{"x"}, Timeout: time.Minute, MaxOutput: max})
		if err != nil {
			t.Fatalf("MaxOutput %d: %v", max, err)
		}
		if len(r.Stdout) != max || r.Stdout[max-1] != 'E' || r.StdoutSize != 3<<20 || r.StdoutTruncated != (max < 3<<20) || string(r.Stderr) != "err\n" {
			t.Errorf("MaxOutput %d: stdout %d bytes of %d (truncated %v), stderr %q", max, len(r.Stdout), r.StdoutSize, r.StdoutTruncated, r.Stderr)
		}
	}
}
