package local_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

func newLocal(t *testing.T) *local.Sandbox { return newLocalB(t) }

func newLocalB(tb testing.TB) *local.Sandbox {
	tb.Helper()
	sb, err := local.New(tb.TempDir(), local.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sb.Close() })
	return sb
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Sandbox { return newLocal(t) }, sandboxtest.Options{HostProcesses: true})
}

// killedWriteEnv, set to a directory, makes this test binary a process
// that writes a large file into it through the local tier and is killed
// in the middle (see TestWriteKilledMidwayLeavesNoTemporaryFile).
const killedWriteEnv = "HUTCH_TEST_KILLED_WRITE"

// stallingReader gives n zero bytes, says "started" on stdout at its
// first read, and then never returns: the write is under way for as long
// as the process lives.
type stallingReader struct {
	n       int64
	started bool
}

func (r *stallingReader) Read(p []byte) (int, error) {
	if !r.started {
		r.started = true
		fmt.Println("started")
	}
	if r.n <= 0 {
		select {} // the killer comes
	}
	n := min(int64(len(p)), r.n)
	clear(p[:n])
	r.n -= n
	return int(n), nil
}

// A write killed with SIGKILL left its ".hutch-<hex>.tmp" (the content
// so far) in the directory forever. The content now goes to a file with
// no name until it is whole, so a kill leaves nothing.
func TestWriteKilledMidwayLeavesNoTemporaryFile(t *testing.T) {
	if dir := os.Getenv(killedWriteEnv); dir != "" {
		sb, err := local.New(dir, local.Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = sb.WriteFrom(context.Background(), "big.bin", &stallingReader{n: 64 << 20}, 0)
		t.Fatalf("the write ended: %v", err)
	}
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(self, "-test.run=^TestWriteKilledMidwayLeavesNoTemporaryFile$", "-test.count=1")
	c.Env = append(os.Environ(), killedWriteEnv+"="+dir)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	defer c.Process.Kill()
	started := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if s.Text() == "started" {
				started <- true
			}
		}
		close(started)
	}()
	select {
	case ok := <-started:
		if !ok {
			t.Fatal("the writer ended before it started writing")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the writer did not start within 20 s")
	}
	// Until the 64 MiB are in the file (the reader then stalls).
	time.Sleep(500 * time.Millisecond)
	if err := c.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("the killed write left %s in the directory", e.Name())
	}
}

// Write removes the temporary files killed writes left (where it had to
// name them, or between naming and renaming) in each directory it writes
// to, once a minute old: exactly its own names, its user's, regular
// files; nothing else.
func TestWriteSweepsOnlyItsOwnStaleTemporaryFiles(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute)
	put := func(name string, mtime time.Time) string {
		p := filepath.Join(sub, name)
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return name
	}
	stale := put(".hutch-0123456789abcdef.tmp", old)
	keep := []string{
		put(".hutch-fedcba9876543210.tmp", time.Now()), // a write may be renaming it now
		put(".hutch-0123456789ABCDEF.tmp", old),        // not hutch's hex
		put(".hutch-0123456789abcde.tmp", old),
		put(".hutch-0123456789abcdef.tmp.bak", old),
		put("x.hutch-0123456789abcdef.tmp", old),
		put("notes.tmp", old),
	}
	if err := os.Mkdir(filepath.Join(sub, ".hutch-00000000000000aa.tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, ".hutch-00000000000000aa.tmp") // a directory
	if os.Geteuid() == 0 {
		other := put(".hutch-1111111111111111.tmp", old)
		if err := os.Chown(filepath.Join(sub, other), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		keep = append(keep, other) // another user's
	}
	sb, err := local.New(root, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sb.Write(bg, "sub/f.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(sub, stale)); err == nil {
		t.Errorf("the stale %s is still there", stale)
	}
	for _, n := range keep {
		if _, err := os.Lstat(filepath.Join(sub, n)); err != nil {
			t.Errorf("%s was removed: %v", n, err)
		}
	}
}
