package netproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// slowOrigin serves keep-alive HTTP on 127.0.0.2: "/slow/N" answers after
// N milliseconds, "/trickle" sends its body a byte every 300 ms, "/never"
// never answers. It counts the connections it accepted.
func slowOrigin(t *testing.T) (addr string, conns *atomic.Int64) {
	conns = new(atomic.Int64)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	addr = serveEach(t, "127.0.0.2", func(c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			switch {
			case req.URL.Path == "/never":
				select {
				case <-release:
				case <-time.After(30 * time.Second):
				}
				return
			case req.URL.Path == "/trickle":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
				for _, b := range "abcde" {
					time.Sleep(300 * time.Millisecond)
					fmt.Fprintf(c, "%c", b)
				}
			case strings.HasPrefix(req.URL.Path, "/slow/"):
				var ms int
				fmt.Sscan(strings.TrimPrefix(req.URL.Path, "/slow/"), &ms)
				time.Sleep(time.Duration(ms) * time.Millisecond)
				body := req.URL.Path + "\n"
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			}
		}
	})
	return addr, conns
}

// get sends a GET for path on origin over c (a connection to the proxy)
// and returns the response body.
func get(t *testing.T, c net.Conn, br *bufio.Reader, origin, path string) string {
	t.Helper()
	fmt.Fprintf(c, "GET http://%s%s HTTP/1.1\r\nHost: %s\r\n\r\n", origin, path, origin)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET %s body: %v", path, err)
	}
	return string(b)
}

// TestWatchLeavesNoDeadlineForKeepAlive: requests that waited past
// watchDelay, a trickled body, then quick ones, on one client connection
// (TCP, and unix through ServeConn) and one kept upstream connection: no
// deadline the watcher set is left behind to fail or hang the next
// request.
// Origin: review 4.
func TestWatchLeavesNoDeadlineForKeepAlive(t *testing.T) {
	origin, conns := slowOrigin(t)
	p, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{HalfClosedTimeout: 800 * time.Millisecond})
	for name, c := range map[string]net.Conn{"tcp": dialProxy(t, addr), "unix": unixClient(t, p)} {
		t.Run(name, func(t *testing.T) {
			before := conns.Load()
			br := bufio.NewReader(c)
			for _, path := range []string{"/slow/700", "/slow/0", "/slow/900", "/slow/600", "/trickle", "/slow/0"} {
				want := path + "\n"
				if path == "/trickle" {
					want = "abcde"
				}
				if got := get(t, c, br, origin, path); got != want {
					t.Errorf("%s: %q", path, got)
				}
			}
			if n := conns.Load() - before; n != 1 {
				t.Errorf("%d upstream connections, want 1 kept", n)
			}
		})
	}
}

// TestWatchKeepsPipelinedRequest: the client pipelines its next request
// while the first is watched, then ends its side; both answers arrive.
// Origin: review 4.
func TestWatchKeepsPipelinedRequest(t *testing.T) {
	origin, _ := slowOrigin(t)
	_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{HalfClosedTimeout: 800 * time.Millisecond})
	c := dialProxy(t, addr)
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "GET http://%s/slow/1200 HTTP/1.1\r\nHost: x\r\n\r\n", origin)
	time.Sleep(700 * time.Millisecond)
	fmt.Fprintf(c, "GET http://%s/slow/700 HTTP/1.1\r\nHost: x\r\n\r\n", origin)
	time.Sleep(100 * time.Millisecond)
	c.(*net.TCPConn).CloseWrite()
	for _, want := range []string{"/slow/1200\n", "/slow/700\n"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != want {
			t.Errorf("%q, want %q", b, want)
		}
	}
}

// TestWatchLeaksNoGoroutine: watched requests and clients that reset
// while watched leave no goroutine behind.
// Origin: review 4.
func TestWatchLeaksNoGoroutine(t *testing.T) {
	origin, _ := slowOrigin(t)
	_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{HalfClosedTimeout: 300 * time.Millisecond})
	time.Sleep(100 * time.Millisecond)
	base := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		c, _ := net.Dial("tcp", addr)
		br := bufio.NewReader(c)
		get(t, c, br, origin, "/slow/600")
		c.Close()
		c, _ = net.Dial("tcp", addr)
		fmt.Fprintf(c, "GET http://%s/never HTTP/1.1\r\nHost: x\r\n\r\n", origin)
		time.Sleep(50 * time.Millisecond)
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && runtime.NumGoroutine() > base+5 { // +5: origin handlers still waiting on release
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base+5 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines, %d before\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// TestWatchReleasesUpstreamWhenPipeliningClientGoes: a client that sent
// anything past its request (a pipelined request, or a single byte) and
// then went away, by a reset or an end of stream, does not hold its
// session and the upstream connection while the upstream stays silent:
// watchClient watches even when those bytes are already buffered, and
// goes on past the first byte it sees (the kernel tells the peer's end
// apart from its data). The control sends nothing more.
// Origin: review 4.
func TestWatchReleasesUpstreamWhenPipeliningClientGoes(t *testing.T) {
	origin, _ := slowOrigin(t)
	const halfClosed = 800 * time.Millisecond
	next := fmt.Sprintf("GET http://%s/slow/0 HTTP/1.1\r\nHost: x\r\n\r\n", origin)
	for _, c := range []struct {
		name         string
		extra, later string
	}{
		{"control: nothing more", "", ""},
		{"a pipelined request", next, ""},
		{"one byte more", "G", ""},
		{"a pipelined request once watched", "", next},
	} {
		for _, reset := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, reset %v", c.name, reset), func(t *testing.T) {
				var upClosed atomic.Int64
				_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{Dial: countCloses(&upClosed), HalfClosedTimeout: halfClosed})
				conn := dialProxy(t, addr)
				fmt.Fprintf(conn, "GET http://%s/never HTTP/1.1\r\nHost: x\r\n\r\n%s", origin, c.extra)
				time.Sleep(100 * time.Millisecond)
				if c.later != "" {
					time.Sleep(watchDelay)
					io.WriteString(conn, c.later)
					time.Sleep(100 * time.Millisecond)
				}
				if reset {
					conn.(*net.TCPConn).SetLinger(0)
				}
				conn.Close()
				start := time.Now()
				limit := watchDelay + halfClosed + 2*time.Second
				for time.Since(start) < limit+time.Second && upClosed.Load() < 1 {
					time.Sleep(10 * time.Millisecond)
				}
				if d := time.Since(start); d > limit {
					t.Errorf("the upstream connection was held %v (still open: %v) after the client went away", d.Round(time.Millisecond), upClosed.Load() == 0)
				}
			})
		}
	}
}

// TestForwardCutsHugeResponseHead: an allowed upstream answering a
// forwarded request with an endless response head is cut once the head
// passes its bound (the client gets a 502 or a closed connection, never
// the head); the proxy neither buffers it all nor hangs.
// Origin: review 9.
func TestForwardCutsHugeResponseHead(t *testing.T) {
	up := serveEach(t, "127.0.0.2", func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		c.SetWriteDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Pad: " + strings.Repeat("p", 1000) + "\r\n"
		for {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	_, port, _ := net.SplitHostPort(up)
	_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{})
	start := time.Now()
	got := exchange(t, addr, fmt.Sprintf("GET http://127.0.0.2:%s/ HTTP/1.1\r\nConnection: close\r\n\r\n", port))
	if got != "" && !strings.HasPrefix(got, "HTTP/1.1 502") || strings.Contains(got, "X-Pad") {
		t.Errorf("answer %.120q, want a 502 or nothing", got)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestForwardEndsWithLyingUpstream: an upstream that announces more body
// than it sends and closes does not hold the client: the connection ends
// when the upstream does (with at most the short response relayed).
// Origin: review 9.
func TestForwardEndsWithLyingUpstream(t *testing.T) {
	up := serveEach(t, "127.0.0.2", func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nshort")
	})
	_, port, _ := net.SplitHostPort(up)
	_, addr := startProxy(t, []string{"127.0.0.2"}, nil, Options{})
	start := time.Now()
	got := exchange(t, addr, fmt.Sprintf("GET http://127.0.0.2:%s/ HTTP/1.1\r\nConnection: close\r\n\r\n", port))
	if got != "" && !strings.HasPrefix(got, "HTTP/1.1 200") || len(got) > 1000 {
		t.Errorf("answer %.200q", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}
