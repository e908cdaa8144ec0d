package tool

import (
	"net/http"
	"testing"
)

// sameHostRedirect refuses "another host (or port) than the first
// request's": https://h/ -> http://h/ keeps URL.Host ("h") but would move
// the query from port 443 to port 80, in clear text, and is refused.
// Origin: review 11.
func TestSameHostRedirectRefusesDowngrade(t *testing.T) {
	first, _ := http.NewRequest("GET", "https://searx.example.org/search?q=secret", nil)
	next, _ := http.NewRequest("GET", "http://searx.example.org/search?q=secret", nil)
	if err := sameHostRedirect(next, []*http.Request{first}); err == nil {
		t.Error("https -> http redirect on the same host name followed: the query leaves TLS and goes to port 80")
	}
}

// The redirect check compares scheme, host name and effective port.
func TestSameHostRedirectOrigins(t *testing.T) {
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"https://searx.example.org/search", "https://searx.example.org:443/x", true},
		{"https://searx.example.org:443/search", "https://SEARX.example.org/x", true},
		{"http://127.0.0.1:8888/search", "http://127.0.0.1:8888/searxng/search", true},
		{"http://127.0.0.1:8888/search", "http://127.0.0.1:8889/search", false},
		{"https://searx.example.org/search", "https://evil.example.org/search", false},
		{"http://searx.example.org/search", "https://searx.example.org/search", true}, // an upgrade
		{"http://searx.example.org:8080/search", "https://searx.example.org/search", false},
		{"http://searx.example.org/search", "https://searx.example.org:8443/search", false},
	} {
		first, _ := http.NewRequest("GET", c.from, nil)
		next, _ := http.NewRequest("GET", c.to, nil)
		if err := sameHostRedirect(next, []*http.Request{first}); (err == nil) != c.ok {
			t.Errorf("%s -> %s: %v, want allowed %v", c.from, c.to, err, c.ok)
		}
	}
}
