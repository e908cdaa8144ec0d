package sandbox_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

var sentinels = map[string]error{
	"ErrEscape":      sandbox.ErrEscape,
	"ErrNotFound":    sandbox.ErrNotFound,
	"ErrUnsupported": sandbox.ErrUnsupported,
	"ErrConfig":      sandbox.ErrConfig,
	"ErrInvalidPath": sandbox.ErrInvalidPath,
	"ErrIsDir":       sandbox.ErrIsDir,
	"ErrNotDir":      sandbox.ErrNotDir,
	"ErrTooLarge":    sandbox.ErrTooLarge,
	"ErrClosed":      sandbox.ErrClosed,
}

func TestErrNotFound(t *testing.T) {
	if !errors.Is(sandbox.ErrNotFound, fs.ErrNotExist) {
		t.Error("ErrNotFound does not match fs.ErrNotExist")
	}
	if !errors.Is(sandbox.ErrNotFound, sandbox.ErrNotFound) {
		t.Error("ErrNotFound does not match itself")
	}
	wrapped := tierkit.PathError("read", "x/y", sandbox.ErrNotFound)
	if !errors.Is(wrapped, fs.ErrNotExist) || !errors.Is(wrapped, sandbox.ErrNotFound) {
		t.Errorf("wrapped ErrNotFound %v does not match fs.ErrNotExist and ErrNotFound", wrapped)
	}
	deeper := fmt.Errorf("tool failed: %w", wrapped)
	if !errors.Is(deeper, fs.ErrNotExist) {
		t.Errorf("doubly wrapped ErrNotFound does not match fs.ErrNotExist")
	}
	// It is not every fs error.
	for _, e := range []error{fs.ErrExist, fs.ErrPermission, fs.ErrInvalid, fs.ErrClosed} {
		if errors.Is(wrapped, e) {
			t.Errorf("ErrNotFound matches %v", e)
		}
	}
	if sandbox.ErrNotFound.Error() != "no such file or directory" {
		t.Errorf("ErrNotFound = %q", sandbox.ErrNotFound)
	}
}

func TestSentinelsDistinct(t *testing.T) {
	for n1, e1 := range sentinels {
		if e1 == nil || e1.Error() == "" {
			t.Errorf("%s is nil or has no message", n1)
			continue
		}
		for n2, e2 := range sentinels {
			if n1 != n2 && errors.Is(e1, e2) {
				t.Errorf("%s matches %s", n1, n2)
			}
		}
	}
}

func TestPathError(t *testing.T) {
	tests := []struct {
		op, path string
		err      error
		want     string
	}{
		{"read", "../x", sandbox.ErrEscape, "read ../x: path escapes the sandbox root"},
		{"write", "a/b.txt", sandbox.ErrNotDir, "write a/b.txt: not a directory"},
		{"stat", "gone", sandbox.ErrNotFound, "stat gone: no such file or directory"},
		{"glob", "[", sandbox.ErrInvalidPath, "glob [: invalid path"},
		{"read", "", sandbox.ErrClosed, "read : sandbox is closed"},
	}
	for _, tt := range tests {
		err := tierkit.PathError(tt.op, tt.path, tt.err)
		if err.Error() != tt.want {
			t.Errorf("PathError(%q, %q, %v) = %q, want %q", tt.op, tt.path, tt.err, err, tt.want)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Op != tt.op || pe.Path != tt.path || pe.Err != tt.err {
			t.Errorf("PathError(%q, %q, %v) = %#v, want an *fs.PathError with those fields", tt.op, tt.path, tt.err, err)
		}
		for name, s := range sentinels {
			if got, want := errors.Is(err, s), errors.Is(tt.err, s); got != want {
				t.Errorf("errors.Is(PathError(..., %v), %s) = %v, want %v", tt.err, name, got, want)
			}
		}
	}
}
