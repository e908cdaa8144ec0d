package helper

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/sandbox"
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

// A record the socket's send buffer cannot carry (a user without the
// right to raise it past net.core.wmem_max) is ErrTooLarge naming the
// setting, not a bare EMSGSIZE.
func TestConnRecordOverTheSendBuffer(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10); err != nil {
		t.Fatal(err)
	}
	a, b := NewConn(fds[0]), NewConn(fds[1])
	defer a.Close()
	defer b.Close()
	err = a.Send(Request{Op: "x", Path: strings.Repeat("a", 100<<10)})
	if !errors.Is(err, sandbox.ErrTooLarge) || !strings.Contains(err.Error(), "net.core.wmem_max") {
		t.Fatalf("a 100 KiB record through a 16 KiB buffer: %v", err)
	}
}
