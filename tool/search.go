package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits Search applies to what a backend returns.
const (
	SearchMaxResults = 8   // results kept
	SearchMaxSnippet = 300 // runes per snippet (and per title), "…" included
)

// searchMaxResponse bounds how much of a SearXNG response is read.
const searchMaxResponse = 4 << 20

// SearchResult is one web search hit.
type SearchResult struct {
	Title   string
	URL     string
	Snippet string
}

// SearchBackend runs web searches. Implementations return what they found;
// Search applies the limits.
type SearchBackend interface {
	Search(ctx context.Context, query string) ([]SearchResult, error)
}

// Search runs query on b and applies the limits: a blank query is an error,
// at most SearchMaxResults results are kept, titles and snippets are cut to
// SearchMaxSnippet runes (ending in "…" when cut) and made valid UTF-8. A
// backend failure is an error whose text starts with "search failed: ".
func Search(ctx context.Context, b SearchBackend, query string) ([]SearchResult, error) {
	if strings.TrimSpace(query) == "" {
		return nil, errors.New("search: the query is empty")
	}
	if b == nil {
		return nil, errors.New("search failed: no search backend is configured")
	}
	results, err := b.Search(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("search failed: %w", err)
	}
	if len(results) > SearchMaxResults {
		results = results[:SearchMaxResults]
	}
	out := make([]SearchResult, len(results))
	for i, r := range results {
		out[i] = SearchResult{
			Title:   searchCut(r.Title, SearchMaxSnippet),
			URL:     strings.TrimSpace(strings.ToValidUTF8(r.URL, "\uFFFD")),
			Snippet: searchCut(r.Snippet, SearchMaxSnippet),
		}
	}
	return out, nil
}

// searchCut makes s valid UTF-8, trims surrounding space and cuts it to at
// most limit runes, the last being "…" when it was cut.
func searchCut(s string, limit int) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	n := 0
	for i := range s {
		if n == limit-1 {
			return strings.TrimRight(s[:i], " \t\r\n") + "…"
		}
		n++
	}
	return s // unreachable: s has more than limit runes
}

// SearXNG queries a SearXNG instance through its JSON API
// (GET <BaseURL>/search?q=...&format=json). The instance must have the json
// format enabled (search.formats in its settings.yml).
type SearXNG struct {
	// BaseURL is the instance's address, such as "https://searx.example.org"
	// or "http://127.0.0.1:8888/searxng".
	BaseURL string
	// Client makes the request; nil means a client with a 10 s timeout
	// that follows redirects within the instance's host only.
	Client *http.Client
}

// searchDefaultClient follows redirects only within the instance's own
// host: the query (what the agent searches for) goes nowhere else.
var searchDefaultClient = &http.Client{Timeout: 10 * time.Second, CheckRedirect: sameHostRedirect}

// sameHostRedirect refuses a redirect to another scheme, host or port
// than the first request's (https://h to http://h would send the query
// in clear), and more than 5 in a row. The one change it follows is
// http://h to https://h on the default ports: an upgrade.
func sameHostRedirect(req *http.Request, via []*http.Request) error {
	from, to := originOf(via[0].URL), originOf(req.URL)
	upgrade := from == origin{"http", from.host, "80"} && to == origin{"https", from.host, "443"}
	switch {
	case len(via) >= 5:
		return errors.New("stopped after 5 redirects")
	case from != to && !upgrade:
		return fmt.Errorf("redirected to %s, not the configured instance's scheme, host and port: refused, the query goes to that instance only", req.URL.Redacted())
	}
	return nil
}

// origin is a URL's scheme, host name and port, lower case.
type origin struct{ scheme, host, port string }

// originOf is u's origin, with the scheme's default port when none is
// written.
func originOf(u *url.URL) origin {
	o := origin{strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()}
	if o.port == "" {
		o.port = map[string]string{"http": "80", "https": "443"}[o.scheme]
	}
	return o
}

// Search implements SearchBackend.
func (s SearXNG) Search(ctx context.Context, query string) ([]SearchResult, error) {
	base, err := url.Parse(s.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("searxng: bad base URL %q: want http(s)://host[/path]", s.BaseURL)
	}
	u := *base
	u.Path = strings.TrimRight(u.Path, "/") + "/search"
	u.RawPath = ""
	u.RawQuery = url.Values{"q": {query}, "format": {"json"}}.Encode()
	u.Fragment = ""

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("searxng: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	client := s.Client
	if client == nil {
		client = searchDefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, fmt.Errorf("searxng at %s: %v", base.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		hint := ""
		if resp.StatusCode == http.StatusForbidden {
			hint = " (is the json format enabled in the instance's search.formats?)"
		}
		return nil, fmt.Errorf("searxng at %s returned status %s%s", base.Redacted(), resp.Status, hint)
	}
	var body struct {
		Results []struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, searchMaxResponse)).Decode(&body); err != nil {
		return nil, fmt.Errorf("searxng at %s: malformed JSON response: %v", base.Redacted(), err)
	}
	out := make([]SearchResult, 0, len(body.Results))
	for _, r := range body.Results {
		out = append(out, SearchResult{Title: r.Title, URL: r.URL, Snippet: r.Content})
	}
	return out, nil
}
