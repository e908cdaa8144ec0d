package tool

import "context"

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
