package remote

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/wire"
)

// writeSizes records the size of each write.
type writeSizes []int

func (w *writeSizes) Write(p []byte) (int, error) { *w = append(*w, len(p)); return len(p), nil }

// A copy in's archive goes out in whole chunks, not a write per header
// and per file: each write is a frame there and a credit back.
func TestPackHostWritesWholeChunks(t *testing.T) {
	dir := t.TempDir()
	for i := range 300 {
		name := filepath.Join(dir, fmt.Sprintf("d%d", i%5), fmt.Sprintf("f%d", i))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(strings.Repeat("x", 700)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := walkHost(dir)
	if err != nil {
		t.Fatal(err)
	}
	var w writeSizes
	if err := packHost(dir, ents, &w); err != nil {
		t.Fatal(err)
	}
	if len(w) < 2 {
		t.Fatalf("%d writes: %v", len(w), w)
	}
	for i, n := range w[:len(w)-1] {
		if n != wire.StreamChunk {
			t.Fatalf("write %d of %d is %d bytes, want %d", i, len(w), n, wire.StreamChunk)
		}
	}
}
