package mcpserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/mcpserver"
)

// The guarantees every transport keeps the same way (wire.go), tested on
// stdio (LineTransport) and streamable HTTP (Handler) alike, with raw
// JSON-RPC so that nothing a client library does hides what the server
// sends.

// rawConn is one client session, raw: send one message (or batch) as a
// line or a POST; recv the next message the server sent.
type rawConn interface {
	send(msg string)
	recv() map[string]any
	// quiet fails the test if the server sends anything within d.
	quiet(d time.Duration)
}

type transportCase struct {
	name string
	open func(t *testing.T, s config.Settings) rawConn
}

var transports = []transportCase{{"stdio", openStdio}, {"http", openHTTP}}

// msgs is the stream of messages both harnesses read from.
type msgs struct {
	t  *testing.T
	ch chan map[string]any
}

func (m msgs) recv() map[string]any {
	m.t.Helper()
	select {
	case msg := <-m.ch:
		return msg
	case <-time.After(20 * time.Second):
		m.t.Fatal("no message from the server in 20s")
		return nil
	}
}

func (m msgs) quiet(d time.Duration) {
	m.t.Helper()
	select {
	case msg := <-m.ch:
		m.t.Errorf("the server sent %v, want nothing", msg)
	case <-time.After(d):
	}
}

type stdioConn struct {
	msgs
	in io.Writer
}

func openStdio(t *testing.T, s config.Settings) rawConn {
	in, out, _ := serveLinesWith(t, s, 0)
	c := &stdioConn{msgs: msgs{t, make(chan map[string]any, 100)}, in: in}
	go func() {
		for {
			line, err := out.ReadBytes('\n')
			if err != nil {
				return
			}
			var m map[string]any
			if json.Unmarshal(line, &m) != nil {
				m = map[string]any{"unparsed": string(line)}
			}
			c.ch <- m
		}
	}()
	return c
}

func (c *stdioConn) send(msg string) { io.WriteString(c.in, msg+"\n") }

type httpConn struct {
	msgs
	url, session, version string
}

func openHTTP(t *testing.T, s config.Settings) rawConn {
	h, err := mcpserver.Handler(mcpserver.OpenForTest(t, s))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &httpConn{msgs: msgs{t, make(chan map[string]any, 100)}, url: srv.URL}
}

// send POSTs msg and reads what comes back, an event stream or JSON, in
// the background; an HTTP error is a message {"http": status, "text": body}.
// Only a POST without a session waits for the response's headers (for the
// session id): the SDK sends a stream's headers with its first event, so
// waiting would make the calls of a session take turns.
func (c *httpConn) send(msg string) {
	c.t.Helper()
	if c.session != "" {
		go func() {
			if resp, err := c.post(msg); err != nil {
				c.t.Error(err)
			} else {
				readHTTP(resp, c.ch)
			}
		}()
		time.Sleep(20 * time.Millisecond) // in order, mostly: the tests do not rely on it
		return
	}
	resp, err := c.post(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		c.session = id
		var init struct {
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		_ = json.Unmarshal([]byte(msg), &init)
		c.version = init.Params.ProtocolVersion
	}
	go readHTTP(resp, c.ch)
}

func (c *httpConn) post(msg string) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	return http.DefaultClient.Do(req)
}

// readHTTP sends every message of resp to ch, then closes resp.
func readHTTP(resp *http.Response, ch chan<- map[string]any) {
	defer resp.Body.Close()
	switch ct := resp.Header.Get("Content-Type"); {
	case resp.StatusCode == http.StatusAccepted:
	case strings.HasPrefix(ct, "text/event-stream"):
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 32<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && data != "" {
				var m map[string]any
				if json.Unmarshal([]byte(data), &m) != nil {
					m = map[string]any{"unparsed": data}
				}
				ch <- m
			}
		}
	case strings.HasPrefix(ct, "application/json"):
		b, _ := io.ReadAll(resp.Body)
		var one map[string]any
		var many []map[string]any
		if json.Unmarshal(b, &one) == nil {
			ch <- one
		} else if json.Unmarshal(b, &many) == nil {
			for _, m := range many {
				ch <- m
			}
		} else {
			ch <- map[string]any{"http": float64(resp.StatusCode), "text": string(b)}
		}
	default:
		b, _ := io.ReadAll(resp.Body)
		ch <- map[string]any{"http": float64(resp.StatusCode), "text": string(b)}
	}
}

func initWith(version string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
}

// start initializes c under version.
func start(t *testing.T, c rawConn, version string) {
	t.Helper()
	c.send(initWith(version))
	if m := c.recv(); m["id"] != float64(1) || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// errorCode returns m's error code, failing unless m is an error response
// with id.
func errorCode(t *testing.T, m map[string]any, id any) float64 {
	t.Helper()
	e, _ := m["error"].(map[string]any)
	if e == nil || m["id"] != id {
		t.Fatalf("got %v, want an error response with id %v", m, id)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("error without a message: %v", m)
	}
	code, _ := e["code"].(float64)
	return code
}

// pingOK sends a ping with id and fails unless its answer is the next
// message: after every error the session goes on.
func pingOK(t *testing.T, c rawConn, id int) {
	t.Helper()
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id))
	if m := c.recv(); m["id"] != float64(id) || m["result"] == nil {
		t.Fatalf("ping %d: got %v", id, m)
	}
}

// No error response carries code 0 (which JSON-RPC does not define): each
// error the SDK would send with it gets its own, and the session goes on.
func TestNoErrorHasCodeZero(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := tr.open(t, config.Settings{Tier: "virtual"})
			c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
			if code := errorCode(t, c.recv(), float64(7)); code != jsonrpc.CodeInvalidRequest {
				t.Errorf("tools/list before initialize: code %v, want %d", code, jsonrpc.CodeInvalidRequest)
			}
			start(t, c, "2025-06-18")
			cases := []struct {
				name, msg string
				code      int64
			}{
				{"a duplicate initialize", strings.Replace(initWith("2025-06-18"), `"id":1`, `"id":10`, 1), jsonrpc.CodeInvalidRequest},
				{"an unknown tool", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, jsonrpc.CodeInvalidParams},
				{"params that do not decode", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":5}}`, jsonrpc.CodeInvalidParams},
				{"params of the wrong kind", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":"x"}`, jsonrpc.CodeInvalidParams},
				{"missing params", `{"jsonrpc":"2.0","id":10,"method":"tools/call"}`, jsonrpc.CodeInvalidRequest},
				{"an id on a notification", `{"jsonrpc":"2.0","id":10,"method":"notifications/initialized"}`, jsonrpc.CodeInvalidRequest},
			}
			for i, cs := range cases {
				c.send(cs.msg)
				if code := errorCode(t, c.recv(), float64(10)); code != float64(cs.code) {
					t.Errorf("%s: code %v, want %d", cs.name, code, cs.code)
				}
				pingOK(t, c, 100+i)
			}
		})
	}
}

// A method the server does not have is -32601 "method not found" on
// every transport (the SDK's HTTP handler alone would answer HTTP 400 in
// plain text); so are the methods of features hutch does not declare. A
// notification of an unknown method is dropped unanswered.
func TestUnknownMethodIsMethodNotFound(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := tr.open(t, config.Settings{Tier: "virtual"})
			start(t, c, "2025-06-18")
			for i, method := range []string{"foo/bar", "tools/frobnicate", "prompts/list", "resources/list", "resources/templates/list", "logging/setLevel", "completion/complete"} {
				c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{}}`, 20+i, method))
				if code := errorCode(t, c.recv(), float64(20+i)); code != jsonrpc.CodeMethodNotFound {
					t.Errorf("%s: code %v, want %d", method, code, jsonrpc.CodeMethodNotFound)
				}
				pingOK(t, c, 200+i)
			}
			c.send(`{"jsonrpc":"2.0","method":"notifications/whatever"}`)
			c.quiet(300 * time.Millisecond)
			pingOK(t, c, 300)
		})
	}
}

// Batches follow the negotiated protocol version on both transports: they
// are served under 2025-03-26, the one version that has them, and refused
// whole otherwise (each request in it gets -32600 under its id, and none
// of it is done), before initialize too.
func TestBatchesFollowTheVersion(t *testing.T) {
	const batch = `[{"jsonrpc":"2.0","id":31,"method":"ping"},{"jsonrpc":"2.0","id":32,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`
	for _, tr := range transports {
		t.Run(tr.name+"/before initialize", func(t *testing.T) {
			c := tr.open(t, config.Settings{Tier: "virtual"})
			c.send(batch)
			for range 2 {
				m := c.recv()
				if code := errorCode(t, m, m["id"]); code != jsonrpc.CodeInvalidRequest || (m["id"] != float64(31) && m["id"] != float64(32)) {
					t.Errorf("a batch before initialize: %v", m)
				}
			}
			start(t, c, "2025-03-26")
			pingOK(t, c, 40)
		})
		for _, v := range []struct {
			version string
			allowed bool
		}{{"2025-03-26", true}, {"2025-06-18", false}, {"2025-11-25", false}} {
			t.Run(tr.name+"/"+v.version, func(t *testing.T) {
				c := tr.open(t, config.Settings{Tier: "virtual"})
				start(t, c, v.version)
				c.send(batch)
				got := map[any]map[string]any{}
				for range 2 {
					m := c.recv()
					got[m["id"]] = m
				}
				for _, id := range []any{float64(31), float64(32)} {
					m := got[id]
					switch {
					case m == nil:
						t.Errorf("no answer for %v: %v", id, got)
					case v.allowed && m["result"] == nil:
						t.Errorf("under %s the batch's ping %v got %v", v.version, id, m)
					case !v.allowed:
						if code := errorCode(t, m, id); code != jsonrpc.CodeInvalidRequest {
							t.Errorf("under %s: code %v, want %d", v.version, code, jsonrpc.CodeInvalidRequest)
						}
					}
				}
				pingOK(t, c, 41)
			})
		}
	}
}

// The guarantees that need a shell run on the local tier in auto mode.
func shellSettings(t *testing.T) (config.Settings, string) {
	dir := t.TempDir()
	return config.Settings{Tier: "local", Root: dir, Mode: "auto"}, dir
}

func shellCall(id int, command string) string {
	args, _ := json.Marshal(map[string]any{"command": command, "timeout": 60})
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"shell","arguments":%s}}`, id, args)
}

func cancelMsg(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"test"}}`, id)
}

// A call the client cancels gets no response at all (the specification:
// receivers SHOULD NOT respond to cancelled requests), its command is
// killed, and the session goes on.
func TestCancelledCallGetsNoResponse(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s, dir := shellSettings(t)
			c := tr.open(t, s)
			start(t, c, "2025-11-25")
			tick := filepath.Join(dir, "tick")
			c.send(shellCall(50, `i=0; while :; do i=$((i+1)); echo $i > tick; sleep 0.1; done`))
			waitFor(t, func() bool { _, err := os.Stat(tick); return err == nil })
			c.send(cancelMsg(50))
			pingOK(t, c, 51)
			time.Sleep(500 * time.Millisecond)
			before, _ := os.ReadFile(tick)
			time.Sleep(600 * time.Millisecond)
			if after, _ := os.ReadFile(tick); !bytes.Equal(before, after) {
				t.Errorf("the cancelled command still runs (tick %q, then %q)", before, after)
			}
			c.quiet(500 * time.Millisecond)
			pingOK(t, c, 52)
		})
	}
}

// A cancel racing the result it cancels: the response comes or not, but
// never twice, never with code 0, and the session goes on.
func TestCancelRacingAResult(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s, _ := shellSettings(t)
			c := tr.open(t, s)
			start(t, c, "2025-06-18")
			for i := range 10 {
				id := 60 + i
				c.send(shellCall(id, "echo hi"))
				c.send(cancelMsg(id))
				c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 1000+i))
				for {
					m := c.recv()
					if m["id"] == float64(1000+i) {
						break
					}
					if m["id"] != float64(id) {
						t.Fatalf("unexpected %v", m)
					}
					if e, ok := m["error"].(map[string]any); ok && e["code"] == float64(0) {
						t.Errorf("code 0: %v", m)
					}
				}
			}
			c.quiet(300 * time.Millisecond)
			pingOK(t, c, 70)
		})
	}
}

// Calls are answered as they end, not in the order they came; a batch's
// (under 2025-03-26) too.
func TestOutOfOrderAnswers(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s, _ := shellSettings(t)
			c := tr.open(t, s)
			start(t, c, "2025-03-26")
			c.send(shellCall(80, "sleep 1; echo slow"))
			pingOK(t, c, 81) // answered while 80 runs
			if m := c.recv(); m["id"] != float64(80) || m["result"] == nil {
				t.Fatalf("the slow call: %v", m)
			}
			c.send("[" + shellCall(82, "sleep 1; echo slow") + `,{"jsonrpc":"2.0","id":83,"method":"ping"}]`)
			if m := c.recv(); m["id"] != float64(83) {
				t.Errorf("first answer of the batch: %v, want the ping's", m)
			}
			if m := c.recv(); m["id"] != float64(82) || m["result"] == nil {
				t.Errorf("second answer of the batch: %v", m)
			}
			pingOK(t, c, 84)
		})
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
