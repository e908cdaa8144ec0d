package mcpserver

import (
	"context"
	"testing"

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
