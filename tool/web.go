package tool

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/hutchsandbox/hutch/permission"
)

type fetchArgs struct {
	URL string `json:"url"`
}

// FetchOutput is the fetch tool's structured result.
type FetchOutput struct {
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Body        string `json:"body"`
	Truncated   bool   `json:"truncated"`
}

func fetchURL(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a fetchArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if strings.TrimSpace(a.URL) == "" {
		return failf("fetch needs a url"), nil
	}
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Fetch, Tool: "fetch", Detail: a.URL, Host: urlHost(a.URL)}, a); !ok {
		return out, err
	}
	res, err := ts.opts.Fetcher.Fetch(ctx, a.URL)
	if err != nil {
		if ctx.Err() != nil {
			return Output{}, ctx.Err()
		}
		return failf("%v", err), nil
	}
	b := res.Body
	if res.Truncated { // the cut may have split the last character
		b = trimPartialRune(b)
	}
	body := string(b)
	if isBinary(b) {
		body = "[binary content, not shown]"
	}
	return structured(FetchOutput{URL: res.URL, Status: res.Status, ContentType: res.ContentType, Body: body, Truncated: res.Truncated}), nil
}

type searchArgs struct {
	Query string `json:"query"`
}

func webSearch(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a searchArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if strings.TrimSpace(a.Query) == "" {
		return failf("web_search needs a query"), nil
	}
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Search, Tool: "web_search", Detail: a.Query}, a); !ok {
		return out, err
	}
	results, err := Search(ctx, ts.opts.Search, a.Query)
	if err != nil {
		if ctx.Err() != nil {
			return Output{}, ctx.Err()
		}
		return failf("%v", err), nil
	}
	items := make([]WebSearchItem, len(results))
	for i, r := range results {
		items[i] = WebSearchItem(r)
	}
	return structured(WebSearchResult{Results: items}), nil
}

// WebSearchResult is web_search's structured result.
type WebSearchResult struct {
	Results []WebSearchItem `json:"results"`
}

// WebSearchItem is one search result.
type WebSearchItem struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
}

// urlHost is the host and port a URL reaches, as rules match it
// (permission.Request.Host): "example.com:443", the scheme's port when
// the URL names none; "" for a URL without a host.
func urlHost(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[strings.ToLower(u.Scheme)]
	}
	if _, err := strconv.Atoi(port); err != nil {
		return u.Hostname()
	}
	return net.JoinHostPort(u.Hostname(), port)
}
