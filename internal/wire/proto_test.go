package wire

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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

// Close returns at once while a Send waits for room (the peer reads
// nothing), and the waiting Send fails, as Conn's doc says: a reaper's
// discard (any Close meant to end a stuck peer) does not hang with it.
// Origin: review 8.
func TestConnCloseUnblocksSend(t *testing.T) {
	host, peer, err := SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close() // never read
	c, err := FileConn(host)
	if err != nil {
		t.Fatal(err)
	}
	big := Request{Op: "x", Path: strings.Repeat("a", 64<<10)}
	sent := make(chan error, 1)
	var n int
	go func() {
		for {
			if err := c.Send(big); err != nil {
				sent <- err
				return
			}
			n++
		}
	}()
	time.Sleep(300 * time.Millisecond) // the socket's buffer is full: Send waits
	select {
	case err := <-sent:
		t.Fatalf("control: Send failed before it could block (after %d records): %v", n, err)
	default:
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
	case <-time.After(3 * time.Second):
		peer.Close() // let both go
		<-closed
		t.Fatal("Close waited for a Send blocked on a peer that does not read")
	}
	select {
	case err := <-sent:
		if err == nil {
			t.Fatal("Send after Close succeeded")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the blocked Send did not fail after Close")
	}
}

// Close while a Recv waits in the poller: the Recv fails, and the
// descriptor number is not closed under it (no later file is touched).
// Checked with -race too.
func TestConnCloseDuringRecv(t *testing.T) {
	for range 50 {
		host, peer, err := SocketPair()
		if err != nil {
			t.Fatal(err)
		}
		c, err := FileConn(host)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		var rerr error
		go func() {
			defer wg.Done()
			var v Request
			_, rerr = c.Recv(&v)
		}()
		time.Sleep(time.Millisecond)
		_ = c.Close()
		wg.Wait()
		if rerr == nil {
			t.Fatal("Recv after Close returned no error")
		}
		peer.Close()
	}
}

// Files passed with MSG_DONTWAIT arrive close-on-exec, one per fd, and a
// non-pollable descriptor (a regular file is refused by epoll) still
// works as a blocking Conn.
func TestConnPassFilesAndBlockingFallback(t *testing.T) {
	host, peer, err := SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	a, err := FileConn(host)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := FileConn(peer)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := a.Send(Request{Op: "exec"}, r, w); err != nil {
		t.Fatal(err)
	}
	var got Request
	files, err := b.Recv(&got)
	if err != nil || got.Op != "exec" || len(files) != 2 {
		t.Fatalf("%v %+v %d files", err, got, len(files))
	}
	for _, f := range files {
		flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("passed fd %d not close-on-exec", f.Fd())
		}
		f.Close()
	}
	// A descriptor the poller refuses: NewConn falls back to blocking.
	tmp, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	fd, _ := unix.Dup(int(tmp.Fd()))
	tmp.Close()
	c := NewConn(fd)
	if c.wait != 0 {
		t.Errorf("a regular file's Conn waits with MSG_DONTWAIT")
	}
	var v Request
	if _, err := c.Recv(&v); err == nil || errors.Is(err, unix.EAGAIN) {
		t.Errorf("Recv on a non-socket: %v", err)
	}
	_ = c.Close()
}

// Records up to MaxRecord (1 MiB) pass, though a SOCK_SEQPACKET message
// may not exceed the socket's send buffer (net.core.wmem_default, about
// 208 KiB): SocketPair sizes the buffers for them. Origin: review 8.
func TestConnRecordUpToMaxRecord(t *testing.T) {
	host, peer, err := SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := FileConn(host)
	b, _ := FileConn(peer)
	defer a.Close()
	defer b.Close()
	req := Request{Op: "x", Path: strings.Repeat("a", 300<<10)}
	done := make(chan error, 1)
	go func() {
		var got Request
		_, err := b.Recv(&got)
		if err == nil && got.Path != req.Path {
			err = errors.New("record changed")
		}
		done <- err
	}()
	if err := a.Send(req); err != nil {
		t.Fatalf("a 300 KiB record (MaxRecord is %d): %v", MaxRecord, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
