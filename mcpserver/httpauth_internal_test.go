package mcpserver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/config"
)

// Peers that hold a connection open without sending anything are cut off:
// a request head that never completes (slowloris) after headerTimeout, a
// kept connection with no next request after idleTimeout. No token is
// needed to try either.
func TestHTTPSlowPeers(t *testing.T) {
	headerTimeout, idleTimeout = 300*time.Millisecond, 300*time.Millisecond
	t.Cleanup(func() { headerTimeout, idleTimeout = 10*time.Second, 2*time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := OpenForTest(t, config.Settings{})
	pr, pw := io.Pipe()
	go func() {
		if err := ServeHTTP(ctx, cfg, "127.0.0.1:0", "0123456789abcdef-token", pw); err != nil {
			t.Errorf("ServeHTTP: %v", err)
		}
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "hutch: serving MCP on http://")
	if err != nil || !ok {
		t.Fatalf("no address: %q %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	addr = strings.TrimSuffix(addr, "/")
	for name, send := range map[string]string{
		"half a request head":          "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",
		"idle after a refused request": "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, send); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			start := time.Now()
			_, err = io.Copy(io.Discard, c) // whatever the server answers, then its close
			if errors.Is(err, net.ErrClosed) || time.Since(start) > 3*time.Second {
				t.Errorf("the connection was held %v (%v)", time.Since(start), err)
			}
		})
	}
}
