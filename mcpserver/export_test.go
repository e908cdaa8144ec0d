package mcpserver

import (
	"context"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/config"
)

// OpenForTest builds a server Config from s as "hutch mcp" does: through
// package config, with Asker for ask mode. What it opened is closed when
// the test ends.
func OpenForTest(t testing.TB, s config.Settings) Config {
	t.Helper()
	s.Asker = Asker
	b, err := config.New(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return Config{Tools: b.Tools, StorePath: b.StorePath}
}

// SetProgressTimes shortens the progress notifications' intervals for a
// test: at least one every every, at most one per gap.
func SetProgressTimes(t testing.TB, every, gap time.Duration) {
	oldEvery, oldGap := progressEvery, progressGap
	progressEvery, progressGap = every, gap
	t.Cleanup(func() { progressEvery, progressGap = oldEvery, oldGap })
}
