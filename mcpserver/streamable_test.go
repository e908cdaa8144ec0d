package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/mcpserver"
)

// sseEvent is one server-sent event: its id and its data.
type sseEvent struct{ id, data string }

// readEvents sends the events of an event stream to ch until it ends.
func readEvents(sc *bufio.Scanner, ch chan<- sseEvent) {
	defer close(ch)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev != (sseEvent{}) {
				ch <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		}
	}
}

// A client whose stream drops while a call runs (a POST's, here) reconnects
// with Last-Event-ID and gets the events it missed, the call's result
// among them; the session goes on.
func TestDroppedStreamResumes(t *testing.T) {
	s, _ := shellSettings(t)
	h, err := mcpserver.Handler(mcpserver.OpenForTest(t, s))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	const version = "2025-11-25"
	do := func(ctx context.Context, method, session, lastEvent, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", version)
		}
		if lastEvent != "" {
			req.Header.Set("Last-Event-ID", lastEvent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := do(bg, "POST", "", "", initWith(version))
	session := resp.Header.Get("Mcp-Session-Id")
	// Read to the answer: a client gone before the initialize is answered
	// ends the session it began (the SDK closes an uninitialized one).
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if session == "" {
		t.Fatalf("initialize: %s", resp.Status)
	}
	do(bg, "POST", session, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()

	ctx, drop := context.WithCancel(bg)
	resp = do(ctx, "POST", session, "", shellCall(5, "sleep 1; echo done after the drop"))
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("the call: %s: %s", resp.Status, body)
	}
	events := make(chan sseEvent, 10)
	go readEvents(bufio.NewScanner(resp.Body), events)
	var last string
	var ev0 sseEvent
	select {
	case ev0 = <-events:
		last = ev0.id // the priming event
	case <-time.After(10 * time.Second):
		t.Fatal("no priming event")
	}
	if last == "" {
		t.Fatalf("the stream's first event has no id: streams are not resumable: %+v", ev0)
	}
	drop() // the connection goes, the call goes on
	resp.Body.Close()
	time.Sleep(1500 * time.Millisecond)

	resp = do(bg, "GET", session, last, "")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET with Last-Event-ID %s: %s: %s", last, resp.Status, body)
	}
	replay := make(chan sseEvent, 10)
	go readEvents(bufio.NewScanner(resp.Body), replay)
	for {
		select {
		case ev, ok := <-replay:
			if !ok {
				t.Fatal("the replay ended without the call's result")
			}
			var m map[string]any
			if json.Unmarshal([]byte(ev.data), &m) != nil || m["id"] != float64(5) {
				continue
			}
			if b, _ := json.Marshal(m["result"]); !strings.Contains(string(b), "done after the drop") {
				t.Fatalf("replayed response: %s", ev.data)
			}
			r := do(bg, "POST", session, "", `{"jsonrpc":"2.0","id":6,"method":"ping"}`)
			defer r.Body.Close()
			if r.StatusCode != http.StatusOK {
				t.Fatalf("ping after the replay: %s", r.Status)
			}
			return
		case <-time.After(10 * time.Second):
			t.Fatal("no result in the replay")
		}
	}
}
