package virtual_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
)

var bg7 = context.Background()

// safeErrString formats err, turning a panic inside Error() into a marker,
// so a malformed error fails the test instead of crashing the binary.
func safeErrString(err error) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprintf("<Error() panicked: %v>", r)
		}
	}()
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestReview7ReadStatAfterCloseOrCancel: ReadStat must report ErrClosed
// after Close and the context's error when the context is done, like every
// other method. Today virtual.ReadStat rewraps Stat's error with
// errors.Unwrap, which is nil for the bare ErrClosed / context.Canceled
// Stat returns: the result is an *fs.PathError with a nil Err that matches
// nothing and whose Error() panics with a nil dereference.
// Right behaviour: return Stat's error unchanged when it is not a
// *fs.PathError (or wrap the error itself, not its Unwrap).
func TestReview7ReadStatAfterCloseOrCancel(t *testing.T) {
	cancelled, cancel := context.WithCancel(bg7)
	cancel()
	cases := []struct {
		name  string
		ctx   context.Context
		close bool
		want  error
	}{
		{"closed sandbox", bg7, true, sandbox.ErrClosed},
		{"cancelled context", cancelled, false, context.Canceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sb := virtual.New()
			if err := sb.Write(bg7, "f.txt", []byte("data")); err != nil {
				t.Fatal(err)
			}
			if c.close {
				_ = sb.Close()
			}
			// Through the method and through the package helper the
			// tools use.
			_, _, err1 := sb.ReadStat(c.ctx, "f.txt", 0)
			_, _, err2 := sandbox.ReadStat(c.ctx, sb, "f.txt", 0)
			for i, err := range []error{err1, err2} {
				msg := safeErrString(err)
				if !errors.Is(err, c.want) || strings.Contains(msg, "panicked") {
					t.Errorf("ReadStat #%d: error %s; want one matching %v", i, msg, c.want)
				}
			}
		})
	}
}

// TestReview7GlobNonUTF8Names: names are bytes; the local tier lists files
// whose names are not valid UTF-8 (its globFS bypasses fs.ValidPath for
// that reason). The virtual tier's memFS.get still calls fs.ValidPath, so
// Write/Read/Stat accept such a name but Glob never lists it: the two tiers
// disagree, and an agent cannot discover a file it can read.
// Right behaviour: validate with a UTF-8-agnostic check (no empty, ".",
// ".." element, no leading/trailing slash) instead of fs.ValidPath.
func TestReview7GlobNonUTF8Names(t *testing.T) {
	sb := virtual.New()
	names := []string{"\xff\xfe.txt", "bad\x80name", "dir\xc3/f.txt", "ok.txt"}
	for _, n := range names {
		if err := sb.Write(bg7, n, []byte("x")); err != nil {
			t.Fatalf("Write(%q): %v", n, err)
		}
		if _, err := sb.Read(bg7, n); err != nil {
			t.Fatalf("Read(%q): %v", n, err)
		}
	}
	cases := []struct {
		pattern string
		want    []string
	}{
		{"**", slices.Sorted(slices.Values(names))},
		{"*", []string{"bad\x80name", "ok.txt", "\xff\xfe.txt"}},
		{"*/", []string{"dir\xc3"}},
		{"dir*/*", []string{"dir\xc3/f.txt"}},
	}
	for _, c := range cases {
		got, err := sb.Glob(bg7, c.pattern)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Glob(%q) = %q, %v; want %q", c.pattern, got, err, c.want)
		}
	}
}

// TestReview7DotDotAboveAbsoluteRoot: in an absolute path "/.." is "/",
// as on any Unix ("/../x" is "/x", which sandbox.Clean's tests pin); the
// package doc said otherwise and now says this. A relative ".." past the
// root stays an escape.
func TestReview7DotDotAboveAbsoluteRoot(t *testing.T) {
	sb := virtual.New()
	if err := sb.Write(bg7, "x", []byte("X")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/../x", "/../../x", "/a/../../x"} {
		if data, err := sb.Read(bg7, p); err != nil || string(data) != "X" {
			t.Errorf("Read(%q) = %q, %v; want /x", p, data, err)
		}
	}
	// Relative ".." past the root is refused (pinned, correct today).
	for _, p := range []string{"..", "../x", "a/../../x"} {
		if _, err := sb.Read(bg7, p); !errors.Is(err, sandbox.ErrEscape) {
			t.Errorf("Read(%q): %v, want ErrEscape", p, err)
		}
	}
}

// TestReview7GlobBraceEscape: brace alternatives, escapes and character
// classes are not seen by the lexical Clean, so a pattern can spell ".."
// or an absolute path after expansion. Nothing outside "/" exists for the
// virtual tier, but the result must still be root-relative names only and
// never an error or a panic. Pins down correct behaviour.
func TestReview7GlobBraceEscape(t *testing.T) {
	sb := virtual.New()
	for _, f := range []string{"a/secret.txt", "secret.txt"} {
		if err := sb.Write(bg7, f, []byte("S")); err != nil {
			t.Fatal(err)
		}
	}
	for _, pat := range []string{"{..,a}/secret.txt", "{../a,a}/secret.txt", "a/{..,.}/secret.txt", "{/,}secret.txt", "..{,}", `\.\./secret.txt`, "[.][.]/secret.txt"} {
		got, err := sb.Glob(bg7, pat)
		if err != nil && !errors.Is(err, sandbox.ErrEscape) && !errors.Is(err, sandbox.ErrInvalidPath) {
			t.Errorf("Glob(%q): untyped error %v", pat, err)
		}
		for _, g := range got {
			if strings.HasPrefix(g, "/") || g == ".." || strings.HasPrefix(g, "../") || strings.Contains(g, "/../") || strings.HasSuffix(g, "/..") {
				t.Errorf("Glob(%q) returned non-root-relative %q", pat, g)
			}
		}
	}
}

// TestReview7ConcurrentMixed: writers, readers, stats, globs and a final
// Close race each other under -race; every read sees a whole payload, and
// once closed every operation is ErrClosed (never a panic on the nil map).
func TestReview7ConcurrentMixed(t *testing.T) {
	sb := virtual.New()
	payload := func(w int) []byte { return []byte(strings.Repeat(string(rune('a'+w)), 1000+w)) }
	var wg sync.WaitGroup
	stop := time.Now().Add(700 * time.Millisecond)
	errs := make(chan string, 100)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs <- fmt.Sprintf("worker %d panicked: %v", w, r)
				}
			}()
			for i := 0; time.Now().Before(stop); i++ {
				_ = sb.Write(bg7, "shared/f.bin", payload(w))
				_ = sb.Write(bg7, fmt.Sprintf("own%d/%d/x", w, i%20), []byte("x"))
				b, err := sb.Read(bg7, "shared/f.bin")
				if err == nil && (len(b) < 1000 || strings.Count(string(b), string(b[:1])) != len(b)) {
					errs <- fmt.Sprintf("torn read of %d bytes", len(b))
				}
				_, _, _ = sb.ReadStat(bg7, "shared/f.bin", 10)
				_, _ = sb.Stat(bg7, "shared")
				_, _ = sb.Glob(bg7, "**/x")
			}
			// After the sandbox closes (below), everything is ErrClosed.
		}()
	}
	time.Sleep(500 * time.Millisecond)
	_ = sb.Close()
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for name, err := range map[string]error{
		"Write": sb.Write(bg7, "y", nil),
		"Glob":  func() error { _, err := sb.Glob(bg7, "**"); return err }(),
		"Stat":  func() error { _, err := sb.Stat(bg7, "y"); return err }(),
	} {
		if !errors.Is(err, sandbox.ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
}

// TestReview7TotalMemoryBound: each Write is capped at MaxFileSize, but
// nothing caps the sum, so an agent on the virtual tier (the default for
// tools) can grow hutch's heap without limit by writing many large files
// and crash the whole host program. The contract's limits are "so that no
// single operation exhausts hutch's memory"; a sequence of them does.
// Right behaviour: a total-content budget for the sandbox (an option with a
// sane default, say 1 GiB) past which Write fails with ErrTooLarge.
// Skipped with -short: it allocates about 0.7 GiB.
func TestReview7TotalMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~0.7 GiB")
	}
	const budget = 512 << 20 // what this test accepts as a ceiling (2 x MaxFileSize)
	sb := virtual.New()
	defer sb.Close()
	chunk := make([]byte, 128<<20)
	total := 0
	for i := 0; total <= budget; i++ {
		err := sb.Write(bg7, fmt.Sprintf("big%d", i), chunk)
		if errors.Is(err, sandbox.ErrTooLarge) {
			return // bounded: good
		}
		if err != nil {
			t.Fatalf("Write #%d: %v", i, err)
		}
		total += len(chunk)
	}
	t.Errorf("the virtual sandbox holds %d MiB of file content and still accepts writes: its memory is unbounded", total>>20)
}
