package session

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/sysprog"
	"github.com/hutchsandbox/hutch/policy"
)

// The supervisor keeps the protected paths that were missing when the
// sandbox started (docs/security.md, "Protected paths in writable
// directories"). A supervised command's process hands every system call
// that can make, replace or write a name (seccomp.NotifyProgram) to it
// through a seccomp listener; the supervisor reads the call's paths from
// the command's memory, resolves them itself, from the command's own
// working directory and descriptors, refuses what would make or write a
// protected path, and otherwise makes the call itself and hands back its
// result (a new descriptor through SECCOMP_IOCTL_NOTIF_ADDFD, atomically
// with the answer). The path it checked is the one it used: the command's
// memory is read once, and never again. Nothing is ever let through to
// run in the command (SECCOMP_USER_NOTIF_FLAG_CONTINUE is never used):
// what it cannot do soundly fails.
//
// It is one locked thread of the session's init, in the init's PID
// namespace (so the notifications' PIDs are the sandbox's /proc's), with
// every capability dropped, a working directory, root and umask of its
// own. It has no Landlock domain: one of its own could not see the
// commands (Landlock lets a domain trace only itself and the domains
// below it), and the commands' domain belongs to their starter. What
// Landlock keeps from a command and the mounts do not — writing /proc —
// the supervisor refuses itself. Calls are served one at a time, so the
// names it makes and the renames it does never race one another: a
// directory it checked cannot be renamed into a protected place behind
// its back (that rename waits for it, and is checked in turn).

// superviseFD is where a session's runner and exec helpers hold the
// supervisor's socket, when the session's commands are supervised.
const superviseFD = 8

// supervisorPeer is, in a session's init whose commands are supervised,
// the supervisor's socket its runners and exec helpers get at
// superviseFD; nil otherwise.
var supervisorPeer *os.File

// supervisedEnv, in a helper's environment, says it must hold the
// supervisor's socket at superviseFD: it refuses to start commands
// otherwise.
const supervisedEnv = "HUTCH_SUPERVISED=1"

// helperEnv is the environment of a runner or exec helper the init
// starts.
func helperEnv() []string {
	if supervisorPeer == nil {
		return boundary.HelperEnv
	}
	return append(slices.Clone(boundary.HelperEnv), supervisedEnv)
}

// supervisorFiles places the supervisor's socket at superviseFD in a
// helper's extra files, when the session's commands are supervised.
func supervisorFiles(extra []*os.File) []*os.File {
	if supervisorPeer == nil {
		return extra
	}
	return boundary.PlaceFile(extra, superviseFD, supervisorPeer)
}

// useSupervisor, in a runner or exec helper, supervises the commands it
// starts when the init said so: through the socket at superviseFD, which
// must be there.
func useSupervisor() error {
	if os.Getenv("HUTCH_SUPERVISED") != "1" {
		return nil
	}
	typ, err := unix.GetsockoptInt(superviseFD, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil || typ != unix.SOCK_SEQPACKET {
		return fmt.Errorf("the session's commands are supervised, but this helper has no supervisor's socket (%v)", err)
	}
	sysprog.SetSupervisor(superviseFD)
	return nil
}

// maxFIFOWaits bounds the opens of a FIFO for writing that wait for a
// reader off the supervisor's thread.
const maxFIFOWaits = 16

// fileID names a file: its device and inode numbers.
type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), st.Ino} }

// supervisor serves the listeners of a session's supervised commands.
type supervisor struct {
	intake  int      // the init's end of the socket listeners come on
	peer    *os.File // the end commands' starters send on
	roots   []string // protect roots (sysprog.ProtectRoots)
	entries []string // protected paths, relative to each root
	root    int      // "/", as an O_PATH descriptor
	procDev uint64   // /proc's device number
	self    int      // this process's PID (the init's: 1)
	// fresh are the directories the supervisor made on the way to a
	// protected path (a .git made by git init); sealed the files it wrote
	// at a protected path (a git config it checked), each with where it
	// wrote it (relative to "/"; "" when it could not tell).
	fresh     map[fileID]bool
	sealed    map[fileID]string
	listeners []int
	fifoWaits atomic.Int32
}

// startSupervisor starts the supervisor of policy p's commands: a locked
// thread of this process that serves the listeners that come on its
// socket. Commands started by this process are supervised from now on
// (sysprog.SetSupervisor); the runners and exec helpers it starts get the
// socket at superviseFD.
func startSupervisor(p policy.Policy) (*supervisor, error) {
	return newSupervisor(sysprog.ProtectRoots(p), p.Protected(), false)
}

// StartSupervisor starts, in a process whose umask is 0 (set by the
// caller, which applies umasks by hand to what it makes and gives its
// children theirs: see Umask), the supervisor of the commands its
// starters run: protected paths entries (relative) are kept at each of
// roots (absolute). It is hutch's container helper's: there the
// runtime's seccomp profile refuses unshare (CLONE_FS), so the
// supervisor's thread shares its process's working directory and umask,
// and relies on neither (it resolves every name from descriptors).
// Starters get the socket with SupervisedHelper and take it with
// UseSupervisor.
func StartSupervisor(roots, entries []string) error {
	if len(roots) == 0 || len(entries) == 0 {
		return errors.New("the supervisor needs protect roots and protected paths")
	}
	if u := unix.Umask(0); u != 0 {
		unix.Umask(u)
		return fmt.Errorf("the supervisor needs its process's umask 0, not %#o", u)
	}
	sup, err := newSupervisor(slices.Clone(roots), slices.Clone(entries), true)
	if err != nil {
		return err
	}
	supervisorPeer = sup.peer
	return nil
}

// SupervisedHelper returns the environment entries and extra files
// (extra, with the supervisor's socket placed at superviseFD) of a
// starter whose commands must be supervised (StartSupervisor), or nil
// and extra unchanged when this process runs no supervisor.
func SupervisedHelper(extra []*os.File) (env []string, files []*os.File) {
	if supervisorPeer == nil {
		return nil, extra
	}
	return []string{supervisedEnv}, supervisorFiles(extra)
}

// UseSupervisor, in a starter, supervises the commands it starts when its
// environment says so (SupervisedHelper): through the socket it must
// then hold, or it fails.
func UseSupervisor() error { return useSupervisor() }

// newSupervisor starts a supervisor of entries at roots. With sharedFS
// its thread keeps its process's working directory and umask (0, the
// caller's business) instead of taking its own.
func newSupervisor(roots, entries []string, sharedFS bool) (*supervisor, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the supervisor's socket: %w", err)
	}
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("the supervisor's root: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc", &st); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		unix.Close(root)
		return nil, fmt.Errorf("the supervisor's /proc: %w", err)
	}
	s := &supervisor{intake: fds[0], peer: os.NewFile(uintptr(fds[1]), "hutch-supervisor"), roots: roots,
		entries: entries, root: root, procDev: uint64(st.Dev), self: os.Getpid(),
		fresh: map[fileID]bool{}, sealed: map[fileID]string{}}
	ready := make(chan error, 1)
	go s.run(ready, sharedFS)
	if err := <-ready; err != nil {
		return nil, err
	}
	sysprog.SetSupervisor(int(s.peer.Fd()))
	return s, nil
}

// run is the supervisor's thread: it gives up what it must not act with,
// says so on ready, then serves until the process ends.
func (s *supervisor) run(ready chan<- error, sharedFS bool) {
	runtime.LockOSThread() // never unlocked: the thread is the supervisor's
	if !sharedFS {
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			ready <- fmt.Errorf("the supervisor's own working directory and umask: %w", err)
			return
		}
		unix.Umask(0) // the command's umask is applied by hand
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		ready <- fmt.Errorf("dropping the supervisor's capabilities: %w", err)
		return
	}
	ready <- nil
	s.serve()
}

// serve polls the socket and every listener, forever.
func (s *supervisor) serve() {
	for {
		fds := make([]unix.PollFd, 0, 1+len(s.listeners))
		fds = append(fds, unix.PollFd{Fd: int32(s.intake), Events: unix.POLLIN})
		for _, l := range s.listeners {
			fds = append(fds, unix.PollFd{Fd: int32(l), Events: unix.POLLIN})
		}
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return // cannot happen; pending calls then fail with ENOSYS when the init ends
		}
		n := len(s.listeners) // those polled
		if fds[0].Revents&unix.POLLIN != 0 {
			s.accept()
		}
		kept := make([]int, 0, len(s.listeners))
		for i, l := range s.listeners {
			if i >= n {
				kept = append(kept, l) // just accepted
				continue
			}
			ev := fds[i+1].Revents
			if ev&unix.POLLIN != 0 {
				s.notification(l)
			}
			if ev&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 && ev&unix.POLLIN == 0 {
				unix.Close(l) // every process of that command has ended
				continue
			}
			kept = append(kept, l)
		}
		s.listeners = kept
	}
}

// accept takes the listeners that came on the socket.
func (s *supervisor) accept() {
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4*4))
	_, oobn, _, _, err := unix.Recvmsg(s.intake, buf, oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_DONTWAIT)
	if err != nil {
		return
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		s.listeners = append(s.listeners, fds...)
	}
}

// seccompNotif, seccompResp and seccompAddfd are the kernel's struct
// seccomp_notif (with its struct seccomp_data), seccomp_notif_resp and
// seccomp_notif_addfd.
type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type seccompResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

type seccompAddfd struct {
	ID         uint64
	Flags      uint32
	Srcfd      uint32
	Newfd      uint32
	NewfdFlags uint32
}

func ioctl(fd int, req uint, arg unsafe.Pointer) (uintptr, error) {
	r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
	if e != 0 {
		return r, e
	}
	return r, nil
}

// result is what a notified call comes to: a descriptor to hand over
// (fd >= 0), or a value and an errno; deferred when another goroutine
// answers.
type result struct {
	fd       int
	cloexec  bool
	val      int64
	errno    unix.Errno
	deferred bool
}

func refuse(e error) result {
	var errno unix.Errno
	if !errors.As(e, &errno) {
		errno = unix.EPERM // anything else is refused
	}
	return result{fd: -1, errno: errno}
}

func value(v int64) result { return result{fd: -1, val: v} }

// notification receives one notification on listener l and answers it.
func (s *supervisor) notification(l int) {
	var n seccompNotif
	if _, err := ioctl(l, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n)); err != nil {
		return // the caller is gone
	}
	t := &target{s: s, l: l, id: n.ID, tid: int(n.Pid), mem: -1}
	defer t.close()
	r := refuse(unix.EPERM)
	if c, ok := decode(&n); ok {
		r = s.perform(t, c)
	}
	if !r.deferred {
		answer(l, n.ID, r)
	}
}

// answer sends r as the answer to notification id on listener l.
func answer(l int, id uint64, r result) {
	if r.fd >= 0 {
		defer unix.Close(r.fd)
		a := seccompAddfd{ID: id, Flags: unix.SECCOMP_ADDFD_FLAG_SEND, Srcfd: uint32(r.fd)}
		if r.cloexec {
			a.NewfdFlags = unix.O_CLOEXEC
		}
		_, err := ioctl(l, unix.SECCOMP_IOCTL_NOTIF_ADDFD, unsafe.Pointer(&a))
		switch {
		case err == nil:
			return // installed and answered at once
		case errors.Is(err, unix.EINVAL):
			// Before Linux 5.14: install, then answer with the number.
			a.Flags = 0
			fd, err := ioctl(l, unix.SECCOMP_IOCTL_NOTIF_ADDFD, unsafe.Pointer(&a))
			if err != nil {
				r = refuse(err)
				break
			}
			r = value(int64(fd))
		case errors.Is(err, unix.ENOENT):
			return // the caller is gone
		default:
			r = refuse(err) // EMFILE: the caller's limit
		}
	}
	resp := seccompResp{ID: id, Val: r.val, Error: -int32(r.errno)}
	_, _ = ioctl(l, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
}

// call is a notified system call, decoded: open (openat, creat), mkdir,
// mknod, symlink, link or rename in their *at form.
type call struct {
	kind          int
	dirfd, newfd  int32  // AT_FDCWD for the forms without
	path, newpath uint64 // addresses in the caller; symlink: path is the target
	flags         uint32 // open's flags; linkat's and renameat2's
	mode, dev     uint32
}

const (
	kindOpen = iota
	kindMkdir
	kindMknod
	kindSymlink
	kindLink
	kindRename
)

// decode reads a notification as a call; ok is false for a call of
// another ABI, or one hutch does not know (never notified).
func decode(n *seccompNotif) (c call, ok bool) {
	if n.Arch != auditArch {
		return c, false
	}
	a := n.Args
	switch int(n.Nr) {
	case unix.SYS_OPENAT:
		return call{kind: kindOpen, dirfd: int32(a[0]), path: a[1], flags: uint32(a[2]), mode: uint32(a[3])}, true
	case unix.SYS_MKDIRAT:
		return call{kind: kindMkdir, dirfd: int32(a[0]), path: a[1], mode: uint32(a[2])}, true
	case unix.SYS_MKNODAT:
		return call{kind: kindMknod, dirfd: int32(a[0]), path: a[1], mode: uint32(a[2]), dev: uint32(a[3])}, true
	case unix.SYS_SYMLINKAT:
		return call{kind: kindSymlink, path: a[0], newfd: int32(a[1]), newpath: a[2]}, true
	case unix.SYS_LINKAT:
		return call{kind: kindLink, dirfd: int32(a[0]), path: a[1], newfd: int32(a[2]), newpath: a[3], flags: uint32(a[4])}, true
	case unix.SYS_RENAMEAT2:
		return call{kind: kindRename, dirfd: int32(a[0]), path: a[1], newfd: int32(a[2]), newpath: a[3], flags: uint32(a[4])}, true
	}
	return decodeLegacy(n)
}

// target is the thread that made a notified call.
type target struct {
	s     *supervisor
	l     int
	id    uint64
	tid   int
	mem   int // its /proc/TID/mem, once opened
	umask uint32
	tgid  int
	read  bool // umask and tgid read
	pidns string
}

func (t *target) close() {
	if t.mem >= 0 {
		unix.Close(t.mem)
	}
}

func (t *target) proc(rest string) string { return "/proc/" + strconv.Itoa(t.tid) + "/" + rest }

// valid reports whether the notification is still pending: its caller
// has not died, so its PID (and what was read through it) is its own.
func (t *target) valid() error {
	if _, err := ioctl(t.l, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, unsafe.Pointer(&t.id)); err != nil {
		return unix.ENOENT
	}
	return nil
}

const pathMax = unix.PathMax // 4096 bytes, the NUL included

// str reads the NUL-terminated string at addr in the caller's memory as
// the kernel would a path: ENAMETOOLONG when no NUL comes in the first
// PATH_MAX bytes, EFAULT when memory that cannot be read comes first.
// It reads a page at a time with process_vm_readv, which (unlike
// /proc/PID/mem) honours the pages' protection as the kernel's own read
// does; where a seccomp filter refuses it (the init that ran a one-shot
// command confined itself), through /proc/PID/mem, which also reads
// PROT_NONE pages: a path there is taken instead of refused with EFAULT.
func (t *target) str(addr uint64) (string, error) {
	const page = 4096
	var buf [pathMax]byte
	n := 0
	for n < pathMax {
		a := addr + uint64(n)
		if a < addr || a > 1<<62 {
			return "", unix.EFAULT
		}
		chunk := min(page-int(a%page), pathMax-n)
		k, err := t.readMem(buf[n:n+chunk], a)
		if err != nil {
			return "", err
		}
		for i := n; i < n+k; i++ {
			if buf[i] == 0 {
				return string(buf[:i]), nil
			}
		}
		n += k
	}
	return "", unix.ENAMETOOLONG
}

// noVMRead is set once process_vm_readv was refused to the supervisor.
var noVMRead atomic.Bool

// readMem reads len(b) bytes (within one page) at addr in the caller's
// memory.
func (t *target) readMem(b []byte, addr uint64) (int, error) {
	if !noVMRead.Load() {
		local := []unix.Iovec{{Base: &b[0]}}
		local[0].SetLen(len(b))
		remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}
		k, err := unix.ProcessVMReadv(t.tid, local, remote, 0)
		switch {
		case err == nil && k > 0:
			return k, nil
		case err == nil, errors.Is(err, unix.EFAULT):
			return 0, unix.EFAULT
		case errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS):
			noVMRead.Store(true) // a filter: from now on, /proc/PID/mem
		default:
			return 0, unix.EPERM // not traceable (a command made itself undumpable): refused
		}
	}
	if t.mem < 0 {
		fd, err := unix.Open(t.proc("mem"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, unix.EPERM
		}
		t.mem = fd
	}
	k, err := unix.Pread(t.mem, b, int64(addr))
	if err != nil || k <= 0 {
		return 0, unix.EFAULT
	}
	return k, nil
}

// status reads the caller's thread group and umask.
func (t *target) status() error {
	if t.read {
		return nil
	}
	b, err := os.ReadFile(t.proc("status"))
	if err != nil {
		return unix.EPERM
	}
	umask, tgid := -1, -1
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch {
		case !ok:
		case k == "Umask":
			if u, err := strconv.ParseUint(v, 8, 32); err == nil {
				umask = int(u)
			}
		case k == "Tgid":
			if g, err := strconv.Atoi(v); err == nil {
				tgid = g
			}
		}
	}
	if umask < 0 || tgid <= 0 {
		return unix.EPERM
	}
	t.umask, t.tgid, t.read = uint32(umask)&0o777, tgid, true
	return nil
}

// start is where the caller's path p, relative to its dirfd, starts: an
// O_PATH descriptor the caller closes when owned.
func (t *target) start(dirfd int32, p string) (fd int, owned bool, err error) {
	switch {
	case strings.HasPrefix(p, "/"):
		return t.s.root, false, nil
	case dirfd == unix.AT_FDCWD:
		fd, err = unix.Open(t.proc("cwd"), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, false, unix.EPERM
		}
	case dirfd < 0:
		return -1, false, unix.EBADF
	default:
		fd, err = unix.Open(t.proc("fd/"+strconv.Itoa(int(dirfd))), unix.O_PATH|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			return -1, false, unix.EBADF
		}
		if err != nil {
			return -1, false, unix.EPERM
		}
	}
	return fd, true, nil
}

// perform does c for t, or refuses it.
func (s *supervisor) perform(t *target, c call) result {
	w := &walker{s: s, t: t}
	defer w.close()
	p, err := t.str(c.path)
	if err != nil {
		return refuse(err)
	}
	var newp string
	if c.kind == kindSymlink || c.kind == kindLink || c.kind == kindRename {
		if newp, err = t.str(c.newpath); err != nil {
			return refuse(err)
		}
		if newp == "" {
			return refuse(unix.ENOENT)
		}
	}
	if p == "" {
		// Only linkat's AT_EMPTY_PATH takes one; it needs a capability
		// commands do not have (before Linux 6.10): refused alike.
		return refuse(unix.ENOENT)
	}
	if err := t.status(); err != nil {
		return refuse(err)
	}
	var start, newStart int
	if c.kind != kindSymlink {
		fd, owned, err := t.start(c.dirfd, p)
		if err != nil {
			return refuse(err)
		}
		if owned {
			w.keep(fd)
		}
		start = fd
	}
	if c.kind == kindSymlink || c.kind == kindLink || c.kind == kindRename {
		fd, owned, err := t.start(c.newfd, newp)
		if err != nil {
			return refuse(err)
		}
		if owned {
			w.keep(fd)
		}
		newStart = fd
	}
	// Everything read through the caller's PID is its own only if it is
	// still waiting for this answer.
	if err := t.valid(); err != nil {
		return result{fd: -1, deferred: true}
	}
	switch c.kind {
	case kindOpen:
		return s.open(w, start, p, c.flags, c.mode)
	case kindMkdir:
		return s.mkdir(w, start, p, c.mode)
	case kindMknod:
		return s.mknod(w, start, p, c.mode, c.dev)
	case kindSymlink:
		return s.symlink(w, p, newStart, newp)
	case kindLink:
		return s.link(w, start, p, newStart, newp, c.flags)
	case kindRename:
		return s.rename(w, start, p, newStart, newp, c.flags)
	}
	return refuse(unix.EPERM)
}

// Intents, for allowed.
const (
	intentCreate     = iota // a new name: a node, a link, a rename's target
	intentOpenCreate        // a new file made by open
	intentMkdir             // a new directory
	intentWrite             // an existing file opened for writing
	intentRename            // a rename's target (a git config may be checked in)
)

// Where a path lies with respect to the protected paths.
const (
	placeFree      = iota
	placeAncestor  // a directory on the way to one (.git), or a root
	placeProtected // one itself
	placeBelow     // inside one
)

// classify says where x (an absolute, clean path) lies: the strongest
// of what each root and entry say, with the root and entry concerned.
func (s *supervisor) classify(x string) (place int, root, entry, rest string) {
	for _, r := range s.roots {
		for _, e := range s.entries {
			l := strings.TrimSuffix(r, "/") + "/" + e
			switch {
			case x == l:
				return placeProtected, r, e, ""
			case strings.HasPrefix(x, l+"/"):
				return placeBelow, r, e, x[len(l)+1:]
			case strings.HasPrefix(l, strings.TrimSuffix(x, "/")+"/") || x == r:
				place = placeAncestor
			}
		}
	}
	return place, "", "", ""
}

// errProtected is the errno of a refused call.
const errProtected = unix.EPERM

// allowed decides a call that makes (or writes) x. vet is set for a
// rename that may put a checked git config at x.
func (s *supervisor) allowed(x string, intent int, isDir bool) (vet bool, err error) {
	place, root, entry, rest := s.classify(x)
	switch place {
	case placeFree:
		return false, nil
	case placeAncestor:
		switch {
		case intent == intentMkdir:
			return false, nil
		case intent == intentWrite && isDir:
			return false, unix.EISDIR
		}
		return false, errProtected
	case placeProtected:
		// git init's own: an empty hooks directory, and a config holding
		// only git init's settings, in a .git the supervisor made.
		switch {
		case entry == ".git/hooks" && intent == intentMkdir && s.freshGit(root):
			return false, nil
		case entry == ".git/config" && intent == intentRename && s.freshGit(root):
			return true, nil
		}
		return false, errProtected
	default: // placeBelow
		// git's sample hooks, which git never runs (it runs a hook by its
		// exact name), in such a hooks directory.
		if entry == ".git/hooks" && (intent == intentOpenCreate || intent == intentWrite) &&
			!strings.Contains(rest, "/") && strings.HasSuffix(rest, ".sample") && s.freshGit(root) {
			return false, nil
		}
		return false, errProtected
	}
}

// freshGit reports whether root's .git is a directory the supervisor
// made.
func (s *supervisor) freshGit(root string) bool {
	var st unix.Stat_t
	if unix.Fstatat(s.root, strings.TrimPrefix(strings.TrimSuffix(root, "/")+"/.git", "/"), &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR && s.fresh[idOf(&st)]
}

// open does open(2) for the caller.
func (s *supervisor) open(w *walker, start int, p string, flags, mode uint32) result {
	cloexec := flags&unix.O_CLOEXEC != 0
	mode = mode & 0o7777 &^ w.t.umask
	if flags&unix.O_PATH != 0 {
		// O_PATH ignores every flag but these: nothing is made or written.
		h, _, _, _, err := w.lookup(start, p, flags&unix.O_NOFOLLOW == 0)
		switch {
		case err != nil:
			return refuse(err)
		case h < 0:
			return refuse(unix.ENOENT)
		}
		fd, err := unix.Open(selfFD(h), int(flags&(unix.O_PATH|unix.O_DIRECTORY))|unix.O_CLOEXEC, 0)
		if err != nil {
			return refuse(err)
		}
		return result{fd: fd, cloexec: cloexec}
	}
	if flags&(unix.O_CREAT|unix.O_DIRECTORY) == unix.O_CREAT|unix.O_DIRECTORY {
		return refuse(unix.EINVAL) // as the kernel (Linux 6.4 on), whatever the name
	}
	if flags&(unix.O_TMPFILE&^unix.O_DIRECTORY) != 0 {
		// An unnamed file: nothing is named (a later linkat is checked).
		h, _, _, _, err := w.lookup(start, p, true)
		switch {
		case err != nil:
			return refuse(err)
		case h < 0:
			return refuse(unix.ENOENT)
		}
		fd, err := unix.Openat(h, ".", int(flags)|unix.O_CLOEXEC, mode)
		if err != nil {
			return refuse(err)
		}
		return result{fd: fd, cloexec: cloexec}
	}
	creat, excl := flags&unix.O_CREAT != 0, flags&unix.O_EXCL != 0
	if creat && strings.HasSuffix(p, "/") {
		// The kernel refuses it once it has the last name's directory,
		// before it looks the name up: a file there too.
		if _, _, _, err := w.parent(start, p); err != nil {
			return refuse(err)
		}
		return refuse(unix.EISDIR)
	}
	follow := flags&unix.O_NOFOLLOW == 0 && !(creat && excl)
	for range 8 {
		h, dir, last, slash, err := w.lookup(start, p, follow)
		if err != nil {
			return refuse(err)
		}
		if h < 0 {
			if !creat {
				return refuse(unix.ENOENT)
			}
			if slash {
				return refuse(unix.EISDIR)
			}
			x, err := w.placeOf(dir, last)
			if err != nil {
				return refuse(err)
			}
			if _, err := s.allowed(x, intentOpenCreate, false); err != nil {
				return refuse(err)
			}
			fd, err := unix.Openat(dir, last, int(flags)|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
			if errors.Is(err, unix.EEXIST) && !excl {
				continue // made meanwhile (on the host): open it as it is
			}
			if err != nil {
				return refuse(err)
			}
			return result{fd: fd, cloexec: cloexec}
		}
		if creat && excl {
			return refuse(unix.EEXIST)
		}
		var st unix.Stat_t
		if err := unix.Fstat(h, &st); err != nil {
			return refuse(err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return refuse(unix.ELOOP) // O_NOFOLLOW
		case unix.S_IFDIR:
			return refuse(unix.EISDIR) // every notified open writes
		}
		if slash || flags&unix.O_DIRECTORY != 0 {
			return refuse(unix.ENOTDIR)
		}
		if err := s.writable(w, h, &st); err != nil {
			return refuse(err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFIFO && flags&unix.O_NONBLOCK == 0 && flags&unix.O_ACCMODE != unix.O_RDWR {
			return s.fifo(w, h, flags)
		}
		fd, err := unix.Open(selfFD(h), int(flags&^(unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW))|unix.O_CLOEXEC, 0)
		if err != nil {
			return refuse(err)
		}
		return result{fd: fd, cloexec: cloexec}
	}
	return refuse(unix.EAGAIN)
}

// writable refuses opening the existing file h for writing where a
// protected path is, one the supervisor sealed, and a /proc file (which
// the command's Landlock domain may not write, and the supervisor has
// none).
func (s *supervisor) writable(w *walker, h int, st *unix.Stat_t) error {
	if uint64(st.Dev) == s.procDev {
		return unix.EACCES
	}
	if s.isSealed(st) {
		return errProtected
	}
	x, err := w.pathOf(h)
	if err != nil || x == "" {
		return err
	}
	_, err = s.allowed(x, intentWrite, false)
	return err
}

// isSealed reports whether st is a file the supervisor sealed, still
// where it wrote it (by that name or through a hard link). A sealed
// file that is no longer there (git replaced that config, or the command
// removed it) is forgotten: its inode may be another file's now, which
// it must not keep from being written.
func (s *supervisor) isSealed(st *unix.Stat_t) bool {
	id := idOf(st)
	at, ok := s.sealed[id]
	if !ok {
		return false
	}
	var now unix.Stat_t
	if at == "" || unix.Fstatat(s.root, at, &now, unix.AT_SYMLINK_NOFOLLOW) == nil && idOf(&now) == id {
		return true
	}
	delete(s.sealed, id)
	return false
}

// fifo opens the FIFO h for the caller, for reading or writing only
// (which waits for the other side): at once when the other side is
// there, else on a goroutine of its own, so that the supervisor goes on
// serving (the waiting open makes no name: the FIFO exists). That
// goroutine tries again, at most fifoPoll apart, until a reader comes or
// the caller is gone (killed while it waited: its place is given back).
func (s *supervisor) fifo(w *walker, h int, flags uint32) result {
	open := int(flags&^(unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW)) | unix.O_CLOEXEC
	fd, err := unix.Open(selfFD(h), open|unix.O_NONBLOCK, 0)
	if err == nil {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, open&^unix.O_CLOEXEC&^unix.O_NONBLOCK); err != nil {
			unix.Close(fd)
			return refuse(err)
		}
		return result{fd: fd, cloexec: flags&unix.O_CLOEXEC != 0}
	}
	if !errors.Is(err, unix.ENXIO) { // ENXIO comes after the permission checks
		return refuse(err)
	}
	if s.fifoWaits.Add(1) > maxFIFOWaits {
		s.fifoWaits.Add(-1)
		return refuse(unix.EAGAIN)
	}
	h2, err := unix.Dup(h)
	if err != nil {
		s.fifoWaits.Add(-1)
		return refuse(err)
	}
	l, err := unix.Dup(w.t.l)
	if err != nil {
		unix.Close(h2)
		s.fifoWaits.Add(-1)
		return refuse(err)
	}
	id, cloexec := w.t.id, flags&unix.O_CLOEXEC != 0
	go func() {
		defer s.fifoWaits.Add(-1)
		defer unix.Close(l)
		defer unix.Close(h2)
		// Not a blocking open: one whose caller was killed would wait
		// (and hold its place) until some reader came, if ever. A reader
		// waiting in its own open counts as one, so none is missed.
		pause := 100 * time.Microsecond
		for {
			fd, err := unix.Open(selfFD(h2), open|unix.O_NONBLOCK, 0)
			if err == nil {
				if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, open&^unix.O_CLOEXEC&^unix.O_NONBLOCK); err != nil {
					unix.Close(fd)
					answer(l, id, refuse(err))
					return
				}
				answer(l, id, result{fd: fd, cloexec: cloexec})
				return
			}
			if !errors.Is(err, unix.ENXIO) {
				answer(l, id, refuse(err))
				return
			}
			if _, err := ioctl(l, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, unsafe.Pointer(&id)); err != nil {
				return // the caller is gone
			}
			time.Sleep(pause)
			pause = min(2*pause, fifoPoll)
		}
	}()
	return result{fd: -1, deferred: true}
}

// fifoPoll is the longest a FIFO's writer waits, once a reader came,
// before the supervisor sees it.
const fifoPoll = 20 * time.Millisecond

// newName resolves where a call would make the name p (from start) and
// checks that it may: the directory's handle, the last name and the
// place the name lands, or the error to refuse the call with (EEXIST for
// "." and "..", as the kernel's).
func (s *supervisor) newName(w *walker, start int, p string, intent int) (dir int, last, x string, err error) {
	if dir, last, _, err = w.parent(start, p); err != nil {
		return 0, "", "", err
	}
	if isDot(last) {
		return 0, "", "", unix.EEXIST
	}
	if x, err = w.placeOf(dir, last); err != nil {
		return 0, "", "", err
	}
	if _, err := s.allowed(x, intent, false); err != nil {
		return 0, "", "", err
	}
	return dir, last, x, nil
}

// mkdir does mkdir(2) for the caller.
func (s *supervisor) mkdir(w *walker, start int, p string, mode uint32) result {
	dir, last, x, err := s.newName(w, start, p, intentMkdir)
	if err != nil {
		return refuse(err)
	}
	if err := unix.Mkdirat(dir, last, mode&0o1777&^w.t.umask); err != nil {
		return refuse(err)
	}
	if place, _, _, _ := s.classify(x); place == placeAncestor {
		var st unix.Stat_t
		if unix.Fstatat(dir, last, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			s.fresh[idOf(&st)] = true
		}
	}
	return value(0)
}

// mknod does mknod(2) for the caller (devices fail: the supervisor has
// no capability, as the command has none).
func (s *supervisor) mknod(w *walker, start int, p string, mode, dev uint32) result {
	dir, last, _, err := s.newName(w, start, p, intentCreate)
	if err != nil {
		return refuse(err)
	}
	mode = mode&unix.S_IFMT | mode&0o7777&^w.t.umask
	if err := unix.Mknodat(dir, last, mode, int(dev)); err != nil {
		return refuse(err)
	}
	return value(0)
}

// symlink does symlink(2) for the caller.
func (s *supervisor) symlink(w *walker, target string, start int, p string) result {
	dir, last, _, err := s.newName(w, start, p, intentCreate)
	if err != nil {
		return refuse(err)
	}
	if err := unix.Symlinkat(target, dir, last); err != nil {
		return refuse(err)
	}
	return value(0)
}

// link does linkat(2) for the caller: through /proc/self/fd of what it
// resolved, so the file linked is the one checked.
func (s *supervisor) link(w *walker, start int, p string, newStart int, newp string, flags uint32) result {
	if flags&^(unix.AT_SYMLINK_FOLLOW|unix.AT_EMPTY_PATH) != 0 {
		return refuse(unix.EINVAL)
	}
	h, _, _, _, err := w.lookup(start, p, flags&unix.AT_SYMLINK_FOLLOW != 0)
	switch {
	case err != nil:
		return refuse(err)
	case h < 0:
		return refuse(unix.ENOENT)
	}
	var st unix.Stat_t
	if err := unix.Fstat(h, &st); err != nil {
		return refuse(err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return refuse(unix.EPERM)
	}
	// A second name for a protected file would let it be written there.
	if err := s.writable(w, h, &st); err != nil {
		return refuse(err)
	}
	dir, last, _, err := s.newName(w, newStart, newp, intentCreate)
	if err != nil {
		return refuse(err)
	}
	if err := unix.Linkat(unix.AT_FDCWD, selfFD(h), dir, last, unix.AT_SYMLINK_FOLLOW); err != nil {
		return refuse(err)
	}
	return value(0)
}

// rename does renameat2(2) for the caller.
func (s *supervisor) rename(w *walker, start int, p string, newStart int, newp string, flags uint32) result {
	if flags&^(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE|unix.RENAME_WHITEOUT) != 0 {
		return refuse(unix.EINVAL)
	}
	dir, last, slash, err := w.parent(start, p)
	if err != nil {
		return refuse(err)
	}
	newDir, newLast, newSlash, err := w.parent(newStart, newp)
	if err != nil {
		return refuse(err)
	}
	if isDot(last) || isDot(newLast) {
		return refuse(unix.EBUSY)
	}
	x, err := w.placeOf(newDir, newLast)
	if err != nil {
		return refuse(err)
	}
	vet, err := s.allowed(x, intentRename, false)
	if err != nil {
		return refuse(err)
	}
	if flags&(unix.RENAME_EXCHANGE|unix.RENAME_WHITEOUT) != 0 {
		// The source's name gets something new too.
		old, err := w.placeOf(dir, last)
		if err != nil {
			return refuse(err)
		}
		if _, err := s.allowed(old, intentCreate, false); err != nil {
			return refuse(err)
		}
		if vet {
			return refuse(errProtected)
		}
	}
	if vet {
		if err := s.checkInConfig(dir, last, newDir, newLast); err != nil {
			return refuse(err)
		}
		return value(0)
	}
	if slash {
		last += "/"
	}
	if newSlash {
		newLast += "/"
	}
	if err := unix.Renameat2(dir, last, newDir, newLast, uint(flags)); err != nil {
		return refuse(err)
	}
	return value(0)
}

func isDot(name string) bool { return name == "" || name == "." || name == ".." }

// selfFD names descriptor fd of this process through /proc.
func selfFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }
