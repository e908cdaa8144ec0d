package tool_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
	"github.com/hutchsandbox/hutch/tool"
)

// The fetch and web_search tools end to end: gate, then a real HTTP server
// on 127.0.0.1.
func TestWebTools(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/search":
			q := r.URL.Query().Get("q")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"results":[{"title":"T %s","url":"https://example.com/1","content":"snippet"}]}`, q)
		case "/bin":
			w.Write([]byte{0, 1, 2, 3})
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("hello page"))
		}
	}))
	defer srv.Close()
	host := strings.Split(strings.TrimPrefix(srv.URL, "http://"), ":")[0]
	fetcher, err := tool.NewFetcher(tool.FetchPolicy{Allow: []string{host}})
	must(t, err)
	gate := newGate(t, permission.Config{Allow: []permission.Capability{permission.Fetch, permission.Search}})
	ts, err := tool.New(tool.Options{Sandbox: virtual.New(virtual.Options{}), Gate: gate, Fetcher: fetcher, Search: tool.SearXNG{BaseURL: srv.URL}})
	must(t, err)

	out := call(t, ts, "fetch", map[string]any{"url": srv.URL + "/page"})
	var f tool.FetchOutput
	must(t, json.Unmarshal([]byte(out.Text), &f))
	if out.IsError || f.Status != 200 || f.Body != "hello page" || f.ContentType != "text/plain" {
		t.Errorf("fetch: %+v", out)
	}
	out = call(t, ts, "fetch", map[string]any{"url": srv.URL + "/bin"})
	if !strings.Contains(out.Text, "binary content") {
		t.Errorf("binary body shown: %q", out.Text)
	}
	wantErrText(t, call(t, ts, "fetch", map[string]any{"url": "http://169.254.169.254/latest/meta-data/"}), "fetch refused")
	wantErrText(t, call(t, ts, "fetch", map[string]any{"url": "file:///etc/passwd"}), "fetch refused")
	loopName := strings.Replace(srv.URL, host, "localhost", 1)
	wantErrText(t, call(t, ts, "fetch", map[string]any{"url": loopName}), "fetch refused")

	out = call(t, ts, "web_search", map[string]any{"query": "go sandboxes"})
	var s struct {
		Results []struct{ Title, URL, Snippet string }
	}
	must(t, json.Unmarshal([]byte(out.Text), &s))
	if out.IsError || len(s.Results) != 1 || s.Results[0].Title != "T go sandboxes" {
		t.Errorf("search: %s", out.Text)
	}
	bad, err := tool.New(tool.Options{Sandbox: virtual.New(virtual.Options{}), Gate: gate, Search: tool.SearXNG{BaseURL: "http://127.0.0.1:1/" + url.PathEscape("x")}})
	must(t, err)
	wantErrText(t, call(t, bad, "web_search", map[string]any{"query": "q"}), "search failed: ")

	// Without the capability the tools are not offered, and not callable.
	ro, err := tool.New(tool.Options{Sandbox: virtual.New(virtual.Options{}), Gate: newGate(t, permission.Config{}), Fetcher: fetcher})
	must(t, err)
	wantErrText(t, call(t, ro, "fetch", map[string]any{"url": srv.URL}), "unknown tool")
}

// The fetch tool cuts the body at MaxBody bytes and drops a character
// the cut split before judging it: a text page longer than 200000 bytes
// whose cut falls inside a multi-byte character (any non-ASCII page, most
// of the time) is shown as text, not "[binary content, not shown]".
// Origin: security review.
func TestFetchTruncatedUTF8IsText(t *testing.T) {
	page := "a" + strings.Repeat("é", 150_000) // the 200000-byte cut splits an é
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(page))
	}))
	defer srv.Close()
	f, err := tool.NewFetcher(tool.FetchPolicy{Allow: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := toolsetWith(t, tool.Options{Sandbox: virtual.New(virtual.Options{}), Fetcher: f}, permission.Config{Mode: permission.Auto})
	raw, _ := json.Marshal(map[string]string{"url": srv.URL + "/"})
	out, err := callRaw(t, ts, "fetch", string(raw))
	if err != nil || out.IsError {
		t.Fatalf("fetch: %+v %v", out, err)
	}
	var res tool.FetchOutput
	if err := json.Unmarshal([]byte(out.Text), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || !strings.HasPrefix(res.Body, "aéé") {
		t.Fatalf("a truncated UTF-8 text page was not shown: truncated=%v body=%.60q", res.Truncated, res.Body)
	}
}
