package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/bearer"
	"github.com/hutchsandbox/hutch/sandbox"
)

// NewToken returns a fresh bearer token: 32 random bytes, base64url.
func NewToken() (string, error) { return bearer.New() }

// HTTPAuth is how the streamable HTTP transport authenticates clients: the
// address it serves ("" for stdio), the bearer token's file, and the
// explicit opt-out. A front end fills it from its settings (config.Settings
// HTTP, HTTPTokenFile and HTTPNoAuth).
type HTTPAuth struct {
	Addr      string
	TokenFile string
	NoAuth    bool
}

// HTTPToken picks the bearer token the streamable HTTP transport demands,
// from a (none for stdio, where Addr is ""):
//
//   - NoAuth: no token (""), and a note saying that anyone who can reach
//     the address can use every tool;
//   - TokenFile naming an existing file: its content, trimmed. The file
//     must be a regular file of this user's that neither group nor others
//     can read or write, and the token 16 to 4096 printable ASCII
//     characters without spaces;
//   - TokenFile naming a missing file: a new token, written there with
//     mode 0600 (never over an existing file);
//   - neither: a new token, which the note shows (the operator hands it to
//     the client).
//
// Errors match sandbox.ErrConfig and say how to fix the file. HTTPToken does
// not guard against a token file that a process of the same user changes.
func HTTPToken(a HTTPAuth) (token, note string, err error) {
	switch {
	case a.Addr == "" && (a.TokenFile != "" || a.NoAuth):
		return "", "", fmt.Errorf("%w: --http-token-file and --http-no-auth apply to --http", sandbox.ErrConfig)
	case a.NoAuth && a.TokenFile != "":
		return "", "", fmt.Errorf("%w: --http-token-file and --http-no-auth contradict each other: keep one", sandbox.ErrConfig)
	case a.Addr == "":
		return "", "", nil // stdio: nothing to authenticate
	case a.NoAuth:
		return "", "no authentication (--http-no-auth): anyone who can reach the address can use every tool", nil
	case a.TokenFile == "":
		if token, err = NewToken(); err != nil {
			return "", "", err
		}
		return token, "clients send the header \"Authorization: Bearer " + token + "\" (--http-token-file keeps a token out of this log)", nil
	}
	token, created, err := bearer.Load(a.TokenFile)
	if err != nil {
		return "", "", err
	}
	if created {
		return token, "wrote a new token to " + a.TokenFile + " (mode 0600); clients send it as \"Authorization: Bearer TOKEN\"", nil
	}
	return token, "clients send the token in " + a.TokenFile + " as \"Authorization: Bearer TOKEN\"", nil
}

// RequireToken wraps h so that a request reaches it only with the header
// "Authorization: Bearer TOKEN" (the scheme in any case). Anything else is
// answered 401 with a one-line reason; the token is never taken from the
// URL. Comparison takes the same time for every wrong token. An empty token
// returns h unchanged.
func RequireToken(h http.Handler, token string) http.Handler {
	if token == "" {
		return h
	}
	want := bearer.NewChecker(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !want.Allows(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hutch"`)
			http.Error(w, "hutch: this MCP server needs the header \"Authorization: Bearer TOKEN\" with the token it was started with", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Bounds for HTTP peers that send nothing, holding a connection open: a
// request head must arrive within headerTimeout, and a kept connection is
// closed after idleTimeout without a request. There is no read or write
// timeout, which would cut event streams. Variables for the tests.
var (
	headerTimeout = 10 * time.Second
	idleTimeout   = 2 * time.Minute
)

// ServeHTTP serves cfg's tools over the streamable HTTP transport on addr
// (host:port; a bare ":port" binds 127.0.0.1, never every interface) until
// ctx ends. Every request needs token (see RequireToken) unless token is
// "". Lines for the operator (the address, a warning when the address is
// not a loopback one) go to log. When ctx ends, the server stops, the
// running tool calls are cancelled (their commands killed), and ServeHTTP
// returns once they have returned.
func ServeHTTP(ctx context.Context, cfg Config, addr, token string, log io.Writer) error {
	cfg.stop = &stopper{ctx: ctx}
	h, err := Handler(cfg)
	if err != nil {
		return err
	}
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: RequireToken(h, token), ReadHeaderTimeout: headerTimeout, IdleTimeout: idleTimeout}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		fmt.Fprintf(log, "hutch: note: %s is reachable from other machines and the transport has no TLS: the token and every call cross the network in clear text; put a TLS proxy in front or bind 127.0.0.1\n", ln.Addr())
	}
	fmt.Fprintf(log, "hutch: serving MCP on http://%s/\n", ln.Addr())
	err = srv.Serve(ln)
	if ctx.Err() != nil {
		cfg.stop.wait() // the calls running end with ctx
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
