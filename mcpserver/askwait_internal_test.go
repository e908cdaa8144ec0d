package mcpserver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/config"
)

// A client that declared elicitation and then never answers (it went
// away while asked) holds the call, and with it the HTTP session's idle
// timer, for at most questionTTL; the end of the wait is a denial the
// audit log records. Origin: review 15a.
func TestUnansweredQuestionIsADenial(t *testing.T) {
	old := questionTTL
	questionTTL = 300 * time.Millisecond
	t.Cleanup(func() { questionTTL = old })
	dir := t.TempDir()
	audit := filepath.Join(t.TempDir(), "audit.jsonl") // outside the root the tools write
	cfg := OpenForTest(t, config.Settings{Tier: "local", Root: dir, Mode: "ask", Audit: audit})
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A client of the 2025-06-18 protocol, speaking raw JSON-RPC lines: it
	// declares elicitation, calls shell, and never answers the question.
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	go func() { _ = srv.Run(context.Background(), &LineTransport{In: sr, Out: sw}); sw.Close() }()
	t.Cleanup(func() { cw.Close() })
	lines := bufio.NewScanner(cr)
	lines.Buffer(nil, MaxMessage)
	send := func(msg string) {
		if _, err := io.WriteString(cw, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"old","version":"1"}}}`)
	if !lines.Scan() {
		t.Fatal("no answer to initialize")
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shell","arguments":{"command":"touch ran"}}}`)
	asked := make(chan struct{}, 1)
	result := make(chan string, 1)
	go func() {
		for lines.Scan() {
			switch l := lines.Text(); {
			case strings.Contains(l, `"elicitation/create"`):
				asked <- struct{}{}
			case strings.Contains(l, `"id":2`):
				result <- l
				return
			}
		}
		result <- "the stream ended: " + fmt.Sprint(lines.Err())
	}()
	var text string
	select {
	case text = <-result:
	case <-time.After(20 * time.Second):
		t.Fatal("an unanswered question held the call for 20 s (questionTTL is 300 ms here)")
	}
	select {
	case <-asked:
	default:
		t.Fatal("control: the client was never asked")
	}
	if !strings.Contains(text, `"isError":true`) || !strings.Contains(text, "denied: could not ask") {
		t.Errorf("want a denial result, got %s", text)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the command ran without an answer")
	}
	b, _ := os.ReadFile(audit)
	if !strings.Contains(string(b), `"outcome":"denied"`) {
		t.Errorf("the audit log has no denial: %s", b)
	}
}

// Questions that are never answered are capped (1024 outstanding, the
// oldest dropped), as the approval store caps open requests: a client
// calling a privileged tool in a loop without answering cannot grow the
// server's memory without bound. Origin: review 7.
func TestOutstandingQuestionsBounded(t *testing.T) {
	issued.Lock()
	before := len(issued.m)
	issued.Unlock()
	for range 5000 {
		signState("key")
	}
	issued.Lock()
	n := len(issued.m)
	for k := range issued.m { // leave the map as other tests expect
		delete(issued.m, k)
	}
	issued.Unlock()
	if n-before > 1024 {
		t.Fatalf("%d unanswered questions kept in memory; want a bound", n-before)
	}
}
