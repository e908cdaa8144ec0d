package sysprog

import (
	"os"
	"slices"
	"testing"
)

// forgetLastWalks makes this process one that has walked nothing yet,
// and restores its state when the test ends.
func forgetLastWalks(t *testing.T) {
	t.Helper()
	lastWalks.mu.Lock()
	saved := lastWalks.list
	savedOK := lastWalks.ok
	reset := func() {
		lastWalks.list, lastWalks.ok = [2][]string{}, [2]bool{}
		lastWalks.read, lastWalks.onDisk = [2]bool{}, [2][]string{}
	}
	reset()
	lastWalks.mu.Unlock()
	t.Cleanup(func() {
		lastWalks.mu.Lock()
		reset()
		lastWalks.list, lastWalks.ok = saved, savedOK
		lastWalks.mu.Unlock()
	})
}

// A process's last walk is kept on disk, for the network setting it was
// made for, and a fresh process takes it as its guess; a file that no
// walk could have written is no guess at all.
func TestLastWalkOutlivesTheProcess(t *testing.T) {
	forgetLastWalks(t)
	for i := range 2 {
		if err := os.Remove(walkFile(i)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	list := []string{"/proc/kmsg", "/proc/sys/kernel/cad_pid", "/proc/timer_list"}
	setLastWalk(true, list)
	fi, err := os.Stat(walkFile(walkIndex(true)))
	if err != nil {
		t.Fatalf("the walk was not kept: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the kept walk's mode is %v, want 0600", fi.Mode().Perm())
	}
	forgetLastWalks(t)
	if got, ok := lastWalk(true); !ok || !slices.Equal(got, list) {
		t.Fatalf("a fresh process's guess: %q (%v), want %q", got, ok, list)
	}
	if got, ok := lastWalk(false); ok {
		t.Fatalf("a walk with the host's network was taken for one without: %q", got)
	}
	for _, c := range []struct{ name, contents string }{
		{"outside /proc", "/proc/kmsg\n/etc/shadow\n"},
		{"a dot-dot", "/proc/../etc/shadow\n"},
		{"a relative path", "proc/kmsg\n"},
		{"unsorted", "/proc/timer_list\n/proc/kmsg\n"},
		{"twice the same", "/proc/kmsg\n/proc/kmsg\n"},
		{"an empty line", "/proc/kmsg\n\n/proc/timer_list\n"},
		{"a NUL byte", "/proc/km\x00sg\n"},
		{"torn (no last newline)", "/proc/kmsg\n/proc/tim"},
		{"empty", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			forgetLastWalks(t)
			if err := os.WriteFile(walkFile(walkIndex(false)), []byte(c.contents), 0o600); err != nil {
				t.Fatal(err)
			}
			if got, ok := lastWalk(false); ok {
				t.Fatalf("%q was taken as a guess: %q", c.contents, got)
			}
		})
	}
}
