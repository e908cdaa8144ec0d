package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/mcpserver"
)

// serveLines runs a server on a LineTransport over OS pipes and returns the
// client's ends: write requests in, read responses out.
func serveLines(t *testing.T, dir string) (io.WriteCloser, *bufio.Reader, <-chan error) {
	t.Helper()
	cfg, closeAll, err := mcpserver.Open(bg, mcpserver.Settings{Tier: "local", Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeAll)
	srv, err := mcpserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.Run(bg, &mcpserver.LineTransport{In: inR, Out: outW}); outW.Close() }()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return inW, bufio.NewReader(outR), done
}

func readMsg(t *testing.T, r *bufio.Reader) map[string]any {
	t.Helper()
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("response %q: %v", line, err)
	}
	return m
}

const initMsg = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestLineTransport(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	in, out, done := serveLines(t, dir)
	// Blank lines and CRLF endings are tolerated; each message is one line.
	io.WriteString(in, "\n"+initMsg+"\r\n")
	if m := readMsg(t, out); m["id"] != float64(1) || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	// A message split over several writes, and a long one (1 MiB of
	// padding in an ignored field), still decode.
	req := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a.txt"},"_meta":{"pad":"` + strings.Repeat("x", 1<<20) + `"}}}` + "\n"
	for i := 0; i < len(req); i += 100_000 {
		io.WriteString(in, req[i:min(len(req), i+100_000)])
	}
	m := readMsg(t, out)
	res, _ := m["result"].(map[string]any)
	if m["id"] != float64(2) || res == nil || !strings.Contains(func() string { b, _ := json.Marshal(res); return string(b) }(), `"text":"hello"`) {
		t.Fatalf("read_file: %v", m)
	}
	// A batch (older protocol versions) is split into its messages.
	io.WriteString(in, `[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"ping"}]`+"\n")
	ids := map[float64]bool{}
	for range 2 {
		ids[readMsg(t, out)["id"].(float64)] = true
	}
	if !ids[3] || !ids[4] {
		t.Errorf("batch answers: %v", ids)
	}
	// A malformed line ends the session with an error, not a hang or panic.
	io.WriteString(in, "{not json\n")
	select {
	case err := <-done:
		if err == nil {
			t.Error("a malformed message ended the session without an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("server did not stop after a malformed message")
	}
}

func TestLineTransportEOF(t *testing.T) {
	in, out, done := serveLines(t, t.TempDir())
	io.WriteString(in, initMsg+"\n")
	readMsg(t, out)
	in.Close() // the client went away
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("server did not stop at EOF")
	}
}

func TestLineTransportTooLong(t *testing.T) {
	in, _, done := serveLines(t, t.TempDir())
	go func() {
		chunk := strings.Repeat("x", 1<<20)
		for i := 0; i <= mcpserver.MaxMessage>>20; i++ {
			if _, err := io.WriteString(in, chunk); err != nil {
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "longer than") {
			t.Errorf("an endless line: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("server kept buffering an endless line")
	}
}
