package sysprog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// hostOnlyEntries lists, from the running kernel's /proc and the host's
// /etc (walkRoots), every entry that the host's unprivileged users cannot
// read: a file without the read bit for others, or a directory without
// read and search for others (its contents are then not walked). When
// hutch runs as root, the sandbox's root is the host's, which owns them:
// hidden, they stay as closed to it as to any other user. In /proc the
// per-process directories are not walked, and under /proc/sys, which the
// sandbox sees read-only, a file nobody may read (write-only controls) is
// left alone; elsewhere those are listed too. /proc/sys/net is walked
// only with the host's network (withHostNet): otherwise the sandbox has a
// network namespace of its own, whose entries are its own. Nothing here
// is a list kept by hand: a kernel that adds a root-only file, or an
// administrator who puts a key in /etc, gets it hidden. Symbolic links
// are passed over (the sandbox's /proc resolves its own; one in /etc
// leads to where its target's own mode and place decide).
//
// The walk (about 730 entries and 180 directories of /proc here, and
// 1400 entries and 160 directories of /etc, nearly all of it system
// calls) runs on the calling goroutine and up to helpers more (procWalkers
// when a sandbox's start waits for it): /proc alone took 1.05 ms on 2
// cores against 1.17 ms on one thread and 1.33 ms through os.File
// (BenchmarkHostOnlyEntries); /etc about as much again. It fails whole
// when any entry cannot be read for another reason than having gone away
// (a process's, an interrupt's): a list it left short would leave
// root-only entries readable. The list is sorted, and kept as this
// process's last walk (lastWalk).
func hostOnlyEntries(withHostNet bool, helpers int) ([]string, error) {
	w := &procWalker{withHostNet: withHostNet, spare: make(chan struct{}, max(helpers, 0))}
	// The last walk of /etc, when nothing it watches changed (etcWatch);
	// else a full one, which watches anew. Decided before any goroutine
	// of the walk starts: they read w.etc.
	var cachedEtc []string
	etcCached := false
	if slices.Contains(walkRoots, "/etc") {
		etcWatched.mu.Lock()
		defer etcWatched.mu.Unlock()
		if cachedEtc, etcCached = etcWatched.cached(); !etcCached {
			etcWatched.begin()
			w.etc = etcWatched
		}
	}
	for _, root := range walkRoots {
		if root == "/etc" && etcCached {
			continue
		}
		w.visit(root, false)
	}
	w.wg.Wait()
	if w.etc != nil {
		w.etc.finish(w.out, w.err)
	}
	if w.err != nil {
		return nil, fmt.Errorf("walking %s for the entries only root may read: %w", strings.Join(walkRoots, " and "), w.err)
	}
	w.out = append(w.out, cachedEtc...)
	slices.Sort(w.out)
	setLastWalk(withHostNet, slices.Clone(w.out))
	return w.out, nil
}

// walkRoots are the trees hostOnlyEntries walks: the kernel's /proc, and
// /etc, where the system keeps its secrets (the default policy reads it).
// The other system paths are not walked (/usr holds some 150 000 entries
// here): policy.SystemSecrets and docs/security.md.
var walkRoots = []string{"/proc", "/etc"}

// procWalkers is how many goroutines a walk that a sandbox's start
// waits for starts beside the caller's: one per other core.
var procWalkers = runtime.GOMAXPROCS(0) - 1

// lastWalks are the lists hostOnlyEntries last returned, without ([0]) and
// with ([1]) the host's network (see ProcWalk.guess): in this process,
// or else in an earlier one (walkFile). A list stored here is never
// changed: a new walk replaces it.
var lastWalks struct {
	mu     sync.Mutex
	list   [2][]string
	ok     [2]bool
	read   [2]bool     // walkFile was read
	onDisk [2][]string // what walkFile holds, as far as this process knows
}

// walkDir holds, between processes, the list of the last walk (walkFile):
// a fresh process's first sandbox (hutch run) then builds its root from
// it while its own walk runs, as a later sandbox of a process does from
// the process's own last walk. It is only ever a guess, which RunOnce's
// gate checks against the walk: a list that is stale, torn or tampered
// with costs a second PID 1, never a mask. Only root walks, and only
// root may write here; /run is emptied at boot, with the kernel whose
// entries it lists.
var walkDir = "/run/hutch"

func walkFile(i int) string { return filepath.Join(walkDir, fmt.Sprintf("proc-walk-%d", i)) }

// storeWalk writes list to walkFile(i) whole (a new file renamed over
// it), when it is not what the file holds already. Best effort: a walk
// that cannot be kept is only a slower start for the next process.
func storeWalk(i int, list []string) {
	if slices.Equal(lastWalks.onDisk[i], list) && lastWalks.read[i] {
		return
	}
	if err := os.MkdirAll(walkDir, 0o700); err != nil {
		return
	}
	f, err := os.CreateTemp(walkDir, ".proc-walk-*")
	if err != nil {
		return
	}
	_, werr := f.WriteString(strings.Join(list, "\n") + "\n")
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), walkFile(i)) != nil {
		_ = os.Remove(f.Name())
		return
	}
	lastWalks.onDisk[i], lastWalks.read[i] = list, true
}

// loadWalk reads walkFile(i): the list it holds, when it is one a walk
// could have returned (sorted absolute paths below walkRoots, no two
// alike).
func loadWalk(i int) ([]string, bool) {
	b, err := os.ReadFile(walkFile(i))
	if err != nil || len(b) == 0 || b[len(b)-1] != '\n' {
		return nil, false
	}
	list := strings.Split(string(b[:len(b)-1]), "\n")
	if len(b) == 1 {
		list = []string{} // an empty walk
	}
	for k, p := range list {
		if !slices.ContainsFunc(walkRoots, func(r string) bool { return strings.HasPrefix(p, r+"/") }) || path.Clean(p) != p || strings.ContainsRune(p, 0) || k > 0 && list[k-1] >= p {
			return nil, false
		}
	}
	return list, true
}

func walkIndex(withHostNet bool) int {
	if withHostNet {
		return 1
	}
	return 0
}

func setLastWalk(withHostNet bool, list []string) {
	lastWalks.mu.Lock()
	defer lastWalks.mu.Unlock()
	i := walkIndex(withHostNet)
	lastWalks.list[i], lastWalks.ok[i] = list, true
	storeWalk(i, list)
}

// lastWalk is the list hostOnlyEntries last returned for withHostNet, in
// this process or else in an earlier one (walkFile), if any; read it
// only.
func lastWalk(withHostNet bool) ([]string, bool) {
	lastWalks.mu.Lock()
	defer lastWalks.mu.Unlock()
	i := walkIndex(withHostNet)
	if !lastWalks.ok[i] && !lastWalks.read[i] {
		lastWalks.read[i] = true
		if list, ok := loadWalk(i); ok {
			lastWalks.list[i], lastWalks.ok[i], lastWalks.onDisk[i] = list, true, list
		}
	}
	return lastWalks.list[i], lastWalks.ok[i]
}

// procWalker is one walk of hostOnlyEntries: directories are walked by the
// calling goroutine, or by a goroutine of their own while one of spare's
// places is free.
type procWalker struct {
	withHostNet bool
	etc         *etcWatch // set while /etc is walked in full
	spare       chan struct{}
	wg          sync.WaitGroup
	mu          sync.Mutex
	out         []string
	err         error
}

// gone reports whether err says an entry went away while the walk ran.
func gone(err error) bool { return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) }

func (w *procWalker) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

func (w *procWalker) failed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err != nil
}

// dir walks the directory dir (readOnly: under /proc/sys).
func (w *procWalker) dir(dir string, readOnly bool) {
	if w.failed() {
		return
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if !gone(err) {
			w.fail(&os.PathError{Op: "open", Path: dir, Err: err})
		}
		return
	}
	defer unix.Close(fd)
	watched := w.etc != nil && (dir == "/etc" || strings.HasPrefix(dir, "/etc/"))
	var dirStat unix.Stat_t
	if watched {
		w.etc.watch(dir) // before the listing: a change while it runs is an event
		if err := unix.Fstat(fd, &dirStat); err != nil {
			w.fail(&os.PathError{Op: "stat", Path: dir, Err: err})
			return
		}
	}
	var found, subdirs []string
	err = eachDirent(fd, dir, func(name string, typ byte) error {
		path := dir + "/" + name
		switch {
		case dir == "/proc" && (name[0] >= '0' && name[0] <= '9' || name == "self" || name == "thread-self"):
			return nil
		case path == "/proc/sys/net" && !w.withHostNet:
			return nil
		case typ == unix.DT_LNK:
			return nil
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if gone(err) {
				return nil
			}
			return &os.PathError{Op: "stat", Path: path, Err: err}
		}
		if watched && needsRecheck(&st, uint64(dirStat.Dev)) {
			w.etc.note(path, &st)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if st.Mode&0o005 != 0o005 {
				found = append(found, path)
			} else {
				subdirs = append(subdirs, path)
			}
		case unix.S_IFREG:
			if st.Mode&0o004 == 0 && (!readOnly || st.Mode&0o444 != 0) {
				found = append(found, path)
			}
		}
		return nil
	})
	if err != nil {
		w.fail(err)
		return
	}
	if len(found) > 0 {
		w.mu.Lock()
		w.out = append(w.out, found...)
		w.mu.Unlock()
	}
	for _, sub := range subdirs {
		w.visit(sub, readOnly || sub == "/proc/sys")
	}
}

// visit walks dir (see dir) on a goroutine of its own while one of
// spare's places is free, else on this one.
func (w *procWalker) visit(dir string, readOnly bool) {
	select {
	case w.spare <- struct{}{}:
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer func() { <-w.spare }()
			w.dir(dir, readOnly)
		}()
	default:
		w.dir(dir, readOnly)
	}
}

// eachDirent calls fn with the name and type (unix.DT_*) of every entry
// of dir, open at fd, but . and .., in the kernel's order. A directory
// that went away reads as empty.
func eachDirent(fd int, dir string, fn func(name string, typ byte) error) error {
	var buf [8192]byte
	for {
		n, err := unix.Getdents(fd, buf[:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case gone(err):
			return nil
		case err != nil:
			return &os.PathError{Op: "listing", Path: dir, Err: err}
		case n <= 0:
			return nil
		}
		// struct linux_dirent64: d_ino (8 bytes), d_off (8), d_reclen
		// (2), d_type (1), d_name (NUL-terminated).
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return &os.PathError{Op: "listing", Path: dir, Err: errors.New("a malformed directory entry")}
			}
			name := b[19:reclen]
			if i := slices.Index(name, 0); i >= 0 {
				name = name[:i]
			}
			typ := b[18]
			b = b[reclen:]
			if s := string(name); s != "." && s != ".." && s != "" {
				if err := fn(s, typ); err != nil {
					return err
				}
			}
		}
	}
}
