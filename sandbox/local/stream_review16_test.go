package local_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
)

// Review 16: sandbox.Streamer promises "the checks and errors of
// ReadStat", and ReadStat (like the init's ReadTo) fails with ErrTooLarge
// when the file grows past sandbox.MaxFileSize while it is read. The
// local tier's ReadStream hands fn io.LimitReader(f, MaxFileSize) and
// returns fn's nil: a file that grew is cut silently at 256 MiB, and a
// read_file line window on it counts "of N lines" on the cut file (the
// isolated tier says ErrTooLarge for the same file).
func TestReview16LocalReadStreamCutsAGrowingFileSilently(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "log")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(sandbox.MaxFileSize); err != nil { // sparse
		t.Fatal(err)
	}
	f.Close()
	sb, err := local.New(dir, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	var got int64
	_, err = sb.ReadStream(context.Background(), "log", func(r io.Reader) error {
		// It grows while it is read (a log being written).
		if err := os.Truncate(name, sandbox.MaxFileSize+4096); err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, r)
		got = n
		return err
	})
	if !errors.Is(err, sandbox.ErrTooLarge) {
		t.Errorf("ReadStream of a file that grew past MaxFileSize while read: %v after %d bytes; want ErrTooLarge, as ReadStat", err, got)
	}
}
