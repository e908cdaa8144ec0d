package tool

import (
	"context"
	"encoding/json"
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
	if out, ok, err := ts.gate(ctx, permission.Fetch, "fetch", a.URL, a); !ok {
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
	if out, ok, err := ts.gate(ctx, permission.Search, "web_search", a.Query, a); !ok {
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
