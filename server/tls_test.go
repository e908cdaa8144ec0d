package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/sandbox/remote"
	"github.com/hutchsandbox/hutch/server"
)

// pki is a throwaway CA with a server certificate for 127.0.0.1 and a
// client certificate.
type pki struct {
	pool           *x509.CertPool
	server, client tls.Certificate
}

func newPKI(t *testing.T) pki {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := key()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage, ip net.IP) tls.Certificate {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
		if ip != nil {
			tmpl.IPAddresses = []net.IP{ip}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pki{pool: pool, server: issue(2, x509.ExtKeyUsageServerAuth, net.ParseIP("127.0.0.1")), client: issue(3, x509.ExtKeyUsageClientAuth, nil)}
}

// Over TLS the client verifies the server; with client CAs the server
// verifies the client and the token is optional; a client without a
// certificate, or trusting another CA, opens nothing.
func TestServeTLSAndClientCertificates(t *testing.T) {
	p := newPKI(t)
	t.Run("token over TLS", func(t *testing.T) {
		f := serve(t, server.Config{TLS: &tls.Config{Certificates: []tls.Certificate{p.server}}})
		url := strings.Replace(f.url, "http://", "https://", 1)
		sb := f.connect(t, remote.Server{URL: url, Token: token, TLS: &tls.Config{RootCAs: p.pool}})
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
		sb, err := remote.New(bg, remote.Server{URL: url, TLS: &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{p.client}}}, remote.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		if _, err := sb.Stat(bg, "."); err != nil {
			t.Fatal(err)
		}
		_, err = remote.New(bg, remote.Server{URL: url, TLS: &tls.Config{RootCAs: p.pool}}, remote.Options{})
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
func serveMTLS(t *testing.T, p pki) *fixture {
	t.Helper()
	return serveWith(t, "127.0.0.1:0", server.Config{TLS: &tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert}}, false)
}
