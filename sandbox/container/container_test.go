package container_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox/container"
)

// HelperNote says, before any container starts, when operations will not
// take the helper's fast path in every image — a dynamically linked helper
// (hutch built with cgo), or none — with the cost and the fix; a static
// helper, or one turned off on purpose, gets no note.
func TestHelperNoteSaysWhenTheFastPathIsLost(t *testing.T) {
	static, err := exec.LookPath("busybox") // busybox-static, as scripts/docker-up.sh installs it
	if err != nil {
		testenv.Missing(t, "a static binary to stand for a static helper (busybox-static): %v", err)
	}
	for _, c := range []struct {
		name string
		o    container.Options
		says []string
	}{
		{"dynamic helper", container.Options{Helper: "/bin/sh"}, []string{"dynamically linked", "/bin/sh", "100x slower", "CGO_ENABLED=0 go build ./cmd/hutch"}},
		{"static helper", container.Options{Helper: static}, nil},
		{"helper off", container.Options{NoHelper: true}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.Image, c.o.Program = "img", "true" // New starts nothing
			sb, err := container.New(context.Background(), c.o)
			if err != nil {
				t.Fatal(err)
			}
			note := sb.HelperNote()
			if len(c.says) == 0 && note != "" {
				t.Errorf("HelperNote = %q, want none", note)
			}
			for _, w := range c.says {
				if !strings.Contains(note, w) {
					t.Errorf("HelperNote = %q, want it to say %q", note, w)
				}
			}
		})
	}
}
