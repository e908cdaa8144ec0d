package tool

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// ProgressFunc is told how a long call is going: message says what
// happened last (output arrived, so many files searched). It is called
// from the goroutine doing the work, so it must not block for long; a
// front end turns it into progress notifications (MCP) or a status line.
type ProgressFunc func(message string)

type progressKey struct{}

// WithProgress returns ctx carrying fn: tool calls made with it report
// their progress to fn while they run (the shell as output arrives, the
// searches as they go). Calls made without it report nothing.
func WithProgress(ctx context.Context, fn ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// progress reports message to ctx's ProgressFunc, if it has one.
func progress(ctx context.Context, message string) {
	if fn, _ := ctx.Value(progressKey{}).(ProgressFunc); fn != nil {
		fn(message)
	}
}

// outputProgress counts a command's output for its progress reports.
type outputProgress struct {
	ctx context.Context
	mu  sync.Mutex
	n   int64
}

// progressWriter is a live writer for a command's output streams that
// reports how much output there is so far to ctx's ProgressFunc; nil when
// ctx has none (so a call without progress pays for no live copy).
func progressWriter(ctx context.Context) io.Writer {
	if fn, _ := ctx.Value(progressKey{}).(ProgressFunc); fn == nil {
		return nil
	}
	return &outputProgress{ctx: ctx}
}

func (p *outputProgress) Write(b []byte) (int, error) {
	p.mu.Lock()
	p.n += int64(len(b))
	n := p.n
	p.mu.Unlock()
	progress(p.ctx, fmt.Sprintf("%d bytes of output so far", n))
	return len(b), nil
}
