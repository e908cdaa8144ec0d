package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// benchChunk is what one throughput op sends.
const benchChunk = 1 << 20

// startSink starts a TCP server on 127.0.0.2 that reads and drops
// everything, then answers the byte count when the client half-closes.
func startSink(b *testing.B) string {
	return serveEach(b, "127.0.0.2", func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		fmt.Fprintf(c, "%d\n", n)
	})
}

// startPong starts a TCP server on 127.0.0.2 that answers "pong" to
// "ping" once per connection and closes.
func startPong(b *testing.B) string {
	return serveEach(b, "127.0.0.2", func(c net.Conn) {
		var buf [4]byte
		if _, err := io.ReadFull(c, buf[:]); err == nil {
			c.Write([]byte("pong"))
		}
	})
}

// benchProxy starts a proxy allowing 127.0.0.2 and returns its address.
func benchProxy(b *testing.B) (*Proxy, string) {
	p, addr := startProxy(b, []string{"127.0.0.2"}, nil, Options{})
	return p, addr
}

// runThroughput writes benchChunk bytes per op on c, half-closes, and
// checks the sink's count read from br.
func runThroughput(b *testing.B, c net.Conn, br *bufio.Reader) {
	chunk := make([]byte, benchChunk)
	b.SetBytes(benchChunk)
	var sent int64
	for b.Loop() {
		if _, err := c.Write(chunk); err != nil {
			b.Fatal(err)
		}
		sent += benchChunk
	}
	c.(interface{ CloseWrite() error }).CloseWrite()
	var n int64
	if _, err := fmt.Fscan(br, &n); err != nil || n != sent {
		b.Fatalf("the sink got %d bytes (%v), want %d", n, err, sent)
	}
}

// BenchmarkThroughput: bytes per second from a client to a sink, directly
// and through a CONNECT tunnel (TCP client, and a unix-socket client as
// the sandbox bridge uses).
func BenchmarkThroughput(b *testing.B) {
	sink := startSink(b)
	p, paddr := benchProxy(b)
	b.Run("direct", func(b *testing.B) {
		c, err := net.Dial("tcp", sink)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		runThroughput(b, c, bufio.NewReader(c))
	})
	b.Run("connect", func(b *testing.B) {
		c := dialProxy(b, paddr)
		runThroughput(b, c, tunnelTo(b, c, sink))
	})
	b.Run("connect-unix", func(b *testing.B) {
		c := unixClient(b, p)
		runThroughput(b, c, tunnelTo(b, c, sink))
	})
}

// BenchmarkConnLatency: one connection and a 4-byte exchange per op,
// directly, through CONNECT, through SOCKS5, and one HTTP request
// forwarded vs direct.
func BenchmarkConnLatency(b *testing.B) {
	pong := startPong(b)
	_, paddr := benchProxy(b)
	host, port, _ := net.SplitHostPort(pong)
	exchange := func(b *testing.B, c net.Conn, r io.Reader) {
		if _, err := c.Write([]byte("ping")); err != nil {
			b.Fatal(err)
		}
		var buf [4]byte
		if _, err := io.ReadFull(r, buf[:]); err != nil || string(buf[:]) != "pong" {
			b.Fatalf("got %q, %v", buf, err)
		}
	}
	dial := func(b *testing.B, addr string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			c := dial(b, pong)
			exchange(b, c, c)
			c.Close()
		}
	})
	b.Run("connect", func(b *testing.B) {
		for b.Loop() {
			c := dial(b, paddr)
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", pong, pong)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
			if err != nil || resp.StatusCode != 200 {
				b.Fatal(resp, err)
			}
			exchange(b, c, br)
			c.Close()
		}
	})
	b.Run("socks5", func(b *testing.B) {
		for b.Loop() {
			c := dial(b, paddr)
			code, br := socksDial(b, c, host, atoi(port), nil)
			if code != socksSucceeded {
				b.Fatalf("reply %#x", code)
			}
			exchange(b, c, br)
			c.Close()
		}
	})

	o := startOrigin(b, "127.0.0.2", "B", false)
	url := "http://127.0.0.2:" + o.port + "/x"
	get := func(b *testing.B, client *http.Client) {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	b.Run("http-direct", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		for b.Loop() {
			get(b, client)
		}
	})
	b.Run("http-forward", func(b *testing.B) {
		client := proxyClient(paddr)
		client.Transport.(*http.Transport).DisableKeepAlives = true
		for b.Loop() {
			get(b, client)
		}
	})
}

// BenchmarkRelay compares the proxy's copy (copyHalf: a pooled buffer)
// with io.Copy, which splices between TCP and unix sockets, relaying a
// client's bytes to the sink: the measurement behind copyHalf.
func BenchmarkRelay(b *testing.B) {
	sink := startSink(b)
	for _, relay := range []struct {
		name string
		copy func(dst, src net.Conn)
	}{
		{"copyHalf", func(dst, src net.Conn) { copyHalf(dst, src, idleReader{src, new(atomic.Bool), time.Minute}) }},
		{"io.Copy", func(dst, src net.Conn) {
			io.Copy(dst, src)
			dst.(interface{ CloseWrite() error }).CloseWrite()
		}},
	} {
		b.Run(relay.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				up, err := net.Dial("tcp", sink)
				if err != nil {
					return
				}
				defer up.Close()
				go relay.copy(up, c)
				io.Copy(c, up)
			}()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			runThroughput(b, c, bufio.NewReader(c))
		})
	}
}
