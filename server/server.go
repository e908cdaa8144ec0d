// Package server serves a sandbox to a hutch on another machine: `hutch
// serve` is this package behind flags. The remote tier (package
// sandbox/remote) is its client; both speak hutch's helper stream
// (framed, multiplexed operations over one byte stream), the protocol the
// container tier's helper speaks.
//
// The guard runs where the files are: every operation is the served
// sandbox's own method, so the served tier's guarantees (the isolated
// tier's policy, the local tier's path guard) hold exactly as they do for
// a program on that machine. The server adds none and removes none; it
// does not authenticate a stream (whatever reaches standard input is the
// client: ssh, kubectl exec or docker exec authenticate it).
package server

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/streamserver"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Served names what a stream serves, for the client's Instructions and
// `hutch check`.
type Served struct {
	// Tier is the served sandbox's tier name ("isolated").
	Tier string
	// Summary says, in one line, what commands may do there (the
	// policy's summary); it is added to the sandbox's Instructions.
	Summary string
}

// ServeStream serves sb over one stream — in and out, as `hutch serve
// --stdio` has them — until in ends (nil), ctx ends (nil), or the client
// breaks the protocol (an error saying how). Operations still running
// then are cancelled, and ServeStream returns once they have ended. It
// does not close sb.
func ServeStream(ctx context.Context, in io.Reader, out io.Writer, sb sandbox.Sandbox, what Served) error {
	return streamserver.Serve(ctx, in, out, backend{sb}, hello(sb, what))
}

// hello is what the server says of sb when a session begins.
func hello(sb sandbox.Sandbox, what Served) wire.Hello {
	h := wire.Hello{Root: sb.Root(), Tier: what.Tier, Instructions: sb.Instructions()}
	if what.Summary != "" && !strings.Contains(h.Instructions, what.Summary) {
		h.Instructions = strings.TrimSpace(h.Instructions + " " + what.Summary)
	}
	if sc, ok := sb.(sandbox.Scoper); ok {
		h.Scope = sc.Scope()
	}
	for _, f := range []sandbox.Feature{sandbox.FeatureRead, sandbox.FeatureWrite, sandbox.FeatureGlob, sandbox.FeatureStat, sandbox.FeatureShell, sandbox.FeatureManage} {
		if sb.Supports(f) {
			h.Features = append(h.Features, f)
		}
	}
	return h
}

// backend runs a stream's operations on a sandbox.
type backend struct{ sb sandbox.Sandbox }

func (b backend) ReadStat(ctx context.Context, p string, max int64) ([]byte, sandbox.FileInfo, error) {
	return sandbox.ReadStat(ctx, b.sb, p, max)
}

func (b backend) Write(ctx context.Context, p string, data []byte) error {
	return b.sb.Write(ctx, p, data)
}

func (b backend) Stat(ctx context.Context, p string) (sandbox.FileInfo, error) {
	return b.sb.Stat(ctx, p)
}

func (b backend) Glob(ctx context.Context, pattern string) ([]string, error) {
	return b.sb.Glob(ctx, pattern)
}

func (b backend) List(ctx context.Context, p string) ([]sandbox.FileInfo, error) {
	return b.sb.List(ctx, p)
}

func (b backend) Search(ctx context.Context, req sandbox.SearchRequest) (sandbox.SearchResult, error) {
	s, ok := b.sb.(sandbox.Searcher)
	if !ok {
		return sandbox.SearchResult{}, fmt.Errorf("search: %w", sandbox.ErrUnsupported)
	}
	return s.Search(ctx, req)
}

func (b backend) Mkdir(ctx context.Context, p string) error { return b.sb.Mkdir(ctx, p) }

func (b backend) Remove(ctx context.Context, p string, recursive bool) error {
	return b.sb.Remove(ctx, p, recursive)
}

func (b backend) Rename(ctx context.Context, from, to string) error {
	return b.sb.Rename(ctx, from, to)
}

// Exec runs the request on the sandbox, its output streamed live within
// the client's credit. When the sandbox cut its live copy short (a client
// that stopped crediting past LiveGrace), the response carries the
// sandbox's own tails, so the client's result is what the tier captured.
func (b backend) Exec(ctx context.Context, req wire.StreamRequest, sio streamserver.Stdio) wire.StreamResponse {
	cmd := sandbox.Command{Dir: string(req.Dir), Timeout: time.Duration(req.TimeoutMS) * time.Millisecond, MaxOutput: req.MaxOutput}
	for _, a := range req.Argv {
		cmd.Args = append(cmd.Args, string(a))
	}
	if len(req.Env) > 0 {
		cmd.Env = map[string]string{}
		for _, kv := range req.Env {
			k, v, ok := strings.Cut(string(kv), "=")
			if !ok {
				return wire.StreamResponse{Err: wire.ToWire(fmt.Errorf("%w: environment entry without '='", sandbox.ErrConfig))}
			}
			cmd.Env[k] = v
		}
	}
	if r := sio.Reader(); r != nil {
		cmd.Stdin = r
	}
	stdout, stderr := sio.Writer(wire.FrameStdout), sio.Writer(wire.FrameStderr)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	res, err := b.sb.Exec(ctx, cmd)
	if err != nil {
		return wire.StreamResponse{Err: wire.ToWire(err)}
	}
	out := wire.StreamResponse{
		Status:   &wire.Status{Exited: res.Signal == "", ExitCode: res.ExitCode},
		TimedOut: res.TimedOut, Limit: res.Limit, Signal: res.Signal, Blocked: res.Blocked, BlockedOmitted: res.BlockedOmitted,
		StdoutSize: res.StdoutSize, StderrSize: res.StderrSize,
	}
	if stdout.Sent() < res.StdoutSize {
		out.Stdout = res.Stdout
	}
	if stderr.Sent() < res.StderrSize {
		out.Stderr = res.Stderr
	}
	return out
}
