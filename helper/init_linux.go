package helper

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/policy"
)

// initMain is PID 1 of the sandbox's new user, mount, PID, IPC, UTS and
// (unless the network is "all") network namespaces. It reads the "start"
// request on its socket (fd 3), builds the sandbox's filesystem view from
// the policy, then serves file operations and commands until the host
// closes the socket or kills it. When it exits the kernel kills whatever
// is left in the PID namespace.
func initMain() int {
	// The control socket (closeInheritedOnExec, run by Main, marked it)
	// must never reach a command the init starts, nor through /proc; and
	// PID 1 of the sandbox (the starter of a one-shot run's command, too)
	// must not die of a command's signal.
	unreachable()
	conn, req, ok := recvStart()
	if !ok {
		return 1
	}
	job := *req.Job
	fail := func(w *WireError) int {
		_ = conn.Send(Response{ID: req.ID, Err: w})
		return 1
	}
	unsupported := func(err error) *WireError {
		return &WireError{Kind: "unsupported", Msg: "building the sandbox: " + err.Error()}
	}
	if err := setup(job); err != nil {
		return fail(unsupported(err))
	}
	if job.Policy.Network == policy.NetworkAllow {
		// Listening before the sandbox is reported ready: no command can
		// take the port first.
		ls, err := listenProxy()
		if err != nil {
			return fail(unsupported(err))
		}
		bridge(NewConn(NetFD), ls)
	}
	s, err := newServer(conn, job)
	if err != nil {
		return fail(ToWire(fmt.Errorf("building the sandbox: %w", err)))
	}
	if err := conn.Send(Response{ID: req.ID}); err != nil {
		return 1
	}
	s.serve()
	return 0
}

func setup(job Job) error {
	if err := buildRoot(job); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte("hutch")); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if job.Policy.Network != "all" {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("bringing up loopback: %w", err)
		}
	}
	return nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// mount flags a bind keeps from its source when remounted: in a user
// namespace, these flags of a host mount are locked and must be repeated.
const lockedFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME

type bind struct {
	path     string // the same path outside and inside
	writable bool
}

// buildRoot makes the sandbox's filesystem: a tmpfs root holding only the
// policy's paths (read-only or writable binds), denied paths masked, a
// fresh /proc, a minimal /dev, a private /tmp; then pivots into it. It
// follows bubblewrap's approach: the old root stays reachable at /oldroot
// while the new one is built, then is detached.
func buildRoot(job Job) error {
	p := job.Policy
	if m := int64(p.Limits.Memory); m > 0 {
		tmpfsSize = fmt.Sprintf(",size=%d", m)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	base := "/tmp"
	if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mounting the staging tmpfs: %w", err)
	}
	for _, d := range []string{base + "/newroot", base + "/oldroot"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("tmpfs", base+"/newroot", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mounting the new root: %w", err)
	}
	if err := unix.PivotRoot(base, base+"/oldroot"); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	binds := []bind{}
	for _, r := range p.Read {
		binds = append(binds, bind{r, false})
	}
	for _, w := range p.Write {
		binds = append(binds, bind{w, true})
	}
	// Shorter paths first: a more specific bind lands on top. The private
	// /tmp goes after a bind of "/" (which would hide it) and before
	// binds below /tmp (which land on it).
	slices.SortStableFunc(binds, func(a, b bind) int { return strings.Count(a.path, "/") - strings.Count(b.path, "/") })
	tmpDone := false
	for _, b := range binds {
		if !tmpDone && b.path != "/" {
			if err := privateTmp(); err != nil {
				return err
			}
			tmpDone = true
		}
		if err := bindPath(b); err != nil {
			return err
		}
	}
	if !tmpDone {
		if err := privateTmp(); err != nil {
			return err
		}
	}
	for _, r := range p.Read {
		if err := pin(r, p.Write); err != nil {
			return err
		}
	}
	if err := mountProcDev(); err != nil {
		return err
	}
	for _, d := range p.Deny {
		if err := deny(d, p.Write); err != nil {
			return err
		}
	}
	// Leave /oldroot behind and make the new root the root.
	if err := unix.Unmount("/oldroot", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host root: %w", err)
	}
	if err := unix.Chdir("/newroot"); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root into the sandbox: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the staging root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	// The root directory itself (the tmpfs holding the mount points) is
	// read-only: the sandbox cannot create top-level entries.
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("making the root read-only: %w", err)
	}
	return nil
}

// bindPath mounts the host path (seen at /oldroot) at the same path in the
// new root. A path missing on the host is skipped (the default policy
// lists /lib32 and friends). Symbolic links are recreated as links, so
// /bin -> usr/bin keeps working.
func bindPath(b bind) error {
	src, dst := "/oldroot"+b.path, "/newroot"+b.path
	if b.path == "/" {
		src, dst = "/oldroot", "/newroot"
	}
	// Open the host path without following a symbolic link in any
	// directory on the way: a link planted by an earlier sandbox in a
	// writable directory must not redirect a bind, and hutch cannot tell
	// such a link from one the user meant, so a policy path through a link
	// is refused (the user names the real path). Only the last element may
	// be a link (/bin -> usr/bin), recreated as a link. The bind then
	// mounts exactly what was opened.
	fd, err := unix.Openat2(unix.AT_FDCWD, src, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil // missing on this host (the default policy lists /lib32...)
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("policy path %s goes through a symbolic link: give its real path", b.path)
	case err != nil:
		return fmt.Errorf("policy path %s: %w", b.path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		buf := make([]byte, 4096)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return err
		}
		if err := mkdirAll(filepath.Dir(dst)); err != nil {
			return err
		}
		if _, err := os.Lstat(dst); err == nil {
			return nil // already present (a parent bind brought it)
		}
		return os.Symlink(string(buf[:n]), dst)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := mkdirAll(dst); err != nil {
			return err
		}
	} else {
		if err := mkdirAll(filepath.Dir(dst)); err != nil {
			return err
		}
		if f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			f.Close()
		} else if !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	opened := fmt.Sprintf("/oldroot/proc/self/fd/%d", fd)
	if err := unix.Mount(opened, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding %s: %w", b.path, err)
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if !b.writable {
		flags |= unix.MS_RDONLY
	}
	return remountTree(dst, flags)
}

// remountTree applies flags to the mount at dst and every mount below it
// (a recursive bind copies submounts, which a plain remount would leave
// writable). Flags the kernel locked on the source are kept.
func remountTree(dst string, flags uintptr) error {
	mounts, err := mountsUnder(dst)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		var st unix.Statfs_t
		if err := unix.Statfs(m, &st); err != nil {
			continue // a mount we cannot see into; leave it
		}
		locked := uintptr(st.Flags) & lockedFlags
		if err := unix.Mount("", m, "", unix.MS_REMOUNT|unix.MS_BIND|flags|locked, ""); err != nil {
			return fmt.Errorf("remounting %s: %w", strings.TrimPrefix(m, "/newroot"), err)
		}
	}
	return nil
}

// mountsUnder lists dst and the mount points below it, from mountinfo.
func mountsUnder(dst string) ([]string, error) {
	f, err := os.Open("/oldroot/proc/self/mountinfo") // the host /proc, while building
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := []string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dst || strings.HasPrefix(mp, dst+"/") {
			if !slices.Contains(out, mp) {
				out = append(out, mp)
			}
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// tmpfsSize bounds the sandbox's memory-backed filesystems (/tmp and
// /dev/shm): by the policy's memory limit when it has one (tmpfs pages are
// not counted by the per-process rlimit fallback), else the kernel's
// default of half the RAM.
var tmpfsSize string

// privateTmp mounts the sandbox's own empty /tmp.
func privateTmp() error {
	if err := mkdirAll("/newroot/tmp"); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/newroot/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"+tmpfsSize); err != nil {
		return fmt.Errorf("mounting /tmp: %w", err)
	}
	return nil
}

// mountProcDev gives the sandbox a /proc of its own PID namespace and a
// /dev with only harmless devices.
func mountProcDev() error {
	if err := mkdirAll("/newroot/proc"); err != nil {
		return err
	}
	if err := unix.Mount("proc", "/newroot/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	// Kernel tunables are read-only inside, whatever the command owns.
	if err := unix.Mount("/newroot/proc/sys", "/newroot/proc/sys", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("binding /proc/sys: %w", err)
	}
	if err := unix.Mount("", "/newroot/proc/sys", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("making /proc/sys read-only: %w", err)
	}
	// Host controls and kernel internals under /proc: read-only, or hidden
	// (as container runtimes do). With hutch running as root the sandbox's
	// root would otherwise pass their permission checks.
	for _, p := range []string{"sysrq-trigger", "bus", "fs", "irq"} {
		d := "/newroot/proc/" + p
		if _, err := os.Lstat(d); err != nil {
			continue
		}
		if err := unix.Mount(d, d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("binding /proc/%s: %w", p, err)
		}
		if err := unix.Mount("", d, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("making /proc/%s read-only: %w", p, err)
		}
	}
	for _, p := range []string{"kcore", "keys", "timer_list", "sched_debug", "latency_stats", "acpi", "scsi", "kmsg"} {
		d := "/newroot/proc/" + p
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		src, flags := "/oldroot/dev/null", uintptr(unix.MS_BIND)
		if fi.IsDir() {
			src, flags = "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC
		}
		fstype := ""
		if fi.IsDir() {
			fstype = "tmpfs"
		}
		if err := unix.Mount(src, d, fstype, flags, ""); err != nil {
			return fmt.Errorf("hiding /proc/%s: %w", p, err)
		}
	}
	if err := mkdirAll("/newroot/dev"); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/newroot/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return fmt.Errorf("mounting /dev: %w", err)
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		dst := "/newroot/dev/" + d
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o666)
		if err != nil {
			return err
		}
		f.Close()
		if err := unix.Mount("/oldroot/dev/"+d, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding /dev/%s: %w", d, err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, "/newroot/dev/"+name); err != nil {
			return err
		}
	}
	if err := os.Mkdir("/newroot/dev/shm", 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/newroot/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777"+tmpfsSize); err != nil {
		return fmt.Errorf("mounting /dev/shm: %w", err)
	}
	return unix.Mount("", "/newroot/dev", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "")
}

// deny masks a path: a directory becomes an empty read-only tmpfs, a file
// an empty file nobody may read.
func deny(path string, writable []string) error {
	// Pin first: the mask must land on the mount that stays visible.
	if err := pin(path, writable); err != nil {
		return err
	}
	// Resolve the path as the sandbox will, links and all, with /newroot
	// as its root: a link (even an absolute one) to the denied file must
	// lead to the mask, not around it.
	root, err := unix.Open("/newroot", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, strings.TrimPrefix(path, "/"), &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOENT) {
		return nil // not visible anyway
	}
	if err != nil {
		return fmt.Errorf("denied path %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	target := fmt.Sprintf("/oldroot/proc/self/fd/%d", fd)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return unix.Mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755")
	}
	empty := "/newroot/.hutch-denied"
	if _, err := os.Lstat(empty); err != nil {
		f, err := os.OpenFile(empty, os.O_CREATE|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		f.Close()
	}
	// Where the path really leads (the descriptor keeps pointing at the
	// file under the mask, so the remount goes by this name).
	real, err := os.Readlink(target)
	if err != nil {
		return err
	}
	if err := unix.Mount(empty, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("masking %s: %w", path, err)
	}
	if err := unix.Mount("", real, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("masking %s read-only: %w", path, err)
	}
	return nil
}

// pin makes each directory between a writable policy path and path (a
// denied or nested read-only path below it) a mount point of itself: a
// mount point cannot be renamed, so no command can move the path's parent
// away and have the next sandbox with the same policy miss it.
func pin(path string, writable []string) error {
	for _, w := range writable {
		if w == path || !strings.HasPrefix(path, strings.TrimSuffix(w, "/")+"/") {
			continue
		}
		for a := filepath.Dir(path); a != w && len(a) > len(w); a = filepath.Dir(a) {
			ad := "/newroot" + a
			if fi, err := os.Lstat(ad); err != nil || !fi.IsDir() {
				continue
			}
			if err := unix.Mount(ad, ad, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("pinning %s: %w", a, err)
			}
			if err := unix.Mount("", ad, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
				return fmt.Errorf("pinning %s: %w", a, err)
			}
		}
	}
	return nil
}

func mkdirAll(p string) error {
	if err := os.MkdirAll(p, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", p, err)
	}
	return nil
}

// loopbackUp brings up "lo" in the sandbox's own network namespace, which
// has no other interface: the command can talk to itself, nothing else.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
