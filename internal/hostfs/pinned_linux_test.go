package hostfs

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// openNoLinks (the fallback where openat2 is refused) opens a directory
// reached through no link, and refuses one behind a link at any place on
// the way, as openat2's RESOLVE_NO_SYMLINKS does.
func TestOpenNoLinksRefusesEveryLink(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a/b/c"), 0o755)
	os.Symlink("a", filepath.Join(root, "l"))
	os.Symlink("b", filepath.Join(root, "a/lb"))
	at, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(at)
	for dir, ok := range map[string]bool{".": true, "a": true, "a/b/c": true, "./a//b": true, "l": false, "l/b": false, "a/lb": false, "a/lb/c": false, "a/../a": false, "missing": false} {
		fd, err := openNoLinks(at, dir)
		if (err == nil) != ok {
			t.Errorf("openNoLinks(%q): %v, want opened: %v", dir, err, ok)
		}
		if err == nil {
			unix.Close(fd)
		}
	}
}
