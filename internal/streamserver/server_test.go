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
