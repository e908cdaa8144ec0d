package virtual_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
)

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(*testing.T) sandbox.Sandbox { return virtual.New() }, sandboxtest.Options{})
}

// The files' total size is bounded; overwriting a file frees what it held.
func TestMaxBytes(t *testing.T) {
	sb := virtual.NewWithMax(10)
	write := func(p string, n int) error { return sb.Write(context.Background(), p, make([]byte, n)) }
	if err := write("a", 6); err != nil {
		t.Fatal(err)
	}
	if err := write("b", 6); !errors.Is(err, sandbox.ErrTooLarge) || !strings.Contains(err.Error(), "over its 10 byte limit") {
		t.Fatalf("12 bytes in a 10 byte sandbox: %v", err)
	}
	if err := write("a", 1); err != nil {
		t.Fatal(err)
	}
	if err := write("b", 6); err != nil {
		t.Fatalf("after shrinking a: %v", err)
	}
	if err := write("b", 9); err != nil {
		t.Fatalf("overwriting b within the limit: %v", err)
	}
}
