package config

import (
	"fmt"
	"net/url"

	"github.com/hutchsandbox/hutch/tool"
)

// fetcher is the fetch tool's fetcher for s.FetchAllow; nil when empty.
func fetcher(s Settings) (*tool.Fetcher, error) {
	if len(s.FetchAllow) == 0 {
		return nil, nil
	}
	return tool.NewFetcher(tool.FetchPolicy{Allow: s.FetchAllow})
}

// search is the web_search backend for s.SearchURL; nil when empty.
func search(s Settings) (tool.SearchBackend, error) {
	if s.SearchURL == "" {
		return nil, nil
	}
	if u, err := url.Parse(s.SearchURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: search URL %q: want http(s)://host[:port][/path] of a SearXNG instance", ErrConfig, s.SearchURL)
	}
	return tool.SearXNG{BaseURL: s.SearchURL}, nil
}
