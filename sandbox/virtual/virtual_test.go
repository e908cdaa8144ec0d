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
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
	"github.com/hutchsandbox/hutch/sandbox/virtual"
)

var bg = context.Background()

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(*testing.T) sandbox.Sandbox { return virtual.New(virtual.Options{}) }, sandboxtest.Options{})
}

// The files' total size is bounded; overwriting a file frees what it held.
func TestMaxBytes(t *testing.T) {
	sb := virtual.New(virtual.Options{MaxBytes: 10})
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

// ReadStat reports ErrClosed after Close and the context's error when
// the context is done, like every other method, through the method and
// through sandbox.ReadStat: Stat's error comes back as it is, never as an
// *fs.PathError with a nil Err (which would match nothing and whose
// Error() would panic).
// Origin: review 7.
func TestReadStatAfterCloseOrCancel(t *testing.T) {
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	cases := []struct {
		name  string
		ctx   context.Context
		close bool
		want  error
	}{
		{"closed sandbox", bg, true, sandbox.ErrClosed},
		{"cancelled context", cancelled, false, context.Canceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sb := virtual.New(virtual.Options{})
			if err := sb.Write(bg, "f.txt", []byte("data")); err != nil {
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

// Names are bytes: Glob lists files whose names are not valid UTF-8, as
// the local tier does (validName is fs.ValidPath without its UTF-8
// check), so an agent can discover every file it can read.
// Origin: review 7.
func TestGlobListsNonUTF8Names(t *testing.T) {
	sb := virtual.New(virtual.Options{})
	names := []string{"\xff\xfe.txt", "bad\x80name", "dir\xc3/f.txt", "ok.txt"}
	for _, n := range names {
		if err := sb.Write(bg, n, []byte("x")); err != nil {
			t.Fatalf("Write(%q): %v", n, err)
		}
		if _, err := sb.Read(bg, n); err != nil {
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
		got, err := sb.Glob(bg, c.pattern)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Glob(%q) = %q, %v; want %q", c.pattern, got, err, c.want)
		}
	}
}

// In an absolute path "/.." is "/", as on any Unix ("/../x" is "/x",
// which sandbox.Clean's tests pin). A relative ".." past the root is an
// escape.
// Origin: review 7.
func TestDotDotAboveAbsoluteRoot(t *testing.T) {
	sb := virtual.New(virtual.Options{})
	if err := sb.Write(bg, "x", []byte("X")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/../x", "/../../x", "/a/../../x"} {
		if data, err := sb.Read(bg, p); err != nil || string(data) != "X" {
			t.Errorf("Read(%q) = %q, %v; want /x", p, data, err)
		}
	}
	// Relative ".." past the root is refused.
	for _, p := range []string{"..", "../x", "a/../../x"} {
		if _, err := sb.Read(bg, p); !errors.Is(err, sandbox.ErrEscape) {
			t.Errorf("Read(%q): %v, want ErrEscape", p, err)
		}
	}
}

// Writers, readers, stats, globs and a final Close race each other under
// -race; every read sees a whole payload, and once closed every operation
// is ErrClosed (never a panic on the nil map).
// Origin: review 7.
func TestConcurrentOperationsAndClose(t *testing.T) {
	sb := virtual.New(virtual.Options{})
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
				_ = sb.Write(bg, "shared/f.bin", payload(w))
				_ = sb.Write(bg, fmt.Sprintf("own%d/%d/x", w, i%20), []byte("x"))
				b, err := sb.Read(bg, "shared/f.bin")
				if err == nil && (len(b) < 1000 || strings.Count(string(b), string(b[:1])) != len(b)) {
					errs <- fmt.Sprintf("torn read of %d bytes", len(b))
				}
				_, _, _ = sb.ReadStat(bg, "shared/f.bin", 10)
				_, _ = sb.Stat(bg, "shared")
				_, _ = sb.Glob(bg, "**/x")
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
		"Write": sb.Write(bg, "y", nil),
		"Glob":  func() error { _, err := sb.Glob(bg, "**"); return err }(),
		"Stat":  func() error { _, err := sb.Stat(bg, "y"); return err }(),
	} {
		if !errors.Is(err, sandbox.ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
}

// A sandbox made by New holds at most MaxBytes of file content in all,
// not only MaxFileSize per Write: past it Write fails with ErrTooLarge,
// so an agent on the virtual tier (the default for tools) cannot grow
// hutch's heap without limit by writing many large files.
// Skipped with -short: it allocates about 0.7 GiB.
// Origin: review 7.
func TestTotalMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~0.7 GiB")
	}
	const budget = 512 << 20 // what this test accepts as a ceiling (2 x MaxFileSize)
	sb := virtual.New(virtual.Options{})
	defer sb.Close()
	chunk := make([]byte, 128<<20)
	total := 0
	for i := 0; total <= budget; i++ {
		err := sb.Write(bg, fmt.Sprintf("big%d", i), chunk)
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
