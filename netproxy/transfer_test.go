package netproxy

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// bigSize is the size of the large transfers: 100 MB (10 MB with -short).
func bigSize() int64 {
	if testing.Short() {
		return 10 << 20
	}
	return 100 << 20
}

// startSumServer starts a raw TCP server on ip: for each connection it
// reads until the client half-closes, answers "<bytes> <sha256>\n", then
// sends n bytes of the test stream and closes.
func startSumServer(t testing.TB, ip string, n int64) string {
	t.Helper()
	return serveEach(t, ip, func(c net.Conn) {
		h := sha256.New()
		got, err := io.Copy(h, c)
		if err != nil {
			return
		}
		fmt.Fprintf(c, "%d %x\n", got, h.Sum(nil))
		io.Copy(c, io.LimitReader(newStream(), n))
	})
}

// TestProxyLargeTransfers: 100 MB each way through a CONNECT tunnel (TCP
// and unix clients) and through SOCKS5, with half-close, and 100 MB down
// and up through HTTP forwarding; every byte is counted and hashed.
func TestProxyLargeTransfers(t *testing.T) {
	n := bigSize()
	want := streamSum(n)
	sumAddr := startSumServer(t, "127.0.0.5", n)
	p, addr := startProxy(t, []string{"127.0.0.5"}, nil, Options{})

	tunnel := func(t *testing.T, c net.Conn, br *bufio.Reader) {
		t.Helper()
		up := make(chan error, 1)
		go func() {
			_, err := io.Copy(c, io.LimitReader(newStream(), n))
			if err == nil {
				err = c.(interface{ CloseWrite() error }).CloseWrite()
			}
			up <- err
		}()
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the server's sum: %v", err)
		}
		if line != fmt.Sprintf("%d %s\n", n, want) {
			t.Errorf("the server got %q, want %d bytes hashing to %s", line, n, want)
		}
		if err := <-up; err != nil {
			t.Fatalf("upload: %v", err)
		}
		h := sha256.New()
		got, err := io.Copy(h, br)
		if err != nil || got != n || hex.EncodeToString(h.Sum(nil)) != want {
			t.Errorf("download: %d bytes (want %d), err %v, hash matches: %v", got, n, err, hex.EncodeToString(h.Sum(nil)) == want)
		}
	}

	t.Run("CONNECT over TCP", func(t *testing.T) {
		c := dialProxy(t, addr)
		tunnel(t, c, tunnelTo(t, c, sumAddr))
	})
	t.Run("CONNECT over a unix socket", func(t *testing.T) {
		c := unixClient(t, p)
		tunnel(t, c, tunnelTo(t, c, sumAddr))
	})
	t.Run("SOCKS5", func(t *testing.T) {
		c := dialProxy(t, addr)
		host, port, _ := net.SplitHostPort(sumAddr)
		code, br := socksDial(t, c, host, atoi(port), nil)
		if code != socksSucceeded {
			t.Fatalf("reply %#x", code)
		}
		tunnel(t, c, br)
	})

	o := startOrigin(t, "127.0.0.5", "F", false)
	base := "http://127.0.0.5:" + o.port
	client := proxyClient(addr)
	t.Run("HTTP forwarding download", func(t *testing.T) {
		resp, err := client.Get(base + "/big?n=" + strconv.FormatInt(n, 10))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ContentLength != n {
			t.Errorf("Content-Length %d", resp.ContentLength)
		}
		if got := sumBody(t, resp.Body); got != want {
			t.Error("the body differs from what the origin sent")
		}
	})
	t.Run("HTTP forwarding upload", func(t *testing.T) {
		req, _ := http.NewRequest("PUT", base+"/sum", io.LimitReader(newStream(), n))
		req.ContentLength = n
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != fmt.Sprintf("%d %s", n, want) {
			t.Errorf("the origin got %q", strings.TrimSpace(string(b)))
		}
	})
}
