package tool

// Review 9: adversarial checks of the fetch tool's guard that the earlier
// fetch tests do not make. Each passes when the guard holds.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// review9RawServer runs handle on each connection to a fresh 127.0.0.1
// listener, after reading the request head, and returns the port.
func review9RawServer(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				handle(c)
			}()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestReview9FetchRedirectToAddressForms: an allowed host redirects to
// the host's own loopback, unspecified, metadata and embedded-IPv4
// addresses in every spelling; each is refused, and only the allowed
// server is ever dialled. The allow-list holds 127.0.0.1 (the server) and
// ranges around the metadata addresses, which must not name them.
func TestReview9FetchRedirectToAddressForms(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", r.URL.Query().Get("u"))
		w.WriteHeader(http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port := hostPort(t, srv.URL)
	res := &fetchFakeResolver{answers: map[string][]string{
		"allowed.test":           {"127.0.0.1"},
		"meta.allowed.test":      {"169.254.169.254"},
		"ecs.allowed.test":       {"169.254.170.2"},
		"ali.allowed.test":       {"100.100.100.200"},
		"meta6.allowed.test":     {"fd00:ec2::254"},
		"gce6.allowed.test":      {"fd20:ce::254"},
		"nat64meta.allowed.test": {"64:ff9b::a9fe:a9fe"},
		"mapmeta.allowed.test":   {"::ffff:169.254.169.254"},
		"lo2.allowed.test":       {"127.0.0.2"},
		"any.allowed.test":       {"0.0.0.0"},
		"any6.allowed.test":      {"::"},
	}}
	allow := []string{"allowed.test", "*.allowed.test", "127.0.0.1", "169.254.0.0/16", "100.64.0.0/10", "fd00::/8"}
	for _, target := range []string{
		"http://0.0.0.0:%P/",
		"http://[::]:%P/",
		"http://[::1]:%P/",
		"http://127.0.0.2:%P/",
		"http://[::127.0.0.1]:%P/",
		"http://[64:ff9b::7f00:1]:%P/",
		"http://[2002:7f00:1::1]:%P/",
		"http://[::ffff:127.0.0.2]:%P/",
		"http://0177.0.0.1:%P/",
		"http://0x7f.1:%P/",
		"http://127.0.0.1.:%P/",
		"http://localhost:%P/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[::ffff:169.254.169.254]/",
		"http://[::ffff:a9fe:a9fe]/",
		"http://169.254.170.2/v2/credentials",
		"http://100.100.100.200/latest/meta-data/",
		"http://[fd00:ec2::254]/",
		"http://[fd20:ce::254]/",
		"http://meta.allowed.test/",
		"http://ecs.allowed.test/",
		"http://ali.allowed.test/",
		"http://meta6.allowed.test/",
		"http://gce6.allowed.test/",
		"http://nat64meta.allowed.test/",
		"http://mapmeta.allowed.test/",
		"http://lo2.allowed.test:%P/",
		"http://any.allowed.test:%P/",
		"http://any6.allowed.test:%P/",
		"http://allowed.test.evil.test:%P/",
		"http://evil-allowed.test:%P/",
		"http://allowed.test:%P@127.0.0.2:%P/",
		"file:///etc/passwd",
		"ftp://allowed.test/",
	} {
		target := strings.ReplaceAll(target, "%P", port)
		t.Run(target, func(t *testing.T) {
			f, dl := newFetchTest(t, FetchPolicy{Allow: allow}, res)
			start := "http://allowed.test:" + port + "/to?u=" + url.QueryEscape(target)
			got, err := f.Fetch(t.Context(), start)
			if !errors.Is(err, ErrFetchRefused) {
				t.Fatalf("Fetch = %+v, %v; want a refusal", got, err)
			}
			t.Log(err)
			for _, d := range dl.dials() {
				if d != "tcp 127.0.0.1:"+port {
					t.Errorf("dialled %q; only the allowed server may be", d)
				}
			}
		})
	}
}

// TestReview9FetchRebindOnRedirect: the allowed name answers a public
// address first and the metadata address next (a rebinding resolver);
// a redirect to the same name on another port makes a new connection,
// which must be refused.
func TestReview9FetchRebindOnRedirect(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://rebind.test:81/latest/meta-data/")
		w.WriteHeader(http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	_, port := hostPort(t, srv.URL)
	res := &fetchFakeResolver{answer: func(host string, n int) []string {
		if n == 1 {
			return []string{"127.0.0.1"}
		}
		return []string{"169.254.169.254"}
	}}
	f, dl := newFetchTest(t, FetchPolicy{Allow: []string{"rebind.test", "127.0.0.1", "169.254.0.0/16"}}, res)
	_, err := f.Fetch(t.Context(), "http://rebind.test:"+port+"/")
	if !errors.Is(err, ErrFetchRefused) || !strings.Contains(err.Error(), "169.254.169.254") {
		t.Fatalf("error = %v, want a refusal naming 169.254.169.254", err)
	}
	for _, d := range dl.dials() {
		if d != "tcp 127.0.0.1:"+port {
			t.Errorf("dialled %q", d)
		}
	}
}

// TestReview9FetchGzipBomb: a small gzip body that inflates to 64 MiB is
// cut at MaxBody, quickly, rather than inflated in full.
func TestReview9FetchGzipBomb(t *testing.T) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 64 {
		zw.Write(zeros)
	}
	zw.Close()
	bomb := buf.Bytes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "text/plain")
		w.Write(bomb)
	}))
	t.Cleanup(srv.Close)
	f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}}, nil)
	start := time.Now()
	got, err := f.Fetch(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Body) != DefaultFetchMaxBody || !got.Truncated {
		t.Errorf("body %d bytes, truncated %v; want %d, true", len(got.Body), got.Truncated, DefaultFetchMaxBody)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestReview9FetchLyingContentLength: a body longer than its
// Content-Length is cut at the length; one shorter than it, ended by the
// server closing, fails at once rather than waiting.
func TestReview9FetchLyingContentLength(t *testing.T) {
	t.Run("longer than announced", func(t *testing.T) {
		port := review9RawServer(t, func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\n0123456789SMUGGLED"+strings.Repeat("x", 500000))
		})
		f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}}, nil)
		got, err := f.Fetch(t.Context(), "http://127.0.0.1:"+port+"/")
		if err != nil || string(got.Body) != "0123456789" || got.Truncated {
			t.Errorf("Fetch = body %q truncated %v, %v; want the 10 announced bytes", got.Body, got.Truncated, err)
		}
	})
	t.Run("shorter than announced", func(t *testing.T) {
		port := review9RawServer(t, func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nshort")
		})
		f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}, ReadTimeout: 5 * time.Second}, nil)
		start := time.Now()
		got, err := f.Fetch(t.Context(), "http://127.0.0.1:"+port+"/")
		if err == nil && (len(got.Body) > 5 || got.Truncated) {
			t.Errorf("Fetch = %+v", got)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("took %v, want an end when the server closes", d)
		}
	})
}

// TestReview9FetchHugeHeaders: response heads past the transport's bound
// fail rather than being buffered.
func TestReview9FetchHugeHeaders(t *testing.T) {
	port := review9RawServer(t, func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Pad: " + strings.Repeat("p", 1000) + "\r\n"
		for range 10000 { // 10 MB
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
		io.WriteString(c, "\r\nbody")
	})
	f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}}, nil)
	got, err := f.Fetch(t.Context(), "http://127.0.0.1:"+port+"/")
	if err == nil {
		t.Fatalf("Fetch = status %d, body %q; want an error", got.Status, got.Body)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q is more than one line", err)
	}
}

// TestReview9FetchHeaderDrip: a server dribbling its response head a byte
// at a time is cut at ReadTimeout overall, not per byte.
func TestReview9FetchHeaderDrip(t *testing.T) {
	port := review9RawServer(t, func(c net.Conn) {
		head := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", 1000)
		for i := range len(head) {
			if _, err := c.Write([]byte{head[i]}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}, ReadTimeout: 500 * time.Millisecond}, nil)
	start := time.Now()
	_, err := f.Fetch(t.Context(), "http://127.0.0.1:"+port+"/")
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("error = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v, want about 500ms", d)
	}
}

// TestReview9Fetch1xxFlood: a server sending interim responses without
// end does not hold the fetch.
func TestReview9Fetch1xxFlood(t *testing.T) {
	port := review9RawServer(t, func(c net.Conn) {
		for {
			if _, err := io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	f, _ := newFetchTest(t, FetchPolicy{Allow: []string{"127.0.0.1"}, ReadTimeout: 2 * time.Second}, nil)
	start := time.Now()
	_, err := f.Fetch(t.Context(), "http://127.0.0.1:"+port+"/")
	if err == nil {
		t.Fatal("Fetch succeeded; want an error")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("took %v", d)
	}
}
