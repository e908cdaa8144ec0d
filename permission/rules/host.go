package rules

import (
	"net"
	"net/url"
	"strconv"

	"github.com/hutchsandbox/hutch/permission"
)

// hostPart is the host and port a fetch reaches.
type hostPart struct {
	host string
	port int // 0: unknown, which no entry with a port matches
}

func (h hostPart) matches(r *compiled) bool {
	if h.host == "" {
		return false
	}
	if h.port == 0 {
		// No port: only an entry without one can match, and it
		// matches on any port.
		return r.host.Port() == 0 && r.host.Matches(h.host, 443)
	}
	return r.host.Matches(h.host, h.port)
}

// hostParts is the host of a fetch: Request.Host ("host:port"), or the
// host of Detail read as a URL (its scheme's port when it names none).
func hostParts(req permission.Request) []part {
	if req.Host != "" {
		if h, p, err := net.SplitHostPort(req.Host); err == nil {
			port, _ := strconv.Atoi(p)
			return []part{hostPart{host: h, port: port}}
		}
		return []part{hostPart{host: req.Host}}
	}
	u, err := url.Parse(req.Detail)
	if err != nil || u.Hostname() == "" {
		return []part{hostPart{}}
	}
	h, port := hostOf(u)
	return []part{hostPart{host: h, port: port}}
}

// hostOf is the host and port u reaches: its own port, else 443 for
// https and 80 for http (0 for another scheme).
func hostOf(u *url.URL) (string, int) {
	port, _ := strconv.Atoi(u.Port())
	if port == 0 {
		switch u.Scheme {
		case "https":
			port = 443
		case "http":
			port = 80
		}
	}
	return u.Hostname(), port
}
