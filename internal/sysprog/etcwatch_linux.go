package sysprog

import (
	"errors"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// etcWatch keeps, for a process that starts many sandboxes (an MCP
// server, a library caller's loop), the last walk of /etc with an inotify
// watch on every directory it walked, so that the next walk is only a
// check that nothing changed: /etc holds some 1400 entries here, and
// stating them all at every start cost more than the rest of the
// sandbox's start. Any event (an entry made, removed, moved, or a change
// of mode, owner or times: IN_ATTRIB, in a watched directory or of one),
// an overflow of the queue, or a failure to watch makes the next walk a
// full one, which sets the watches anew. Entries whose changes a watch
// on their directory would not see — a mount point (its changes are
// reported to its own filesystem's directory) and a file with other hard
// links (a chmod through another name) — are stated again at every
// check. A change between a check and the sandbox's start is missed as
// it would be between a walk and the start.
type etcWatch struct {
	mu      sync.Mutex // held by a walk from its check to its end
	fd      int        // the inotify instance of the last full walk; -1 when none
	list    []string
	walkMu  sync.Mutex        // guards recheck and broken while a walk's goroutines watch
	recheck map[string]statID // entries stated at every check
	broken  bool              // a watch could not be set: no cache
	walks   int               // full walks made (for tests)
}

// statID is what a recheck compares.
type statID struct {
	dev, ino uint64
	mode     uint32
	uid, gid uint32
}

func idOfStat(st *unix.Stat_t) statID {
	return statID{dev: uint64(st.Dev), ino: st.Ino, mode: st.Mode, uid: st.Uid, gid: st.Gid}
}

// etcWatched is this process's etcWatch.
var etcWatched = &etcWatch{fd: -1}

// watchMask is what a directory's watch reports.
const watchMask = unix.IN_ATTRIB | unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// cached returns the last walk's list of /etc when nothing it watches has
// changed since; ok false when a full walk is needed. The caller holds mu
// from here until the walk's finish.
func (e *etcWatch) cached() (list []string, ok bool) {
	if e.fd < 0 || e.broken {
		return nil, false
	}
	var buf [4096]byte
	n, err := unix.Read(e.fd, buf[:])
	switch {
	case errors.Is(err, unix.EAGAIN) && n <= 0:
	case errors.Is(err, unix.EINTR):
		return nil, false
	default:
		return nil, false // an event (or an error reading them): walk again
	}
	for p, was := range e.recheck {
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || idOfStat(&st) != was {
			return nil, false
		}
	}
	return slices.Clone(e.list), true
}

// begin starts a full walk: a fresh inotify instance (the last one's
// watches dropped with it). A process's first walk sets no watch: setting
// one on each of /etc's directories costs several times the walk itself
// (about 15 ms here), which a process that starts one sandbox (hutch
// run) would pay for nothing; its second walk sets them.
func (e *etcWatch) begin() {
	if e.fd >= 0 {
		unix.Close(e.fd)
	}
	e.fd, e.broken, e.recheck = -1, false, map[string]statID{}
	e.walks++
	if e.walks == 1 {
		return
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		e.broken = true
		return
	}
	e.fd = fd
}

// watch adds dir's watch, before the walk lists it (a change while it is
// listed is then an event for the next check). Safe for the walk's
// goroutines.
func (e *etcWatch) watch(dir string) {
	if e.fd < 0 {
		return
	}
	if _, err := unix.InotifyAddWatch(e.fd, dir, watchMask); err != nil {
		e.walkMu.Lock()
		e.broken = true
		e.walkMu.Unlock()
	}
}

// note records an entry to state at every check.
func (e *etcWatch) note(path string, st *unix.Stat_t) {
	e.walkMu.Lock()
	e.recheck[path] = idOfStat(st)
	e.walkMu.Unlock()
}

// finish keeps list (the walk's entries under /etc) when the walk set
// every watch.
func (e *etcWatch) finish(out []string, err error) {
	if err != nil || e.broken {
		e.broken = true
		return
	}
	e.list = nil
	for _, p := range out {
		if strings.HasPrefix(p, "/etc/") {
			e.list = append(e.list, p)
		}
	}
}

// needsRecheck reports whether the entry st, in a directory on device
// parentDev, is one a watch would not report: a mount point, or a file
// with other names.
func needsRecheck(st *unix.Stat_t, parentDev uint64) bool {
	return uint64(st.Dev) != parentDev || st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1
}
