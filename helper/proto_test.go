package helper

import (
	"errors"
	"io/fs"
	"testing"

	"golang.org/x/sys/unix"
)

// A send after Close fails with fs.ErrClosed instead of reaching the
// descriptor number, which the process may already have given to another
// file; Close is idempotent.
func TestConnSendAfterClose(t *testing.T) {
	host, other, err := SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	fd, err := unix.Dup(int(host.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	host.Close()
	c := NewConn(fd)
	if err := c.Send(Request{Op: "stat"}); err != nil {
		t.Fatalf("control: a send on an open socket: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Send(Request{Op: "stat"}); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("send after Close: %v, want fs.ErrClosed", err)
	}
}
