package session

import (
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// walker resolves a notified call's paths as the kernel would for its
// caller, one component at a time through O_PATH descriptors (never by
// name twice), following symbolic links (at most 40, as the kernel) by
// their content from where they are. /proc is the one place where the
// caller's view and the supervisor's differ: "self" and "thread-self"
// name the caller there (never the supervisor), a numbered directory
// must be of a process in the caller's own PID namespace (never one of
// hutch's), and its magic links (fd/N, cwd, root) are followed by the
// kernel, as the caller's own would be.
type walker struct {
	s     *supervisor
	t     *target
	links int
	fds   []int
}

const maxLinks = 40

func (w *walker) keep(fd int) int {
	w.fds = append(w.fds, fd)
	return fd
}

func (w *walker) close() {
	for _, fd := range w.fds {
		unix.Close(fd)
	}
}

// components splits p into its names, with "." left out but where it
// is the last.
func components(p string) []string {
	var out []string
	parts := strings.Split(p, "/")
	for i, c := range parts {
		if c == "" || c == "." && i < len(parts)-1 {
			continue
		}
		out = append(out, c)
	}
	return out
}

// parent resolves p, from start (or the root when p is absolute), to the
// directory that holds its last component: an O_PATH descriptor (the
// walker closes it), the component ("." for p naming the start or the
// root) and whether p ended in a slash.
func (w *walker) parent(start int, p string) (dir int, last string, slash bool, err error) {
	slash = strings.HasSuffix(p, "/")
	cur := start
	if strings.HasPrefix(p, "/") {
		cur = w.s.root
	}
	rest := components(p)
	if len(rest) == 0 {
		return cur, ".", slash, nil
	}
	for {
		c := rest[0]
		if len(rest) == 1 {
			return cur, c, slash, nil
		}
		rest = rest[1:]
		next, link, abs, err := w.step(cur, c)
		if err != nil {
			return -1, "", false, err
		}
		if next >= 0 {
			cur = next
			continue
		}
		// A symbolic link: what it says comes in its place.
		if abs {
			cur = w.s.root
		}
		rest = append(components(link), rest...)
		if len(rest) == 0 {
			return cur, ".", slash, nil
		}
	}
}

// step goes from directory cur to its entry c, which must lead to a
// directory: the entry's descriptor, or (next < 0) the content of the
// symbolic link it is.
func (w *walker) step(cur int, c string) (next int, link string, abs bool, err error) {
	if c == "self" || c == "thread-self" || isNumber(c) {
		if w.procRoot(cur) {
			switch {
			case c == "self":
				return -1, strconv.Itoa(w.t.tgid), false, nil
			case c == "thread-self":
				return -1, strconv.Itoa(w.t.tgid) + "/task/" + strconv.Itoa(w.t.tid), false, nil
			case !w.pidAllowed(c):
				return -1, "", false, unix.ENOENT
			}
		}
	}
	fd, err := unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		return w.keep(fd), "", false, nil
	}
	if err != unix.ENOTDIR && err != unix.ELOOP {
		return -1, "", false, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(cur, c, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return -1, "", false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return -1, "", false, unix.ENOTDIR
	}
	return w.follow(cur, c)
}

// follow follows the symbolic link c in directory cur: a magic link of
// /proc by the kernel (its descriptor), any other by its content.
func (w *walker) follow(cur int, c string) (next int, link string, abs bool, err error) {
	if w.links++; w.links > maxLinks {
		return -1, "", false, unix.ELOOP
	}
	if w.onProc(cur) {
		owner, err := w.procOwner(cur)
		if err != nil {
			return -1, "", false, err
		}
		if owner != "" {
			if !w.pidAllowed(owner) {
				return -1, "", false, unix.ENOENT
			}
			fd, err := unix.Openat(cur, c, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				return -1, "", false, err
			}
			return w.keep(fd), "", false, nil
		}
		if w.procRoot(cur) && (c == "self" || c == "thread-self") {
			_, link, _, err := w.step(cur, c)
			return -1, link, false, err
		}
	}
	buf := make([]byte, pathMax)
	n, err := unix.Readlinkat(cur, c, buf)
	if err != nil {
		return -1, "", false, err
	}
	if n == 0 {
		return -1, "", false, unix.ENOENT
	}
	link = string(buf[:n])
	return -1, link, strings.HasPrefix(link, "/"), nil
}

// lookup resolves p from start to what it names, following a last
// symbolic link when follow (or when p ends in a slash): its O_PATH
// descriptor h, or h < 0 when the last component is missing, with the
// directory and name where it would be made.
func (w *walker) lookup(start int, p string, follow bool) (h, dir int, last string, slash bool, err error) {
	for {
		dir, last, slash, err = w.parent(start, p)
		if err != nil {
			return -1, -1, "", false, err
		}
		if isDot(last) {
			name := last
			if name == "" {
				name = "."
			}
			fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return -1, -1, "", false, err
			}
			return w.keep(fd), dir, last, slash, nil
		}
		if (follow || slash) && w.procRoot(dir) && (last == "self" || last == "thread-self") {
			_, link, _, err := w.step(dir, last)
			if err != nil {
				return -1, -1, "", false, err
			}
			start, p = dir, link+map[bool]string{true: "/"}[slash]
			continue
		}
		fd, err := unix.Openat(dir, last, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT {
			return -1, dir, last, slash, nil
		}
		if err != nil {
			return -1, -1, "", false, err
		}
		h = w.keep(fd)
		if !follow && !slash {
			return h, dir, last, slash, nil
		}
		var st unix.Stat_t
		if err := unix.Fstat(h, &st); err != nil {
			return -1, -1, "", false, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return h, dir, last, slash, nil
		}
		next, link, abs, err := w.follow(dir, last)
		if err != nil {
			return -1, -1, "", false, err
		}
		if next >= 0 {
			return next, dir, last, slash, nil // a magic link's file
		}
		start, p = dir, link
		if abs {
			start = w.s.root
		}
		if slash {
			p += "/"
		}
	}
}

// pathOf is where the file fd is, as the sandbox names it (a file since
// removed, by the name it had); "" for one no directory holds (a pipe, a
// socket).
func (w *walker) pathOf(fd int) (string, error) {
	buf := make([]byte, pathMax)
	n, err := unix.Readlink(selfFD(fd), buf)
	if err != nil {
		return "", err
	}
	if n >= len(buf) {
		return "", unix.ENAMETOOLONG
	}
	p := strings.TrimSuffix(string(buf[:n]), " (deleted)")
	if !strings.HasPrefix(p, "/") {
		return "", nil // pipe:[N], socket:[N], anon_inode:...
	}
	return p, nil
}

// placeOf is where name in directory dir is.
func (w *walker) placeOf(dir int, name string) (string, error) {
	d, err := w.pathOf(dir)
	if err != nil {
		return "", err
	}
	if d == "" {
		return "", unix.ENOTDIR
	}
	return path.Join(d, name), nil
}

// onProc reports whether fd is on /proc.
func (w *walker) onProc(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && uint64(st.Dev) == w.s.procDev
}

// procRoot reports whether fd is /proc itself.
func (w *walker) procRoot(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && uint64(st.Dev) == w.s.procDev && st.Ino == 1
}

// procOwner is the PID whose /proc directory holds fd (a directory of
// /proc), "" for one outside them.
func (w *walker) procOwner(fd int) (string, error) {
	p, err := w.pathOf(fd)
	if err != nil {
		return "", err
	}
	if p == "/proc" {
		return "", nil
	}
	rest, ok := strings.CutPrefix(p, "/proc/")
	if !ok {
		return "", unix.EPERM // a /proc elsewhere: refused
	}
	pid, _, _ := strings.Cut(rest, "/")
	if !isNumber(pid) {
		return "", nil
	}
	return pid, nil
}

// pidAllowed reports whether the caller may be let into /proc/PID: a
// process of its own PID namespace (its command's), never one of this
// process's threads.
func (w *walker) pidAllowed(pid string) bool {
	if pid == strconv.Itoa(w.s.self) {
		return false
	}
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok && strings.TrimSpace(v) == strconv.Itoa(w.s.self) {
			return false
		}
	}
	if w.t.pidns == "" {
		ns, err := os.Readlink(w.t.proc("ns/pid"))
		if err != nil {
			return false
		}
		w.t.pidns = ns
	}
	ns, err := os.Readlink("/proc/" + pid + "/ns/pid")
	return err == nil && ns == w.t.pidns
}

func isNumber(s string) bool {
	if s == "" || len(s) > 10 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
