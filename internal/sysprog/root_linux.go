package sysprog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/policy"
)

type bind struct {
	path     string // the same path outside and inside
	writable bool
	kind     uint32 // S_IFDIR, S_IFREG... of the host path, S_IFLNK for a link
	link     string // a link's target
	tree     uint8  // slot of the detached copy of the host path
}

// devNodes are the devices a sandbox's /dev holds.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// SetUpRoot builds the sandbox's root for policy p and quotas q (see
// rootProgram), hiding the /proc entries hidden (besides the fixed ones:
// the host's list, see WalkProcAhead), and runs that program in this
// process: a session's init calls it before it serves. Unless supervised (the session's commands
// are: see NeedsSupervision), every protected path must be there to be
// kept read-only: one that went missing since NeedsSupervision looked
// fails the build rather than be left unkept.
func SetUpRoot(p policy.Policy, q wire.Quotas, hidden []string, supervised bool) error {
	prog, err := rootProgram(p, q, walked(p, hidden), !supervised)
	if err != nil {
		return err
	}
	return prog.exec()
}

// rootProgram makes the program that builds the sandbox's filesystem from
// the policy, run by a process that is alone in a new mount namespace and
// still sees the host's files: a root holding only the policy's paths
// (read-only or writable binds, denied paths masked), a fresh /proc, a
// minimal /dev and a private /tmp; then the hostname and, unless the
// network is the host's, a loopback interface that is up.
//
// It works with detached mounts (open_tree, mount_setattr, move_mount):
// every host path is opened and copied while the host's root is still
// the root, then the process pivots into an empty tmpfs and nothing of
// the host is reachable by name any more: the rest is built there, where
// a symbolic link cannot lead outside.
//
// Decisions that depend on the host (which paths exist, which are links)
// are taken here, in ordinary Go; the program checks at run time that
// each path it opens is still of the type seen here, and fails otherwise.
func rootProgram(p policy.Policy, q wire.Quotas, proc *ProcWalk, strictProtect bool) (*program, error) {
	b := newBuilder()
	b.strictProtect = strictProtect
	b.procAhead = proc
	if err := b.root(p, q); err != nil {
		return nil, err
	}
	b.nullStdio()
	return b.build()
}

// nullStdio appends putting the sandbox's own /dev/null on descriptors
// 0, 1 and 2 in place of what the process was started with: the host's
// (a session's init gets the host's /dev/null), which nothing in the
// sandbox may hold.
func (b *builder) nullStdio() {
	null := b.slot()
	b.call("opening /dev/null", unix.SYS_OPENAT, cwd, b.str("/dev/null"), unix.O_RDWR|unix.O_CLOEXEC).out = null
	for i := range 3 {
		b.call("standard streams", unix.SYS_DUP3, 0, uintptr(i), 0).in[0] = null
	}
	b.close(null)
}

// root appends rootProgram's steps.
func (b *builder) root(p policy.Policy, q wire.Quotas) error {
	size := ""
	if m := int64(p.Limits.Memory); m > 0 {
		// tmpfs pages are not counted by the per-process rlimit fallback.
		size = ",size=" + strconv.FormatInt(m, 10)
	}
	b.call("making mounts private", unix.SYS_MOUNT, b.str(""), b.str("/"), 0, unix.MS_REC|unix.MS_PRIVATE, 0)
	b.quotas(q)

	binds, rootBind, err := hostBinds(p)
	if err != nil {
		return err
	}
	for i := range binds {
		if binds[i].kind != unix.S_IFLNK {
			binds[i].tree = b.copyTree(binds[i].path, binds[i].kind, binds[i].writable)
		}
	}
	devs := map[string]uint8{}
	for _, d := range devNodes {
		if _, err := os.Stat("/dev/" + d); err == nil {
			t := b.slot()
			b.call("opening /dev/"+d, unix.SYS_OPEN_TREE, cwd, b.str("/dev/"+d), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC).out = t
			// Read-only: the node is the host's (the sandbox's root may own
			// it), so a chmod or a change of its times would be the host's;
			// reading and writing the device itself are not writes to the
			// mount.
			b.setAttr("binding /dev/"+d, 0, "", unix.AT_EMPTY_PATH, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC).in[0] = t
			devs[d] = t
		}
	}

	// A /proc of the sandbox's PID namespace, made while the host's /proc
	// is still in view: the kernel refuses a new /proc in a user
	// namespace that shows none.
	// hidepid=ptraceable: a process sees in it only the processes it may
	// trace, so commands never see hutch's own (the init, a one-shot's
	// PID 1, runners and exec helpers are not dumpable): commands get a
	// PID namespace, as /proc shows it, of their own processes alone.
	proc := b.newMount("proc", "hidepid=ptraceable", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)

	// The new root: a copy of the host's root when the policy lists "/",
	// else an empty tmpfs; mounted on /tmp (any directory will do), made
	// the root, and the host's root detached.
	if rootBind != nil {
		t := b.copyTree("/", unix.S_IFDIR, rootBind.writable)
		b.mountAt("placing the root", t, "/tmp")
	} else {
		b.call("mounting the new root", unix.SYS_MOUNT, b.str("tmpfs"), b.str("/tmp"), b.str("tmpfs"), unix.MS_NOSUID|unix.MS_NODEV, b.str("mode=0755"))
	}
	b.call("entering the new root", unix.SYS_CHDIR, b.str("/tmp"))
	b.call("pivot_root into the sandbox", unix.SYS_PIVOT_ROOT, b.str("."), b.str("."))
	b.call("detaching the host root", unix.SYS_UMOUNT2, b.str("."), unix.MNT_DETACH)
	b.call("entering the new root", unix.SYS_CHDIR, b.str("/"))
	// The empty file every file mask is a copy of (see mask), made once.
	b.call("making the file masks' empty file", unix.SYS_MKNODAT, cwd, b.str(emptyMask), unix.S_IFREG, 0).okErrs = 1 << unix.EEXIST

	// Shorter paths first, so a more specific bind lands on top; the
	// private /tmp comes before binds below /tmp (which land on it).
	tmpDone := false
	for _, bd := range binds {
		if !tmpDone && bd.path != "/" {
			b.privateTmp(size)
			tmpDone = true
		}
		b.placeBind(bd)
	}
	if !tmpDone {
		b.privateTmp(size)
	}
	for _, r := range p.Read {
		b.pin(r, p.Write)
	}
	b.dev(devs, size)
	hostOnly, err := b.procAhead.result(p.Network == policy.NetworkAll)
	if err != nil {
		return err
	}
	b.proc(proc, hostOnly)
	b.protect(p)
	for _, d := range p.Deny {
		b.pin(d, p.Write)
		b.deny(d)
	}
	// The root directory itself (the tmpfs holding the mount points) is
	// read-only: the sandbox cannot create top-level entries.
	b.setAttr("making the root read-only", unix.AT_FDCWD, "/", 0, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	b.call("setting the hostname", unix.SYS_SETHOSTNAME, b.str("hutch"), 5)
	if p.Network != policy.NetworkAll {
		b.loopbackUp()
	}
	return nil
}

// hostBinds lists the policy's paths as they are on the host, shorter
// paths first. A path missing on the host is left out (the default policy
// lists /lib32 and friends); one that goes through a symbolic link is
// refused: a link planted in a writable directory must not redirect a
// bind, and hutch cannot tell it from one the user meant, so the user
// names the real path. Only the last element may be a link (/bin ->
// usr/bin); it is recreated as a link.
func hostBinds(p policy.Policy) (binds []bind, root *bind, err error) {
	for i, list := range [][]string{p.Read, p.Write} {
		for _, path := range list {
			bd := bind{path: path, writable: i == 1}
			if path == "/" {
				if root == nil || bd.writable {
					root = &bind{path: "/", writable: bd.writable}
				}
				continue
			}
			fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
				Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS,
			})
			switch {
			case errors.Is(err, unix.ENOENT):
				continue
			case errors.Is(err, unix.ELOOP):
				return nil, nil, fmt.Errorf("policy path %s goes through a symbolic link: give its real path", path)
			case err != nil:
				return nil, nil, fmt.Errorf("policy path %s: %w", path, err)
			}
			var st unix.Stat_t
			err = unix.Fstat(fd, &st)
			if err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				buf := make([]byte, 4096)
				var n int
				n, err = unix.Readlinkat(fd, "", buf)
				bd.link = string(buf[:max(n, 0)])
			}
			unix.Close(fd)
			if err != nil {
				return nil, nil, fmt.Errorf("policy path %s: %w", path, err)
			}
			bd.kind = st.Mode & unix.S_IFMT
			binds = append(binds, bd)
		}
	}
	slices.SortStableFunc(binds, func(a, b bind) int { return strings.Count(a.path, "/") - strings.Count(b.path, "/") })
	return binds, root, nil
}

// setAttr appends mount_setattr on dirfd/path with the given attributes.
func (b *builder) setAttr(what string, dirfd int, path string, flags uintptr, set uint64) *op {
	attr := &unix.MountAttr{Attr_set: set}
	return b.call(what, unix.SYS_MOUNT_SETATTR, uintptr(dirfd), b.str(path), flags, ptr(b, attr), sizeofMountAttr)
}

const sizeofMountAttr = unsafe.Sizeof(unix.MountAttr{})

// copyTree appends opening the host path (no symbolic link on the way,
// of the type seen by hostBinds) and copying its mount tree, read-only
// unless writable, without set-user-ID files or devices. It returns the
// slot of the detached copy.
func (b *builder) copyTree(path string, kind uint32, writable bool) uint8 {
	fd, tree := b.slot(), b.slot()
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	b.call("opening policy path "+path, unix.SYS_OPENAT2, cwd, b.str(path), ptr(b, how), unix.SizeofOpenHow).out = fd
	b.isType("opening policy path "+path, fd, kind)
	o := b.call("binding "+path, unix.SYS_OPEN_TREE, 0, b.str(""), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	o.in[0], o.out = fd, tree
	set := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if !writable {
		set |= unix.MOUNT_ATTR_RDONLY
	}
	b.setAttr("binding "+path, 0, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, set).in[0] = tree
	b.close(fd)
	return tree
}

// mkdirAll appends creating each directory of path (an existing one is
// fine), then path itself when dir is set.
func (b *builder) mkdirAll(path string, dir bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if !dir {
		parts = parts[:len(parts)-1]
	}
	for i := range parts {
		d := "/" + strings.Join(parts[:i+1], "/")
		b.call("creating "+d, unix.SYS_MKDIRAT, cwd, b.str(d), 0o755).okErrs = 1 << unix.EEXIST
	}
}

// placeBind appends mounting a bind's copy at its path in the new root
// (or recreating a link).
func (b *builder) placeBind(bd bind) {
	switch bd.kind {
	case unix.S_IFLNK:
		b.mkdirAll(bd.path, false)
		// Already present when a parent bind brought it.
		b.call("linking "+bd.path, unix.SYS_SYMLINKAT, b.str(bd.link), cwd, b.str(bd.path)).okErrs = 1 << unix.EEXIST
		return
	case unix.S_IFDIR:
		b.mkdirAll(bd.path, true)
	default:
		b.mkdirAll(bd.path, false)
		b.call("creating "+bd.path, unix.SYS_MKNODAT, cwd, b.str(bd.path), unix.S_IFREG|0o600, 0).okErrs = 1 << unix.EEXIST
	}
	b.mountAt("binding "+bd.path, bd.tree, bd.path)
}

// privateTmp appends mounting the sandbox's own empty /tmp.
func (b *builder) privateTmp(size string) {
	b.mkdirAll("/tmp", true)
	b.call("mounting /tmp", unix.SYS_MOUNT, b.str("tmpfs"), b.str("/tmp"), b.str("tmpfs"), unix.MS_NOSUID|unix.MS_NODEV, b.str("mode=1777"+size))
}

// onItself appends mounting the directory open in slot fd on itself as a
// copy with the given attributes added. The copy is recursive: it carries
// every mount already below the directory (a nested read-only path, a
// protected path's copy), which a copy of the directory's own mount alone
// would hide, leaving what they keep as the writable mount has it.
func (b *builder) onItself(what string, fd uint8, set uint64) {
	tree := b.slot()
	o := b.call(what, unix.SYS_OPEN_TREE, 0, b.str(""), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	o.in[0], o.out = fd, tree
	b.setAttr(what, 0, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, set).in[0] = tree
	b.mountOn(what, tree, fd)
}

// mountOn appends attaching the detached mount in slot mnt on what slot
// fd holds open, then closing mnt.
func (b *builder) mountOn(what string, mnt, fd uint8) {
	o := b.call(what, unix.SYS_MOVE_MOUNT, 0, b.str(""), 0, b.str(""), unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
	o.in[0], o.in[2] = mnt, fd
	b.close(mnt)
}

// pin appends making each directory between a writable policy path and
// path (a denied or nested read-only path below it) a mount point of
// itself: a mount point cannot be renamed, so no command can move the
// path's parent away and have the next sandbox with the same policy miss
// it. A directory that is missing, or is not one, is passed over.
func (b *builder) pin(path string, writable []string) {
	for _, w := range writable {
		if w == path || !strings.HasPrefix(path, strings.TrimSuffix(w, "/")+"/") {
			continue
		}
		for a := filepath.Dir(path); a != w && len(a) > len(w); a = filepath.Dir(a) {
			b.pinDir(a)
		}
	}
}

// pinDir appends making the directory a a mount point of itself (see
// pin); a directory that is missing, or is not one, is passed over.
func (b *builder) pinDir(a string) {
	fd := b.slot()
	start := b.mark()
	b.call("pinning "+a, unix.SYS_OPENAT, cwd, b.str(a), unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC).out = fd
	b.onItself("pinning "+a, fd, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	b.close(fd)
	b.skipTo(start, unix.ENOENT, unix.ENOTDIR, unix.ELOOP)
}

// protectRoots are where the policy's protected paths are kept: each
// writable path, and the start directory when it lies deeper in one.
func protectRoots(p policy.Policy) []string {
	roots := slices.Clone(p.Write)
	if p.Dir != "" && !slices.Contains(roots, p.Dir) && slices.ContainsFunc(p.Write, func(w string) bool { return strings.HasPrefix(p.Dir, strings.TrimSuffix(w, "/")+"/") }) {
		roots = append(roots, p.Dir)
	}
	return roots
}

// protect appends keeping the policy's protected paths (p.Protected())
// that exist at the top of each protect root read-only: each is copied,
// with everything mounted below it, read-only onto itself, so a write
// there fails (EROFS), and so does a rename or removal of the path itself
// (EBUSY: a mount point). Each directory on the way to one (.git for
// .git/hooks) is pinned, so that it cannot be moved aside and made anew,
// and so is a start directory deeper in a writable path, with the
// directories above it up to that path. A path that is missing, or that is or lies behind a symbolic link, is
// passed over: a mount needs a mount point, and the sandbox must not
// make one in the host's directory: the supervisor keeps those (see
// NeedsSupervision). With b.strictProtect, every path must be there and
// a missing one fails the program. Denied paths are masked afterwards,
// on top.
func (b *builder) protect(p policy.Policy) {
	entries := p.Protected()
	for _, root := range protectRoots(p) {
		if !slices.Contains(p.Write, root) {
			// The start directory, deeper in a writable path: it and each
			// directory up to that path are pinned too. Moved aside, it
			// would take its protected paths to names nothing keeps, and
			// a new one could be made in its place.
			b.pin(root, p.Write)
			b.pinDir(root)
		}
		pinned := map[string]bool{}
		for _, e := range entries {
			for d := path.Dir(e); d != "."; d = path.Dir(d) {
				if !pinned[d] {
					pinned[d] = true
					b.pinDir(path.Join(root, d))
				}
			}
		}
		for _, e := range entries {
			target := path.Join(root, e)
			fd, tree := b.slot(), b.slot()
			start := b.mark()
			how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
			b.call("protecting "+target, unix.SYS_OPENAT2, cwd, b.str(target), ptr(b, how), unix.SizeofOpenHow).out = fd
			o := b.call("protecting "+target, unix.SYS_OPEN_TREE, 0, b.str(""), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
			o.in[0], o.out = fd, tree
			b.setAttr("protecting "+target, 0, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV).in[0] = tree
			b.mountOn("protecting "+target, tree, fd)
			b.close(fd)
			if !b.strictProtect {
				b.skipTo(start, unix.ENOENT, unix.ENOTDIR, unix.ELOOP)
			}
		}
	}
}

// dev appends the sandbox's /dev: a tmpfs holding only harmless devices
// (copies of the host's), the usual links, and a /dev/shm of its own;
// read-only but for /dev/shm.
func (b *builder) dev(devs map[string]uint8, size string) {
	b.mkdirAll("/dev", true)
	b.call("mounting /dev", unix.SYS_MOUNT, b.str("tmpfs"), b.str("/dev"), b.str("tmpfs"), unix.MS_NOSUID|unix.MS_NOEXEC, b.str("mode=0755"))
	for _, d := range devNodes {
		t, ok := devs[d]
		if !ok {
			continue
		}
		dst := "/dev/" + d
		b.call("creating "+dst, unix.SYS_MKNODAT, cwd, b.str(dst), unix.S_IFREG|0o666, 0)
		b.mountAt("binding "+dst, t, dst)
	}
	for _, l := range [][2]string{{"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}} {
		b.call("linking /dev/"+l[0], unix.SYS_SYMLINKAT, b.str(l[1]), cwd, b.str("/dev/"+l[0]))
	}
	b.call("creating /dev/shm", unix.SYS_MKDIRAT, cwd, b.str("/dev/shm"), 0o1777)
	b.call("mounting /dev/shm", unix.SYS_MOUNT, b.str("tmpfs"), b.str("/dev/shm"), b.str("tmpfs"), unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, b.str("mode=1777"+size))
	b.setAttr("making /dev read-only", unix.AT_FDCWD, "/dev", 0, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
}

// procReadOnly are the /proc entries through which root controls the host
// (kernel tunables, the magic SysRq key, device and filesystem settings,
// interrupt affinity): the sandbox sees them read-only.
var procReadOnly = []string{"sys", "sysrq-trigger", "bus", "fs", "irq"}

// procHidden are /proc entries that every user may read and that still
// tell the sandbox about the host's kernel, its hardware or its other
// users: hidden whatever their mode. Entries only root may read are
// hidden too, found by hostOnlyEntries on the running kernel.
var procHidden = []string{"kcore", "keys", "timer_list", "sched_debug", "latency_stats", "acpi", "scsi", "kmsg"}

// proc appends a /proc of the sandbox's own PID namespace: kernel
// tunables and host controls read-only (procReadOnly), kernel internals
// hidden (procHidden, and hostOnly: every entry the host's unprivileged
// users cannot read, which the sandbox's root would otherwise read when
// hutch runs as root, since it then is the host's root).
func (b *builder) proc(mnt uint8, hostOnly []string) {
	b.mkdirAll("/proc", true)
	b.mountAt("mounting /proc", mnt, "/proc")
	hidden := make([]string, 0, len(procHidden)+len(hostOnly))
	for _, name := range procHidden {
		hidden = append(hidden, "/proc/"+name)
	}
	for _, path := range hostOnly {
		if !slices.Contains(hidden, path) {
			hidden = append(hidden, path)
		}
	}
	readOnlyEntries := procReadOnly
	if readsRootOnly() {
		readOnlyEntries = append(slices.Clone(procReadOnly), procOwnEntries(hidden)...)
	}
	for _, name := range readOnlyEntries {
		b.procEntry("/proc/"+name, func(what string, fd uint8) { b.onItself("making "+what+" read-only", fd, readOnly) })
	}
	for _, path := range hidden {
		b.procEntry(path, func(what string, fd uint8) { b.mask("hiding "+what, fd) })
	}
}

// procOwnEntries are the entries at the top of /proc, other than the
// processes' own (PID directories, self, thread-self), the links
// (mounts, net...), procReadOnly and hidden: /proc's files and
// directories of the kernel itself. When hutch runs as root the sandbox's
// root owns them, and the kernel keeps one mode and one set of times per
// entry for every /proc of the host: a chmod of /proc/meminfo inside
// would change it host-wide, until reboot. So they are read-only too
// (then chmod and utimensat fail with EROFS); a process's own entries
// refuse a chmod anyway. Read at each build: modules add entries.
func procOwnEntries(hidden []string) []string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil // the walk that found hidden failed on this too
	}
	var out []string
	for _, e := range ents {
		name := e.Name()
		switch {
		case name[0] >= '0' && name[0] <= '9', name == "self", name == "thread-self",
			e.Type()&fs.ModeSymlink != 0, slices.Contains(procReadOnly, name), slices.Contains(hidden, "/proc/"+name):
			continue
		}
		out = append(out, name)
	}
	return out
}

// procEntry appends opening path (not following a link) and calling do
// with it; a path this kernel does not have is passed over.
func (b *builder) procEntry(path string, do func(what string, fd uint8)) {
	fd := b.slot()
	start := b.mark()
	b.call("opening "+path, unix.SYS_OPENAT, cwd, b.str(path), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC).out = fd
	do(path, fd)
	b.close(fd)
	b.skipTo(start, unix.ENOENT)
}

// ProcWalk is the walk of /proc (hostOnlyEntries) that a sandbox's root
// needs, started ahead of the root's build (WalkProcAhead), so that it
// overlaps the caller's own work before RunOnce.
type ProcWalk struct {
	withHostNet bool
	done        chan struct{}
	out         []string
	err         error
}

// WalkProcAhead starts, in a goroutine of its own, the walk of /proc for
// the root of a sandbox with pol's network: hostOnlyEntries's, which takes a
// few milliseconds of the kernel's. Give it to RunOnce (OneShot.Proc),
// once. It returns nil when the sandbox could not read the entries it
// looks for anyway (readsRootOnly): then nothing is walked.
func WalkProcAhead(pol policy.Policy) *ProcWalk {
	if !readsRootOnly() {
		return nil
	}
	w := &ProcWalk{withHostNet: pol.Network == policy.NetworkAll, done: make(chan struct{})}
	// A start that can build its root from the last walk's list (guess)
	// does not wait for this one: it walks on one thread, and leaves the
	// other cores to the fork and the root's build.
	helpers := procWalkers
	if _, ok := lastWalk(w.withHostNet); ok {
		helpers = 0
	}
	go func() {
		w.out, w.err = hostOnlyEntries(w.withHostNet, helpers)
		close(w.done)
	}()
	return w
}

// Result is what the walk found for a sandbox with pol's network, once
// it is done (see result): the list a session's init is given
// (wire.Job.HiddenProc).
func (w *ProcWalk) Result(pol policy.Policy) ([]string, error) {
	return w.result(pol.Network == policy.NetworkAll)
}

// guess is what a root built before this walk ends may hide instead of
// waiting for it: the list the latest walk of this process with the same
// network returned, while this one still runs (ok false otherwise). A
// root built from a guess must not run its command before the walk has
// confirmed it (RunOnce's gate).
func (w *ProcWalk) guess(withHostNet bool) (list []string, ok bool) {
	if w == nil || w.withHostNet != withHostNet {
		return nil, false
	}
	select {
	case <-w.done:
		return nil, false // no need to guess
	default:
	}
	return lastWalk(withHostNet)
}

// walked is a walk already done elsewhere, whose result is hidden: the
// host's, for a session's init, which cannot tell from inside (it is
// root in its own user namespace, whatever the host's user).
func walked(p policy.Policy, hidden []string) *ProcWalk {
	done := make(chan struct{})
	close(done)
	return &ProcWalk{withHostNet: p.Network == policy.NetworkAll, done: done, out: hidden}
}

// result is the entries a root with (withHostNet) or without the host's
// network hides: w's, once its walk is done, when w walked for that
// network; otherwise those of a walk now, or none when the sandbox could
// not read them (readsRootOnly). A walk that failed is an error: a
// list it left short would leave root-only entries readable.
func (w *ProcWalk) result(withHostNet bool) ([]string, error) {
	if w != nil && w.withHostNet == withHostNet {
		<-w.done
		return w.out, w.err
	}
	if !readsRootOnly() {
		return nil, nil
	}
	return hostOnlyEntries(withHostNet, procWalkers)
}

// readOnly are the attributes of a mount nothing may change or run from.
const readOnly = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC

// mountAt appends attaching the detached mount in slot mnt at path, then
// closing mnt.
func (b *builder) mountAt(what string, mnt uint8, path string) {
	b.call(what, unix.SYS_MOVE_MOUNT, 0, b.str(""), cwd, b.str(path), unix.MOVE_MOUNT_F_EMPTY_PATH).in[0] = mnt
	b.close(mnt)
}

// newMount appends making a detached mount of a new filesystem of type
// fstype (with one "key=value" option, or none) and returns its slot.
func (b *builder) newMount(fstype, option string, attrs uintptr) uint8 {
	what := "mounting a new " + fstype
	fs, mnt := b.slot(), b.slot()
	b.call(what, unix.SYS_FSOPEN, b.str(fstype), unix.FSOPEN_CLOEXEC).out = fs
	if k, v, ok := strings.Cut(option, "="); ok {
		b.call(what, unix.SYS_FSCONFIG, 0, unix.FSCONFIG_SET_STRING, b.str(k), b.str(v), 0).in[0] = fs
	}
	b.call(what, unix.SYS_FSCONFIG, 0, unix.FSCONFIG_CMD_CREATE, 0, 0, 0).in[0] = fs
	o := b.call(what, unix.SYS_FSMOUNT, 0, unix.FSMOUNT_CLOEXEC, attrs)
	o.in[0], o.out = fs, mnt
	b.close(fs)
	return mnt
}

// emptyMask is the empty file, nobody's to read (mode 0), that a file
// mask is a read-only copy of: made once, at the new root's top.
const emptyMask = "/.hutch-denied"

// mask appends hiding what slot fd holds open: a directory under an empty
// read-only tmpfs, a file under a copy of emptyMask.
func (b *builder) mask(what string, fd uint8) {
	b.ifDir(what, fd, func() {
		b.mountOn(what, b.newMount("tmpfs", "mode=0755", readOnly), fd)
	}, func() {
		tree := b.slot()
		b.call(what, unix.SYS_OPEN_TREE, cwd, b.str(emptyMask), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC).out = tree
		b.setAttr(what, 0, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, readOnly).in[0] = tree
		b.mountOn(what, tree, fd)
	})
}

// deny appends masking a denied path, resolved as the sandbox resolves it
// (links and all, inside the new root): a link to a denied file leads to
// the mask, not around it. A path the sandbox cannot see is passed over,
// and so is one that does not resolve to a file at all (a link loop, or a
// /proc magic link a command planted in a writable directory): inside,
// that name leads nowhere, or to what the policy governs by its own name.
// A planted ordinary link does move the mask onto its target (see the
// docs/isolated.md: masks follow links, so that a denied file's links are masked
// too).
func (b *builder) deny(path string) {
	fd := b.slot()
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_MAGICLINKS}
	start := b.mark()
	b.call("denied path "+path, unix.SYS_OPENAT2, cwd, b.str(path), ptr(b, how), unix.SizeofOpenHow).out = fd
	b.mask("masking "+path, fd)
	b.close(fd)
	b.skipTo(start, unix.ENOENT, unix.ELOOP)
}

// loopbackUp appends bringing up "lo" in the sandbox's own network
// namespace, which has no other interface: the command can talk to
// itself, nothing else.
func (b *builder) loopbackUp() {
	ifr, _ := unix.NewIfreq("lo")
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	s := b.slot()
	b.call("bringing up loopback", unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0).out = s
	b.call("bringing up loopback", unix.SYS_IOCTL, 0, unix.SIOCSIFFLAGS, ptr(b, ifr)).in[0] = s
	b.close(s)
}
