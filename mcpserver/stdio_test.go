package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/mcpserver"
)

// serveLines runs a server on a LineTransport over OS pipes and returns the
// client's ends: write requests in, read responses out.
func serveLines(t *testing.T, dir string) (io.WriteCloser, *bufio.Reader, <-chan error) {
	t.Helper()
	return serveLinesWith(t, config.Settings{Tier: "local", Root: dir}, 0)
}

// serveLinesWith is serveLines with settings and a message limit.
func serveLinesWith(t *testing.T, s config.Settings, limit int) (io.WriteCloser, *bufio.Reader, <-chan error) {
	t.Helper()
	return serveLinesOn(t, bg, s, limit)
}

// serveLinesOn is serveLinesWith under ctx.
func serveLinesOn(t *testing.T, ctx context.Context, s config.Settings, limit int) (io.WriteCloser, *bufio.Reader, <-chan error) {
	t.Helper()
	cfg := mcpserver.OpenForTest(t, s)
	srv, err := mcpserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, &mcpserver.LineTransport{In: inR, Out: outW, Limit: limit}); outW.Close() }()
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
	// A batch under a version without batches is refused, each request
	// in it answered with an error (TestBatchesFollowTheVersion has the
	// rest).
	io.WriteString(in, `[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"ping"}]`+"\n")
	ids := map[float64]bool{}
	for range 2 {
		m := readMsg(t, out)
		ids[m["id"].(float64)] = m["error"] != nil
	}
	if !ids[3] || !ids[4] {
		t.Errorf("batch answers (id: is an error): %v", ids)
	}
	// A malformed line gets an error reply; the session goes on.
	io.WriteString(in, "{not json\n"+`{"jsonrpc":"2.0","id":5,"method":"ping"}`+"\n")
	if m := readMsg(t, out); m["error"] == nil {
		t.Errorf("a malformed line: %v", m)
	}
	if m := readMsg(t, out); m["id"] != float64(5) || m["result"] == nil {
		t.Errorf("ping after a malformed line: %v", m)
	}
	select {
	case err := <-done:
		t.Fatalf("the session ended: %v", err)
	default:
	}
}

// TestLineTransportEnds: the server stops when the client closes its
// input, and when the server's context ends while it waits for a
// message.
func TestLineTransportEnds(t *testing.T) {
	for _, how := range []string{"input closed", "context cancelled"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			in, out, done := serveLinesOn(t, ctx, config.Settings{Tier: "local", Root: t.TempDir()}, 0)
			io.WriteString(in, initMsg+"\n")
			readMsg(t, out)
			if how == "input closed" {
				in.Close() // the client went away
			} else {
				cancel()
			}
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("server did not stop after %s", how)
			}
		})
	}
}

// Every line that is no JSON-RPC message gets the error JSON-RPC 2.0
// names, under the request's id when it has a valid one, and the session
// answers the ping that follows.
func TestLineTransportMalformed(t *testing.T) {
	in, out, done := serveLinesWith(t, config.Settings{Tier: "virtual"}, 0)
	io.WriteString(in, initMsg+"\n")
	readMsg(t, out)
	type reply struct {
		code int
		id   any // nil: null
	}
	parse, invalid := jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest
	cases := []struct {
		line string
		want []reply
	}{
		{`{"jsonrpc":"2.0","id":2,"method":`, []reply{{parse, nil}}},
		{`{garbage`, []reply{{parse, nil}}},
		{`[{"jsonrpc":"2.0","id":2,"method":"ping"}`, []reply{{parse, nil}}},
		{`{"foo":1}`, []reply{{invalid, nil}}},
		{`[]`, []reply{{invalid, nil}}},
		{`123`, []reply{{invalid, nil}}},
		{`"hello"`, []reply{{invalid, nil}}},
		{`null`, []reply{{invalid, nil}}},
		{`{"jsonrpc":"1.0","id":7,"method":"ping"}`, []reply{{invalid, float64(7)}}},
		{`{"jsonrpc":"2.0","id":"s","method":5}`, []reply{{invalid, "s"}}},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, []reply{{invalid, nil}}},
		{`{"jsonrpc":"2.0","id":[1],"method":"ping"}`, []reply{{invalid, nil}}},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, []reply{{invalid, nil}}},
		{`{"jsonrpc":"2.0","result":{}}`, []reply{{invalid, nil}}},
		// A malformed response is answered without its id, which is one
		// of the server's own.
		{`{"jsonrpc":"2.0","id":8,"error":"bad"}`, []reply{{invalid, nil}}},
	}
	for i, c := range cases {
		ping := 100 + i
		fmt.Fprintf(in, "%s\n{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}\n", c.line, ping)
		for _, w := range c.want {
			m := readMsg(t, out)
			e, _ := m["error"].(map[string]any)
			if e == nil || e["code"] != float64(w.code) || m["id"] != w.id || e["message"] == "" {
				t.Errorf("%s: got %v, want error %d with id %v", c.line, m, w.code, w.id)
			}
			if _, ok := m["id"]; !ok {
				t.Errorf("%s: the error reply has no id (want null): %v", c.line, m)
			}
		}
		if m := readMsg(t, out); m["id"] != float64(ping) || m["result"] == nil {
			t.Fatalf("%s: the ping after it got %v", c.line, m)
		}
	}
	// Under 2025-03-26, the one version with batches, a batch's valid
	// messages are answered and its others get errors.
	in, out, _ = serveLinesWith(t, config.Settings{Tier: "virtual"}, 0)
	io.WriteString(in, strings.Replace(initMsg, "2025-06-18", "2025-03-26", 1)+"\n")
	readMsg(t, out)
	io.WriteString(in, `[1,2]`+"\n")
	for range 2 {
		if m := readMsg(t, out); m["id"] != nil || m["error"].(map[string]any)["code"] != float64(invalid) {
			t.Errorf("[1,2]: %v", m)
		}
	}
	io.WriteString(in, `[{"jsonrpc":"2.0","id":200,"method":"ping"},{"jsonrpc":"2.0","id":201,"method":7}]`+"\n")
	got := map[float64]bool{}
	for range 2 {
		m := readMsg(t, out)
		got[m["id"].(float64)] = m["error"] != nil
	}
	if e, ok := got[200]; !ok || e || !got[201] {
		t.Errorf("a batch with one bad message: %v (id: is an error)", got)
	}
	select {
	case err := <-done:
		t.Fatalf("the session ended: %v", err)
	default:
	}
}

// A line longer than the limit is read and dropped up to its newline (not
// held), answered with an error naming the limit, and the session goes
// on; a line that ends at EOF over the limit is answered too.
func TestLineTransportTooLong(t *testing.T) {
	const limit = 1 << 20
	in, out, done := serveLinesWith(t, config.Settings{Tier: "virtual"}, limit)
	io.WriteString(in, initMsg+"\n")
	readMsg(t, out)
	go func() {
		chunk := `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"pad":"` + strings.Repeat("x", 1<<20)
		for range 3 {
			if _, err := io.WriteString(in, chunk); err != nil {
				return
			}
		}
		io.WriteString(in, "\"}}}\n"+`{"jsonrpc":"2.0","id":3,"method":"ping"}`+"\n"+strings.Repeat("y", 2*limit))
		in.Close()
	}()
	for _, id := range []any{nil, float64(3), nil} {
		m := readMsg(t, out)
		e, _ := m["error"].(map[string]any)
		switch {
		case id != nil && (m["id"] != id || m["result"] == nil):
			t.Errorf("want the answer to ping %v, got %v", id, m)
		case id == nil && (e == nil || e["code"] != float64(jsonrpc.CodeInvalidRequest) || !strings.Contains(e["message"].(string), fmt.Sprint(limit))):
			t.Errorf("want an error naming the limit, got %v", m)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the session ended with %v, want EOF", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the session did not end at EOF")
	}
}

// A running command survives a malformed line sent while it runs: the
// line is answered, and so is the command when it ends.
func TestLineTransportMalformedDuringCall(t *testing.T) {
	in, out, _ := serveLinesWith(t, config.Settings{Tier: "local", Root: t.TempDir(), Mode: "auto"}, 0)
	io.WriteString(in, initMsg+"\n")
	readMsg(t, out)
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell","arguments":{"command":"sleep 2; echo done"}}}`+"\n")
	time.Sleep(300 * time.Millisecond)
	io.WriteString(in, "{garbage\n"+`{"jsonrpc":"2.0","id":3,"method":"ping"}`+"\n")
	var ids []any
	for range 3 {
		m := readMsg(t, out)
		ids = append(ids, m["id"])
		if m["id"] == float64(2) {
			if b, _ := json.Marshal(m["result"]); !strings.Contains(string(b), "done") {
				t.Errorf("the shell call: %v", m)
			}
		}
	}
	if fmt.Sprint(ids) != "[<nil> 3 2]" {
		t.Errorf("replies in the order %v, want the error, the ping, then the shell call", ids)
	}
}
