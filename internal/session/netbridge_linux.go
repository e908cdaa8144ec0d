package session

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/wire"
)

// listenProxy opens the proxy port on the sandbox's loopback. IPv4 must
// work; IPv6 only where the namespace has ::1.
func listenProxy() ([]net.Listener, error) {
	l4, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(boundary.ProxyPort))
	if err != nil {
		return nil, fmt.Errorf("listening for the proxy: %w", err)
	}
	out := []net.Listener{l4}
	if l6, err := net.Listen("tcp6", "[::1]:"+strconv.Itoa(boundary.ProxyPort)); err == nil {
		out = append(out, l6)
	}
	return out, nil
}

// bridge hands every connection accepted on ls to the host over conn, as
// a descriptor (the host's proxy then reads and writes it directly: no
// copy in between), until the host stops taking them.
func bridge(conn *wire.Conn, ls []net.Listener) {
	for _, l := range ls {
		go func() {
			for {
				c, err := l.Accept()
				if errors.Is(err, net.ErrClosed) {
					return
				}
				if err != nil { // out of descriptors, say: try again soon
					time.Sleep(10 * time.Millisecond)
					continue
				}
				f, err := c.(*net.TCPConn).File()
				c.Close()
				if err != nil {
					continue
				}
				err = conn.Send(struct{}{}, f)
				f.Close()
				if err != nil {
					l.Close() // the host is gone: refuse from now on
					return
				}
			}
		}()
	}
}
