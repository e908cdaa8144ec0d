package isolated_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// hostsResolver is a hosts file in memory: names the tests own, mapped to
// the loopback addresses their servers listen on.
type hostsResolver map[string]string

func (h hostsResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := h[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// serveOn starts an HTTP server on addr ("127.0.0.2:0") that answers
// "hello from ADDR" and, at /big, 100 MiB of zeros; it returns the port.
func serveOn(t *testing.T, addr string, useTLS bool) int {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s (127.0.0.0/8 is not all loopback here?): %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello from %s", l.Addr()) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(100<<20))
		_, _ = io.CopyN(w, zeros{}, 100<<20)
	})
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return l.Addr().(*net.TCPAddr).Port
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// An allow-list is the only way out of the sandbox: curl, wget and Python
// reach listed hosts through the proxy; everything else is refused and
// reported in the result; direct connections have no route.
func TestNetworkAllowList(t *testing.T) {
	e := newEnv(t)
	for _, tool := range []string{"curl", "wget"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, "%s is missing: run scripts/test.sh, which installs it", tool)
		}
	}
	port := serveOn(t, "127.0.0.2:0", false)
	tlsPort := serveOn(t, "127.0.0.2:0", true)
	otherPort := serveOn(t, "127.0.0.3:0", false)
	p := strconv.Itoa(port)
	res := hostsResolver{
		"allowed.test": "127.0.0.2", "api.wild.test": "127.0.0.2", "wild.test": "127.0.0.2",
		"deny.wild.test": "127.0.0.2", "ported.test": "127.0.0.2", "other.test": "127.0.0.3",
		"rebind.test": "127.0.0.3",
	}
	pol := e.pol.Extend(policy.Policy{
		Hosts: []string{"allowed.test", "*.wild.test", "ported.test:" + p, "rebind.test",
			// The servers' address is named, so names resolving to it pass
			// the private-address guard; 127.0.0.3 is not.
			"127.0.0.2"},
		DenyHosts: []string{"deny.wild.test"},
	})
	sb, err := isolated.New(bg, isolated.Options{Policy: pol, Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	run := func(t *testing.T, script string) sandbox.Result {
		t.Helper()
		r, err := sb.Exec(bg, sandbox.Command{Shell: script, Timeout: 60 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return r
	}
	hello := "hello from 127.0.0.2:" + p
	for _, c := range []struct{ name, script, want string }{
		{"curl", "curl -sS http://allowed.test:" + p + "/", hello},
		{"wget", "wget -qO- http://allowed.test:" + p + "/", hello},
		{"python urllib", `/usr/bin/python3 -c 'import urllib.request as u; print(u.urlopen("http://allowed.test:` + p + `/").read().decode(), end="")'`, hello},
		{"https through CONNECT", "curl -sSk https://allowed.test:" + strconv.Itoa(tlsPort) + "/", "hello from 127.0.0.2:" + strconv.Itoa(tlsPort)},
		{"socks5", "curl -sS --noproxy '' --socks5-hostname 127.0.0.1:3128 http://allowed.test:" + p + "/", hello},
		{"wildcard subdomain", "curl -sS http://api.wild.test:" + p + "/", hello},
		{"listed port", "curl -sS http://ported.test:" + p + "/", hello},
		{"listed address", "curl -sS http://127.0.0.2:" + p + "/", hello},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.script)
			if r.ExitCode != 0 || string(r.Stdout) != c.want || len(r.Blocked) != 0 {
				t.Errorf("exit %d, out %q (want %q), err %q, blocked %q", r.ExitCode, r.Stdout, c.want, r.Stderr, r.Blocked)
			}
		})
	}
	for _, c := range []struct{ name, script, blocked string }{
		{"unlisted host", "curl -sS http://other.test:" + strconv.Itoa(otherPort) + "/", "other.test:" + strconv.Itoa(otherPort)},
		{"another port", "curl -sS http://ported.test:" + strconv.Itoa(tlsPort) + "/", "ported.test:" + strconv.Itoa(tlsPort)},
		{"wildcard apex", "curl -sS http://wild.test:" + p + "/", "wild.test:" + p},
		{"deny wins", "curl -sS http://deny.wild.test:" + p + "/", "deny.wild.test:" + p},
		{"name resolving to an unlisted private address", "curl -sS http://rebind.test:" + strconv.Itoa(otherPort) + "/", "rebind.test:" + strconv.Itoa(otherPort)},
		{"unlisted address", "curl -sS http://127.0.0.3:" + strconv.Itoa(otherPort) + "/", "127.0.0.3:" + strconv.Itoa(otherPort)},
		{"https to an unlisted host", "curl -sSk https://other.test:" + strconv.Itoa(otherPort) + "/", "other.test:" + strconv.Itoa(otherPort)},
		{"socks5 to an unlisted host", "curl -sS --noproxy '' --socks5-hostname 127.0.0.1:3128 http://other.test:" + strconv.Itoa(otherPort) + "/", "other.test:" + strconv.Itoa(otherPort)},
		{"python to an unlisted host", `/usr/bin/python3 -c 'import urllib.request as u; u.urlopen("http://other.test:` + strconv.Itoa(otherPort) + `/")'`, "other.test:" + strconv.Itoa(otherPort)},
	} {
		t.Run("refused: "+c.name, func(t *testing.T) {
			r := run(t, c.script)
			if strings.Contains(string(r.Stdout), "hello") || !slices.Equal(r.Blocked, []string{c.blocked}) {
				t.Errorf("exit %d, out %q, err %q, blocked %q (want [%s])", r.ExitCode, r.Stdout, r.Stderr, r.Blocked, c.blocked)
			}
		})
	}
	t.Run("refusals reported once each, in order", func(t *testing.T) {
		o := "other.test:" + strconv.Itoa(otherPort)
		r := run(t, "curl -s http://other.test:"+strconv.Itoa(otherPort)+"/; curl -s http://wild.test:"+p+"/; curl -s http://other.test:"+strconv.Itoa(otherPort)+"/; true")
		if want := []string{o, "wild.test:" + p}; !slices.Equal(r.Blocked, want) {
			t.Errorf("blocked %q, want %q", r.Blocked, want)
		}
		if r = run(t, "true"); len(r.Blocked) != 0 {
			t.Errorf("the next command inherits refusals: %q", r.Blocked)
		}
	})
	t.Run("direct connections have no route", func(t *testing.T) {
		var udpGot atomic.Int64
		uc, err := net.ListenPacket("udp", "127.0.0.2:0")
		if err != nil {
			t.Fatal(err)
		}
		defer uc.Close()
		go func() {
			buf := make([]byte, 64)
			for {
				if _, _, err := uc.ReadFrom(buf); err != nil {
					return
				}
				udpGot.Add(1)
			}
		}()
		v6 := ""
		if l6, err := net.Listen("tcp6", "[::1]:0"); err == nil {
			defer l6.Close()
			go func() {
				for {
					c, err := l6.Accept()
					if err != nil {
						return
					}
					_, _ = c.Write([]byte("hello over v6"))
					c.Close()
				}
			}()
			v6 = fmt.Sprintf("curl -sS --noproxy '*' --max-time 5 http://[::1]:%d/ && echo v6-reached; ", l6.Addr().(*net.TCPAddr).Port)
		}
		udpPort := uc.LocalAddr().(*net.UDPAddr).Port
		script := v6 + fmt.Sprintf(`curl -sS --noproxy '*' --max-time 5 http://127.0.0.2:%[1]s/ && echo tcp-reached
curl -sS --noproxy '*' --max-time 5 http://192.0.2.1/ && echo public-reached
/usr/bin/python3 - <<'EOF'
import socket
for fam, addr in ((socket.AF_INET, ("127.0.0.2", %[2]d)), (socket.AF_INET, ("192.0.2.1", 53))):
    s = socket.socket(fam, socket.SOCK_DGRAM)
    try:
        s.sendto(b"x", addr)
    except OSError as e:
        print("udp", addr[0], e.errno)
EOF
ip -o addr 2>/dev/null | grep -v ' lo ' || true`, p, udpPort)
		r := run(t, script)
		out := string(r.Stdout)
		if strings.Contains(out, "reached") || strings.Contains(out, "hello") {
			t.Errorf("a direct connection left the sandbox: %q %q", out, r.Stderr)
		}
		time.Sleep(200 * time.Millisecond)
		if n := udpGot.Load(); n != 0 {
			t.Errorf("%d UDP datagrams reached the host", n)
		}
		if !strings.Contains(out, "udp 192.0.2.1 101") { // ENETUNREACH: no route at all
			t.Errorf("UDP to a public address: want 'network unreachable', got %q %q", out, r.Stderr)
		}
	})
	t.Run("concurrent connections", func(t *testing.T) {
		r := run(t, `for i in $(seq 30); do curl -s http://allowed.test:`+p+`/ > /tmp/c$i & done; wait; grep -l 'hello from' /tmp/c* | wc -l`)
		if strings.TrimSpace(string(r.Stdout)) != "30" {
			t.Errorf("30 concurrent requests: %q %q", r.Stdout, r.Stderr)
		}
	})
	t.Run("a connection flood does not use up the host's descriptors", func(t *testing.T) {
		fds := func() int {
			ents, _ := os.ReadDir("/proc/self/fd")
			return len(ents)
		}
		before := fds()
		done := make(chan sandbox.Result, 1)
		go func() {
			r, _ := sb.Exec(bg, sandbox.Command{Args: []string{"/usr/bin/python3", "-c",
				"import socket, time\ns = [socket.create_connection(('127.0.0.1', 3128)) for _ in range(600)]\nprint(len(s), flush=True)\ntime.sleep(2)"},
				Timeout: 60 * time.Second})
			done <- r
		}()
		peak := 0
		for {
			select {
			case r := <-done:
				if strings.TrimSpace(string(r.Stdout)) != "600" {
					t.Errorf("the flood did not run: %q %q", r.Stdout, r.Stderr)
				}
				// The host held connections (the control) but never many
				// more than the cap.
				if peak < isolated.MaxProxyConns/2 || peak > isolated.MaxProxyConns+64 {
					t.Errorf("host descriptors rose by %d at most during 600 connections; want about %d", peak, isolated.MaxProxyConns)
				}
				return
			case <-time.After(20 * time.Millisecond):
				peak = max(peak, fds()-before)
			}
		}
	})
	t.Run("100 MiB transfer", func(t *testing.T) {
		r := run(t, "curl -sS http://allowed.test:"+p+"/big | wc -c")
		if strings.TrimSpace(string(r.Stdout)) != strconv.Itoa(100<<20) {
			t.Errorf("transfer: %q %q", r.Stdout, r.Stderr)
		}
	})
	t.Run("tls certificate of the real server", func(t *testing.T) {
		// A CONNECT tunnel is end to end: the client sees the server's
		// own certificate, not one made by the proxy.
		r := run(t, "curl -sS -v -k https://allowed.test:"+strconv.Itoa(tlsPort)+"/ 2>&1 | grep -i 'subject:' || true")
		if !strings.Contains(strings.ToLower(string(r.Stdout)), "acme") { // httptest's certificate
			t.Errorf("certificate seen through the tunnel: %q", r.Stdout)
		}
	})
}

// With no resolver given, names go through the host's resolver, so the
// real /etc/hosts counts: "localhost" reaches a server on 127.0.0.1 only
// when an entry also names that loopback address (the rebinding guard).
func TestNetworkAllowSystemResolver(t *testing.T) {
	e := newEnv(t)
	if _, err := exec.LookPath("curl"); err != nil {
		testenv.Missing(t, "curl is missing: run scripts/test.sh, which installs it")
	}
	addrs, err := net.DefaultResolver.LookupNetIP(bg, "ip4", "localhost")
	if err != nil || !slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a.Unmap() == netip.MustParseAddr("127.0.0.1") }) {
		t.Skipf("this host's resolver does not map localhost to 127.0.0.1: %v %v", addrs, err)
	}
	port := strconv.Itoa(serveOn(t, "127.0.0.1:0", false))
	for _, c := range []struct {
		hosts []string
		works bool
	}{
		{[]string{"localhost:" + port, "127.0.0.1"}, true},
		{[]string{"localhost:" + port}, false},
	} {
		sb, err := isolated.New(bg, isolated.Options{Policy: e.pol.Extend(policy.Policy{Hosts: c.hosts})})
		if err != nil {
			t.Fatal(err)
		}
		r, err := sb.Exec(bg, sandbox.Command{Shell: "curl -sS http://localhost:" + port + "/", Timeout: 30 * time.Second})
		sb.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := strings.HasPrefix(string(r.Stdout), "hello from 127.0.0.1:")
		if got != c.works || (!c.works && !slices.Equal(r.Blocked, []string{"localhost:" + port})) {
			t.Errorf("hosts %q: out %q, err %q, blocked %q; want reached=%v", c.hosts, r.Stdout, r.Stderr, r.Blocked, c.works)
		}
	}
}
