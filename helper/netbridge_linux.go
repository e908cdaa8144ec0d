package helper

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hutchsandbox/hutch/internal/wire"
)

// ProxyPort is where, inside a sandbox whose network is an allow-list, the
// init listens on loopback (127.0.0.1 and ::1) for the filtering proxy.
const ProxyPort = 3128

// NetFD is the init's descriptor for the network bridge: every connection
// a command opens to the proxy port travels to the host over it, as a
// descriptor.
const NetFD = 4

// ProxyEnv are the variables that point programs at the proxy, in the
// spellings curl, wget, Python, Go, Node and the rest read: http and https
// through HTTP (CONNECT for https), everything else through SOCKS5 with
// names resolved by the proxy. They are directions, not the wall: the
// sandbox's network namespace has no other way out.
func ProxyEnv() map[string]string {
	httpProxy := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	socks := "socks5h://127.0.0.1:" + strconv.Itoa(ProxyPort)
	return map[string]string{
		"http_proxy": httpProxy, "HTTP_PROXY": httpProxy,
		"https_proxy": httpProxy, "HTTPS_PROXY": httpProxy,
		"all_proxy": socks, "ALL_PROXY": socks,
	}
}

// listenProxy opens the proxy port on the sandbox's loopback. IPv4 must
// work; IPv6 only where the namespace has ::1.
func listenProxy() ([]net.Listener, error) {
	l4, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(ProxyPort))
	if err != nil {
		return nil, fmt.Errorf("listening for the proxy: %w", err)
	}
	out := []net.Listener{l4}
	if l6, err := net.Listen("tcp6", "[::1]:"+strconv.Itoa(ProxyPort)); err == nil {
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
