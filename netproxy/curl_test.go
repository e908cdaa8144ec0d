package netproxy

import (
	"bytes"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
)

// TestProxyCurl: curl, a client we did not write, through each protocol.
func TestProxyCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		testenv.Missing(t, "curl is not installed (scripts/test.sh installs it): %v", err)
	}
	a := startOrigin(t, "127.0.0.2", "A", false)
	s := startOrigin(t, "127.0.0.4", "TLS", true)
	cert := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	res := newHostsResolver(testHosts + "\n127.0.0.4 secure.example.com\n")
	p, addr := startProxy(t, []string{"api.test", "secure.example.com", "127.0.0.2", "127.0.0.4"}, nil, Options{Resolver: res})

	tests := []struct {
		name     string
		args     []string
		wantOut  string // substring of stdout
		wantExit int
	}{
		{"http forward", []string{"-x", "http://" + addr, "http://api.test:" + a.port + "/curl"}, "A GET /curl host=api.test:" + a.port, 0},
		{"https through CONNECT", []string{"-x", "http://" + addr, "--cacert", cert, "https://secure.example.com:" + s.port + "/tls"}, "TLS GET /tls host=secure.example.com:", 0},
		{"socks5-hostname", []string{"--socks5-hostname", addr, "http://api.test:" + a.port + "/socks"}, "A GET /socks host=api.test:", 0},
		{"http forward refused", []string{"-x", "http://" + addr, "-w", "%{http_code}", "http://other.test:" + a.port + "/"}, "other.test:" + a.port + " is not in the network allow-list\n403", 0},
		{"CONNECT refused", []string{"-x", "http://" + addr, "https://wild.test:443/"}, "", 56},
		{"socks5-hostname refused", []string{"--socks5-hostname", addr, "http://denied.wild.test:80/"}, "", 97},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), curl, append([]string{"-sS", "--max-time", "20", "--noproxy", ""}, tt.args...)...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()} // no proxy variables
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			exit := 0
			if ee, ok := errors.AsType[*exec.ExitError](err); ok {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if exit != tt.wantExit || !strings.Contains(stdout.String(), tt.wantOut) {
				t.Errorf("curl %q: exit %d, stdout %q, stderr %q; want exit %d and %q", tt.args, exit, stdout.String(), stderr.String(), tt.wantExit, tt.wantOut)
			}
		})
	}
	want := []string{"other.test:" + a.port, "wild.test:443", "denied.wild.test:80"}
	if got := p.Blocked(); !slices.Equal(got, want) {
		t.Errorf("Blocked() = %q, want %q", got, want)
	}
}
