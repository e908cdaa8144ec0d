package server_test

import (
	"crypto/tls"
	"errors"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox/remote"
	"github.com/hutchsandbox/hutch/server"
)

// Over TLS the client verifies the server; with client CAs the server
// verifies the client and the token is optional; a client without a
// certificate, or trusting another CA, opens nothing.
func TestServeTLSAndClientCertificates(t *testing.T) {
	p := testenv.NewPKI(t)
	t.Run("token over TLS", func(t *testing.T) {
		f := serve(t, server.Config{TLS: &tls.Config{Certificates: []tls.Certificate{p.Server}}})
		url := strings.Replace(f.url, "http://", "https://", 1)
		sb := f.connect(t, remote.Server{URL: url, Token: token, TLS: &tls.Config{RootCAs: p.Pool}})
		if _, err := sb.Stat(bg, "."); err != nil {
			t.Fatal(err)
		}
		if _, err := remote.New(bg, remote.Server{URL: url, Token: token}, remote.Options{}); err == nil {
			t.Fatal("a client that does not trust the server's CA connected")
		}
	})
	t.Run("client certificates", func(t *testing.T) {
		f := serveMTLS(t, p)
		url := strings.Replace(f.url, "http://", "https://", 1)
		sb, err := remote.New(bg, remote.Server{URL: url, TLS: &tls.Config{RootCAs: p.Pool, Certificates: []tls.Certificate{p.Client}}}, remote.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		if _, err := sb.Stat(bg, "."); err != nil {
			t.Fatal(err)
		}
		_, err = remote.New(bg, remote.Server{URL: url, TLS: &tls.Config{RootCAs: p.Pool}}, remote.Options{})
		if err == nil {
			t.Fatal("a client without a certificate connected")
		}
		if n := f.opened.Load(); n != 1 {
			t.Errorf("%d sessions opened, want 1", n)
		}
	})
	t.Run("plain text elsewhere than loopback", func(t *testing.T) {
		_, err := server.ListenAddr("0.0.0.0:0", server.Config{}, false)
		if !errors.Is(err, server.ErrInsecure) {
			t.Fatalf("ListenAddr 0.0.0.0 without TLS: %v", err)
		}
	})
}

// serveMTLS is a server that takes client certificates instead of a
// token.
func serveMTLS(t *testing.T, p testenv.PKI) *fixture {
	t.Helper()
	return serveWith(t, "127.0.0.1:0", server.Config{TLS: &tls.Config{Certificates: []tls.Certificate{p.Server}, ClientCAs: p.Pool, ClientAuth: tls.RequireAndVerifyClientCert}}, false)
}
