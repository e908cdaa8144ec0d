package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/tool"
)

// searxngServer serves canned SearXNG answers and records the queries it
// received.
type searxngServer struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
	qs    []string
	fmts  []string
}

func newSearxngServer(t *testing.T, status int, body string) *searxngServer {
	t.Helper()
	s := &searxngServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.Path)
		s.qs = append(s.qs, r.URL.Query().Get("q"))
		s.fmts = append(s.fmts, r.URL.Query().Get("format"))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

// cannedResults is a SearXNG answer with n results whose snippets are long
// and multibyte.
func cannedResults(t *testing.T, n int) string {
	t.Helper()
	type res struct {
		Title   string `json:"title"`
		URL     string `json:"url"`
		Content string `json:"content"`
	}
	var out struct {
		Query   string `json:"query"`
		Results []res  `json:"results"`
	}
	out.Query = "x"
	for i := range n {
		out.Results = append(out.Results, res{
			Title:   fmt.Sprintf("Résultat %d", i),
			URL:     fmt.Sprintf("https://example.com/%d", i),
			Content: strings.Repeat("日本語のテキスト🙂é ", 60+i), // > 300 runes, 1–4 byte runes
		})
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSearXNG(t *testing.T) {
	srv := newSearxngServer(t, 200, cannedResults(t, 20))
	backend := tool.SearXNG{BaseURL: srv.URL}

	raw, err := backend.Search(t.Context(), "a&b=c d")
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 20 {
		t.Errorf("backend returned %d results, want all 20", len(raw))
	}

	got, err := tool.Search(t.Context(), backend, "a&b=c d")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 8 {
		t.Fatalf("Search returned %d results, want 8", len(got))
	}
	for i, r := range got {
		if r.Title != fmt.Sprintf("Résultat %d", i) || r.URL != fmt.Sprintf("https://example.com/%d", i) {
			t.Errorf("result %d = %q %q", i, r.Title, r.URL)
		}
		if n := utf8.RuneCountInString(r.Snippet); n > 300 || n < 250 {
			t.Errorf("result %d snippet has %d runes, want at most 300 (and not much less)", i, n)
		}
		if !utf8.ValidString(r.Snippet) {
			t.Errorf("result %d snippet is not valid UTF-8", i)
		}
		if !strings.HasSuffix(r.Snippet, "…") {
			t.Errorf("result %d snippet was cut without …: %q", i, r.Snippet[len(r.Snippet)-10:])
		}
		if !strings.HasPrefix(raw[i].Snippet, strings.TrimSuffix(r.Snippet, "…")) {
			t.Errorf("result %d snippet is not a prefix of the original", i)
		}
	}

	srv.mu.Lock()
	defer srv.mu.Unlock()
	for i := range srv.qs {
		if srv.paths[i] != "/search" || srv.qs[i] != "a&b=c d" || srv.fmts[i] != "json" {
			t.Errorf("server got path %q q %q format %q; want /search, %q, json", srv.paths[i], srv.qs[i], srv.fmts[i], "a&b=c d")
		}
	}
}

func TestSearXNGBaseURLPath(t *testing.T) {
	srv := newSearxngServer(t, 200, `{"results":[{"title":"t","url":"https://u","content":"c"}]}`)
	for _, base := range []string{srv.URL + "/searxng", srv.URL + "/searxng/"} {
		got, err := tool.SearXNG{BaseURL: base, Client: srv.Client()}.Search(t.Context(), "q")
		if err != nil || len(got) != 1 || got[0] != (tool.SearchResult{Title: "t", URL: "https://u", Snippet: "c"}) {
			t.Errorf("Search via %q = %+v, %v", base, got, err)
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, p := range srv.paths {
		if p != "/searxng/search" {
			t.Errorf("server got path %q, want /searxng/search", p)
		}
	}
}

func TestSearXNGErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   []string // substrings of the error from Search
	}{
		{"server error", 500, `{"error":"boom"}`, []string{"search failed: ", "500"}},
		{"forbidden", 403, `Forbidden`, []string{"search failed: ", "403", "json format"}},
		{"not found", 404, ``, []string{"search failed: ", "404 Not Found"}},
		{"malformed JSON", 200, `{"results":[{"title":`, []string{"search failed: ", "malformed JSON"}},
		{"HTML", 200, `<html>hello</html>`, []string{"search failed: ", "malformed JSON"}},
		{"results not a list", 200, `{"results":"x"}`, []string{"search failed: ", "malformed JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newSearxngServer(t, tt.status, tt.body)
			_, err := tool.Search(t.Context(), tool.SearXNG{BaseURL: srv.URL}, "q")
			if err == nil {
				t.Fatal("Search succeeded")
			}
			if !strings.HasPrefix(err.Error(), "search failed: ") {
				t.Errorf("error %q does not start with \"search failed: \"", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %q, want it to mention %q", err, w)
				}
			}
		})
	}
}

// The instance may redirect within itself; the query never follows a
// redirect to another host.
func TestSearXNGRedirects(t *testing.T) {
	other := newSearxngServer(t, 200, `{"results":[{"title":"elsewhere","url":"https://x.example/","content":""}]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away/search":
			http.Redirect(w, r, other.URL+"/search?"+r.URL.RawQuery, http.StatusFound)
		case "/moved/search":
			http.Redirect(w, r, "/search?"+r.URL.RawQuery, http.StatusMovedPermanently)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"results":[{"title":"here","url":"https://h.example/","content":""}]}`)
		}
	}))
	t.Cleanup(srv.Close)
	rs, err := tool.Search(t.Context(), tool.SearXNG{BaseURL: srv.URL + "/moved"}, "secret plans")
	if err != nil || len(rs) != 1 || rs[0].Title != "here" {
		t.Errorf("a redirect within the instance: %+v %v", rs, err)
	}
	_, err = tool.Search(t.Context(), tool.SearXNG{BaseURL: srv.URL + "/away"}, "secret plans")
	other.mu.Lock()
	defer other.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "not the configured instance's") || len(other.qs) != 0 {
		t.Errorf("a redirect to another host: %v, queries there %q; want it refused before any", err, other.qs)
	}
}

func TestSearXNGUnreachable(t *testing.T) {
	srv := newSearxngServer(t, 200, `{}`)
	base := srv.URL
	srv.Close() // nothing listens there now
	_, err := tool.Search(t.Context(), tool.SearXNG{BaseURL: base}, "q")
	if err == nil || !strings.HasPrefix(err.Error(), "search failed: ") {
		t.Errorf("error = %v, want search failed", err)
	}
	for _, base := range []string{"", "searx.example", "ftp://x/", "http://"} {
		_, err := tool.Search(t.Context(), tool.SearXNG{BaseURL: base}, "q")
		if err == nil || !strings.HasPrefix(err.Error(), "search failed: ") || !strings.Contains(err.Error(), "base URL") {
			t.Errorf("BaseURL %q: error = %v, want search failed: bad base URL", base, err)
		}
	}
}

func TestSearXNGClientTimeout(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) })
	client := &http.Client{Timeout: 200 * time.Millisecond}
	_, err := tool.Search(t.Context(), tool.SearXNG{BaseURL: srv.URL, Client: client}, "q")
	if err == nil || !strings.HasPrefix(err.Error(), "search failed: ") {
		t.Errorf("error = %v, want search failed", err)
	}
}

// fakeSearch is a SearchBackend returning fixed results or an error.
type fakeSearch struct {
	results []tool.SearchResult
	err     error
	calls   int
}

func (f *fakeSearch) Search(ctx context.Context, query string) ([]tool.SearchResult, error) {
	f.calls++
	return f.results, f.err
}

func TestSearchLimits(t *testing.T) {
	long := strings.Repeat("a", 299) + "é" + "tail"
	tests := []struct {
		name    string
		in      tool.SearchResult
		snippet string
	}{
		{"short", tool.SearchResult{Snippet: "short"}, "short"},
		{"exactly 300", tool.SearchResult{Snippet: strings.Repeat("é", 300)}, strings.Repeat("é", 300)},
		{"301", tool.SearchResult{Snippet: strings.Repeat("é", 301)}, strings.Repeat("é", 299) + "…"},
		{"emoji", tool.SearchResult{Snippet: strings.Repeat("🙂", 400)}, strings.Repeat("🙂", 299) + "…"},
		{"mixed", tool.SearchResult{Snippet: long}, strings.Repeat("a", 299) + "…"},
		{"invalid UTF-8", tool.SearchResult{Snippet: "ok \xff\xfe end"}, "ok \uFFFD end"},
		{"spaces", tool.SearchResult{Snippet: "  padded \n"}, "padded"},
		{"empty", tool.SearchResult{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tool.Search(t.Context(), &fakeSearch{results: []tool.SearchResult{tt.in}}, "q")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Snippet != tt.snippet {
				t.Errorf("snippet = %q, want %q", got[0].Snippet, tt.snippet)
			}
			if !utf8.ValidString(got[0].Snippet) || utf8.RuneCountInString(got[0].Snippet) > 300 {
				t.Errorf("snippet invalid or too long: %d runes", utf8.RuneCountInString(got[0].Snippet))
			}
		})
	}

	t.Run("count", func(t *testing.T) {
		for _, n := range []int{0, 1, 8, 9, 100} {
			in := make([]tool.SearchResult, n)
			got, err := tool.Search(t.Context(), &fakeSearch{results: in}, "q")
			if err != nil {
				t.Fatal(err)
			}
			if want := min(n, 8); len(got) != want {
				t.Errorf("%d results in, %d out; want %d", n, len(got), want)
			}
		}
	})
}

func TestSearchQueryAndFailure(t *testing.T) {
	for _, q := range []string{"", " ", "\t\n"} {
		b := &fakeSearch{}
		if _, err := tool.Search(t.Context(), b, q); err == nil || !strings.Contains(err.Error(), "empty") {
			t.Errorf("Search(%q) error = %v, want an empty query error", q, err)
		}
		if b.calls != 0 {
			t.Errorf("Search(%q) called the backend", q)
		}
	}
	boom := errors.New("backend exploded")
	_, err := tool.Search(t.Context(), &fakeSearch{err: boom}, "q")
	if err == nil || err.Error() != "search failed: backend exploded" || !errors.Is(err, boom) {
		t.Errorf("error = %v, want search failed: backend exploded (wrapping it)", err)
	}
	if _, err := tool.Search(t.Context(), nil, "q"); err == nil || !strings.HasPrefix(err.Error(), "search failed: ") {
		t.Errorf("nil backend: error = %v", err)
	}
}
