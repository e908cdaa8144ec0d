//go:build linux

package sysprog

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
)

// hostOnlyEntries lists the root-only entries this kernel has (every Linux
// has some: kmsg, slabinfo...), none of the per-process directories, and
// /proc/sys/net's only when asked; and in /etc a file and a directory
// only root may read, which a test run as root makes there. Found by a
// red-team pass: a daemon's key in /etc (Docker's key.json) was readable
// to a sandbox of a hutch running as root.
func TestHostOnlyEntriesListsRootOnlyEntries(t *testing.T) {
	var secrets []string
	if os.Geteuid() == 0 {
		for i, mode := range []os.FileMode{0o600, 0o700 | os.ModeDir} {
			p := fmt.Sprintf("/etc/hutch-test-secret-%d-%d", os.Getpid(), i)
			var err error
			if mode.IsDir() {
				err = os.Mkdir(p, mode.Perm())
			} else {
				err = os.WriteFile(p, []byte("secret"), mode.Perm())
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(p) })
			secrets = append(secrets, p)
		}
	}
	own, err := hostOnlyEntries(false, procWalkers)
	if err != nil {
		t.Fatal(err)
	}
	hostNet, err := hostOnlyEntries(true, procWalkers)
	if err != nil {
		t.Fatal(err)
	}
	if len(own) == 0 {
		t.Fatal("no root-only entry found in /proc")
	}
	for _, p := range own {
		if rest, ok := strings.CutPrefix(p, "/proc/"); ok && rest[0] >= '0' && rest[0] <= '9' || strings.HasPrefix(p, "/proc/sys/net") {
			t.Errorf("listed %s", p)
		}
	}
	for _, p := range secrets {
		if !slices.Contains(own, p) || !slices.Contains(hostNet, p) {
			t.Errorf("%s, which only root may read, is not listed", p)
		}
	}
	if i := slices.IndexFunc(own, func(p string) bool { return p == "/etc/passwd" || p == "/etc/hostname" }); i >= 0 {
		t.Errorf("listed %s, which everyone may read", own[i])
	}
	for _, p := range own {
		if !slices.Contains(hostNet, p) {
			t.Errorf("%s is listed without the host's network but not with it", p)
		}
	}
}

// The walk lists the same entries however it is spread over goroutines.
func TestHostOnlyEntriesSameOnOneGoroutine(t *testing.T) {
	spread, err := hostOnlyEntries(true, 3)
	if err != nil {
		t.Fatal(err)
	}
	one, err := hostOnlyEntries(true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spread, one) {
		t.Errorf("the walk on several goroutines listed %q, on one %q", spread, one)
	}
}

// A walk that cannot read an entry fails, whole: a list it left short
// would leave root-only entries readable in the sandbox. Here it runs out
// of descriptors partway down (a host holding many connections).
func TestHostOnlyProcFailsRatherThanListShort(t *testing.T) {
	if !testenv.InChild(t, "true") {
		return
	}
	// The runtime takes two descriptors (epoll, eventfd) for its poller at
	// the first pollable open or timer, which a runtime goroutine may or
	// may not have made by now: a pipe makes it happen here.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr.Close()
	pw.Close()
	// The limit bounds descriptor numbers, not their count, and the
	// inherited ones may leave gaps: fill every free number under a limit
	// above the highest, then free two. That is room for /proc and one
	// directory below it, not for the walk down /proc/sys/kernel/....
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	high := 0
	for _, e := range open {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > high {
			high = n
		}
	}
	lim := unix.Rlimit{Cur: uint64(high + 4), Max: uint64(high + 4)}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var fill []int
	for {
		fd, err := unix.Dup(0)
		if err != nil {
			if !errors.Is(err, unix.EMFILE) {
				t.Fatal(err)
			}
			break
		}
		fill = append(fill, fd)
	}
	if len(fill) < 2 {
		t.Fatalf("only %d descriptors free under a limit of %d", len(fill), lim.Cur)
	}
	unix.Close(fill[len(fill)-1])
	unix.Close(fill[len(fill)-2])
	list, err := hostOnlyEntries(false, procWalkers)
	if err == nil || !strings.Contains(err.Error(), "walking /proc") || !errors.Is(err, unix.EMFILE) {
		t.Fatalf("a walk out of descriptors: %v (%d entries)", err, len(list))
	}
	w := &ProcWalk{done: make(chan struct{})}
	w.out, w.err = hostOnlyEntries(false, procWalkers)
	close(w.done)
	if _, err := w.Result(policy.Policy{}); err == nil {
		t.Fatal("a walk's failure is not its result's")
	}
}

// The walk is paid at every sandbox's start.
func BenchmarkHostOnlyEntries(b *testing.B) {
	for b.Loop() {
		_, _ = hostOnlyEntries(false, procWalkers)
	}
}

// A process's later walks of /etc come from its last one while nothing
// there changed, and walk again when something did: a file made
// root-only (chmod), a new root-only file, a chmod through another hard
// link of a file (which no watch on /etc sees), a new directory.
func TestEtcWalkCachedUntilSomethingChanges(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (only root walks, and makes files in /etc)")
	}
	dir := fmt.Sprintf("/etc/hutch-test-watch-%d", os.Getpid())
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	open := dir + "/open"
	os.WriteFile(open, []byte("x"), 0o644)
	walk := func() ([]string, int) {
		t.Helper()
		list, err := hostOnlyEntries(false, procWalkers)
		if err != nil {
			t.Fatal(err)
		}
		etcWatched.mu.Lock()
		defer etcWatched.mu.Unlock()
		return list, etcWatched.walks
	}
	walk() // a process's first walk sets no watch; its second does
	_, n0 := walk()
	list, n1 := walk()
	if n1 != n0 || slices.Contains(list, open) {
		t.Fatalf("a second walk with nothing changed: %d full walks after %d, %s listed: %v", n1, n0, open, slices.Contains(list, open))
	}
	steps := []struct {
		name   string
		change func() error
		hidden string
	}{
		{"chmod 0600", func() error { return os.Chmod(open, 0o600) }, open},
		{"a new root-only file", func() error { return os.WriteFile(dir+"/new", []byte("k"), 0o600) }, dir + "/new"},
		{"a new root-only directory", func() error { return os.Mkdir(dir+"/d", 0o700) }, dir + "/d"},
	}
	// A hard link outside /etc, on its filesystem: a chmod through it is
	// seen by no watch on /etc.
	other := fmt.Sprintf("/var/tmp/hutch-test-link-%d", os.Getpid())
	os.WriteFile(dir+"/linked", []byte("l"), 0o644)
	if err := os.Link(dir+"/linked", other); err == nil {
		t.Cleanup(func() { os.Remove(other) })
		walk() // the link is noted (the walk before it saw one name only)
		steps = append(steps, struct {
			name   string
			change func() error
			hidden string
		}{"chmod through another hard link", func() error { return os.Chmod(other, 0o600) }, dir + "/linked"})
	} else {
		t.Logf("no hard link of /etc from /var/tmp here (%v): that step is not tried", err)
	}
	for _, s := range steps {
		if err := s.change(); err != nil {
			t.Fatal(err)
		}
		if list, _ := walk(); !slices.Contains(list, s.hidden) {
			t.Errorf("after %s, %s is not listed", s.name, s.hidden)
		}
	}
}
