package isolated_test

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
)

// Review 16: commit 29f8639 carries names byte-exact across the helper
// protocol (helper/words.go) and makes WireError keep Op and Path so a
// path error is a *fs.PathError on the host; but WireError's Path (and
// Msg) are plain JSON strings, which Response.MarshalJSON does not quote:
// a failed Read("nope\xff") comes back as a PathError for "nope\uFFFD",
// another name, and the tools show the model that name.
func TestReview16PathErrorNamesThePathAsked(t *testing.T) {
	e := newEnv(t)
	pol := e.pol
	pol.Dir = e.work
	sb := a2Session(t, pol)
	_, err := sb.Read(bg, "nope\xff")
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Read of a missing file: %T %v; want a *fs.PathError matching ErrNotFound", err, err)
	}
	if pe.Path != "nope\xff" {
		t.Errorf("Read(%q): the error names %q", "nope\xff", pe.Path)
	}
}
