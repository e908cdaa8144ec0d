package isolated_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

// protectedSession is a session writing dir (its start directory) under
// the default policy, its protected paths included.
func protectedSession(t *testing.T, dir string) sandbox.Sandbox {
	t.Helper()
	e := newEnv(t)
	pol := e.pol.Extend(policy.Policy{Write: []string{dir}, Read: []string{"/usr", "/bin"}})
	pol.Dir = dir
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	sb, err := isolated.New(ctx, isolated.Options{Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// Protected paths stay read-only in a writable root: the file tools
// refuse every one, existing or not; a command cannot write, create,
// rename or remove one, whether it existed when the sandbox started (the
// read-only mounts) or not (the supervisor), by redirection, cp, mv, ln
// (soft or hard), mkdir, touch, chmod or rm, nor through a link.
func TestProtectedPathsStayReadOnly(t *testing.T) {
	sandboxtest.RunProtectedAll(t, protectedSession, "")
}

// git init, add and commit work in a writable root without a repository
// (the supervisor lets git init make its .git, an empty hooks directory
// with *.sample files and a config of its own settings), and git add and
// commit in one with its hooks and config protected; in neither can a
// command plant a hook or a core.fsmonitor, by git or by hand.
func TestGitCommitWorksInAWritableRoot(t *testing.T) {
	git := "/usr/bin/git"
	if _, err := os.Stat(git); err != nil {
		testenv.Missing(t, "git (scripts/test.sh installs it)")
	}
	plants := []struct{ name, script string }{
		{"a hook by redirection", "echo 'touch /tmp/pwned' > .git/hooks/pre-commit"},
		{"a hook by cp", "printf '#!/bin/sh\ntouch /tmp/pwned\n' > evil && chmod +x evil && cp evil .git/hooks/post-checkout"},
		{"a hook from a sample", "mv .git/hooks/pre-commit.sample .git/hooks/pre-commit || cp .git/hooks/pre-commit.sample .git/hooks/pre-commit"},
		{"a hook by link", "ln -s ../../evil .git/hooks/pre-push"},
		{"a hooks directory moved in", "mkdir -p h && cp evil h/pre-commit && mv .git/hooks .git/hooks.old; mv h .git/hooks"},
		{"core.fsmonitor by git config", "git config core.fsmonitor 'touch /tmp/pwned'"},
		{"core.hooksPath by git config", "git config core.hooksPath /tmp"},
		{"core.fsmonitor by hand", "printf '[core]\n\tfsmonitor = touch /tmp/pwned\n' >> .git/config"},
		{"a config moved in", "printf '[core]\n\tfsmonitor = evil\n' > cfg && mv -f cfg .git/config"},
		{"a config through a hard link", "ln .git/config cfg2 && printf '[core]\n\tfsmonitor = evil\n' >> cfg2"},
		{"a config through a symbolic link", "ln -s .git/config cfg3 && printf '[core]\n\tfsmonitor = evil\n' >> cfg3"},
		{"a .git moved aside and made anew", "mv .git .git.old && mkdir -p .git/hooks && cp evil .git/hooks/pre-commit; mv .git.old/config .git/config"},
		{"a gitfile", "rm -rf .git.x; mv .git .git.x; echo 'gitdir: .git.x' > .git"},
		{"commondir", "echo evil > .git/commondir"},
	}
	for _, existing := range []bool{false, true} {
		dir := t.TempDir()
		if existing {
			if out, err := exec.Command(git, "init", "-q", dir).CombinedOutput(); err != nil {
				t.Fatalf("git init on the host: %v %s", err, out)
			}
		}
		sb := protectedSession(t, dir)
		script := `set -e
export HOME=/tmp GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b
[ -d .git ] || git init -q
echo hello > a.txt
git add .
git commit -q -m first
echo more >> a.txt
git commit -q -am second
git log --oneline | wc -l`
		ctx, cancel := context.WithTimeout(bg, 60*time.Second)
		res, err := sb.Exec(ctx, sandbox.Command{Shell: script, Timeout: 50 * time.Second})
		cancel()
		if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "2" {
			t.Errorf("git in a writable root (repository before: %v): exit %d, %v\n%s%s", existing, res.ExitCode, err, res.Stdout, res.Stderr)
		}
		// The repository the sandbox made is one for git on the host.
		if out, err := exec.Command(git, "-C", dir, "log", "--oneline").CombinedOutput(); err != nil || strings.Count(string(out), "\n") != 2 {
			t.Errorf("repository before: %v: git log on the host: %v %s", existing, err, out)
		}
		for _, p := range plants {
			_, _ = execShell(t, sb, "export HOME=/tmp; "+p.script+" 2>/dev/null; true")
			if bad := planted(dir); len(bad) > 0 {
				t.Errorf("repository before: %v: %s made %v", existing, p.name, bad)
			}
			for _, key := range []string{"core.fsmonitor", "core.hooksPath"} {
				if out, _ := exec.Command(git, "-C", dir, "config", "--get", key).Output(); len(out) > 0 {
					t.Errorf("repository before: %v: %s set %s = %s", existing, p.name, key, out)
				}
			}
		}
		_ = sb.Close()
	}
}

// BenchmarkProtectedStart is what protection costs a one-shot command
// in a writable root holding every default protected path (a read-only
// copy and the pins each), against the same with none, and a loop of
// 2000 file creations (a build's hot path) in each.
func BenchmarkProtectedStart(b *testing.B) {
	if err := isolated.Supported(); err != nil {
		b.Skip(err)
	}
	dir := b.TempDir()
	for _, e := range policy.DefaultProtected {
		p := dir + "/" + e
		if strings.Contains(e, ".") && !strings.HasSuffix(e, "hooks") && e != ".vscode" && e != ".idea" && e != ".claude" && e != ".codex" && e != ".gemini" {
			_ = os.MkdirAll(path.Dir(p), 0o755)
			_ = os.WriteFile(p, []byte("seed"), 0o644)
		} else {
			_ = os.MkdirAll(p, 0o755)
		}
	}
	for _, c := range []struct {
		name      string
		unprotect []string
		shell     string
	}{
		{"protected/true", nil, "true"},
		{"unprotected/true", policy.DefaultProtected, "true"},
		{"protected/2000 creates", nil, "mkdir -p out && i=0; while [ $i -lt 2000 ]; do : > out/f$i; i=$((i+1)); done; rm -r out"},
		{"unprotected/2000 creates", policy.DefaultProtected, "mkdir -p out && i=0; while [ $i -lt 2000 ]; do : > out/f$i; i=$((i+1)); done; rm -r out"},
	} {
		b.Run(c.name, func(b *testing.B) {
			pol := policy.Default().Extend(policy.Policy{Write: []string{dir}, Unprotect: c.unprotect})
			for b.Loop() {
				res, err := isolated.Run(bg, pol, sandbox.Command{Shell: c.shell, Timeout: 20 * time.Second})
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("%v %d %s", err, res.ExitCode, res.Stderr)
				}
			}
		})
	}
}

// supervisedSession is protectedSession over a root holding nothing but
// a file "other": every protected path is missing, so its commands are
// supervised.
func supervisedSession(t *testing.T) (sandbox.Sandbox, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "other"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := protectedSession(t, dir)
	t.Cleanup(func() { _ = sb.Close() })
	return sb, dir
}

// exec runs a shell script in sb and returns its output.
func execShell(t *testing.T, sb sandbox.Sandbox, script string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 120*time.Second)
	defer cancel()
	res, err := sb.Exec(ctx, sandbox.Command{Shell: script, Timeout: 110 * time.Second})
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	return string(res.Stdout) + string(res.Stderr), res.ExitCode
}

// planted lists what a command made of the protected paths in dir: every
// one that exists, but for git init's own in a .git (an empty hooks
// directory or one of *.sample files, a config of git init's settings).
func planted(dir string) []string {
	var out []string
	for _, e := range policy.DefaultProtected {
		p := filepath.Join(dir, e)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		switch e {
		case ".git/hooks":
			ents, _ := os.ReadDir(p)
			ok := fi.IsDir()
			for _, d := range ents {
				ok = ok && strings.HasSuffix(d.Name(), ".sample") && d.Type().IsRegular()
			}
			if ok {
				continue
			}
		case ".git/config":
			data, _ := os.ReadFile(p)
			if fi.Mode().IsRegular() && regexp.MustCompile(`^(\[core\]\n(\t[a-z]+ = [a-z0-9]+\n)*)*$`).Match(data) {
				continue
			}
		}
		out = append(out, fmt.Sprintf("%s (%v)", e, fi.Mode()))
	}
	return out
}

// A command cannot make any protected path that was missing when the
// sandbox started, by any route: redirection, tee, cp, mv, ln -s, a hard
// link, mkdir (nested too), touch, install, mkfifo, a dangling link, ..
// and absolute paths, /proc/self/cwd, and python's os.open and os.mkdir.
func TestProtectedMissingPathsEveryRoute(t *testing.T) {
	routes := append(slices.Clone(sandboxtest.CreateRoutes),
		sandboxtest.CreateRoute{Name: "python open", Script: `python3 -c 'import os; os.open("F", os.O_CREAT|os.O_WRONLY, 0o755)'`},
		sandboxtest.CreateRoute{Name: "python mkdir", Script: `python3 -c 'import os; os.makedirs("F/x")'`},
		sandboxtest.CreateRoute{Name: "python rename", Script: `python3 -c 'import os; open("o3","w").write("x"); os.replace("o3", "F")'`},
	)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		routes = slices.DeleteFunc(routes, func(r sandboxtest.CreateRoute) bool { return strings.HasPrefix(r.Name, "python") })
		t.Log("no /usr/bin/python3: its routes are left out")
	}
	sb, dir := supervisedSession(t)
	for _, r := range routes {
		t.Run(r.Name, func(t *testing.T) {
			out, _ := execShell(t, sb, sandboxtest.ProtectedScript(r))
			if !strings.Contains(out, "done") {
				t.Fatalf("the script did not run: %s", out)
			}
			if p := planted(dir); len(p) > 0 {
				t.Errorf("%s made %v", r.Name, p)
				for _, e := range policy.DefaultProtected {
					_ = os.RemoveAll(filepath.Join(dir, e))
				}
			}
		})
	}
	// What is not protected was made all along.
	if out, code := execShell(t, sb, "echo ok > made && mkdir -p x/.vscode && echo ok > x/.bashrc && cat made x/.bashrc"); code != 0 || out != "ok\nok\n" {
		t.Errorf("ordinary files: exit %d, %q", code, out)
	}
}

// The test binary runs these inside a supervised sandbox
// (testenv.RegisterProgram): attacks on the supervisor.
func init() {
	testenv.RegisterProgram("supervisor-race", func(args []string) { supervisorRace() })
	testenv.RegisterProgram("supervisor-paths", func(args []string) { supervisorPaths() })
}

// atFDCWD is AT_FDCWD as a raw system call's argument.
const atFDCWD = ^uintptr(99)

// supervisorRace makes names from a path that another thread rewrites
// all the while between a free name and a protected one of the same
// length: whatever it reads, the supervisor must make only what it
// checked. It prints how many names it made.
func supervisorRace() {
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		fmt.Println("mmap:", err)
		return
	}
	copy(mem, "safe000\x00")
	_ = os.WriteFile("src", []byte("x"), 0o644)
	var stop atomic.Bool
	go func() {
		runtime.LockOSThread()
		for !stop.Load() {
			copy(mem, ".bashrc")
			copy(mem, "safe000")
		}
	}()
	p := uintptr(unsafe.Pointer(&mem[0]))
	src, x := []byte("src\x00"), []byte("x\x00")
	made := 0
	for i := range 4000 {
		var e syscall.Errno
		switch i % 5 {
		case 0:
			var fd uintptr
			fd, _, e = unix.Syscall6(unix.SYS_OPENAT, atFDCWD, p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644, 0, 0)
			if e == 0 {
				unix.Close(int(fd))
			}
		case 1:
			_, _, e = unix.Syscall(unix.SYS_MKDIRAT, atFDCWD, p, 0o755)
		case 2:
			_, _, e = unix.Syscall6(unix.SYS_SYMLINKAT, uintptr(unsafe.Pointer(&x[0])), atFDCWD, p, 0, 0, 0)
		case 3:
			_, _, e = unix.Syscall6(unix.SYS_LINKAT, atFDCWD, uintptr(unsafe.Pointer(&src[0])), atFDCWD, p, 0, 0)
		case 4:
			_ = os.WriteFile("src2", []byte("x"), 0o644)
			s2 := []byte("src2\x00")
			_, _, e = unix.Syscall6(unix.SYS_RENAMEAT2, atFDCWD, uintptr(unsafe.Pointer(&s2[0])), atFDCWD, p, 0, 0)
		}
		if e == 0 {
			made++
		}
		_ = os.RemoveAll("safe000")
	}
	stop.Store(true)
	fmt.Println("made", made)
}

// supervisorPaths tries paths of every shape on the supervisor and
// prints "BAD" for each answer that is not the kernel's own (or, for a
// protected path, EPERM).
func supervisorPaths() {
	check := func(name string, err error, want error) {
		if !errors.Is(err, want) && !(err == nil && want == nil) {
			fmt.Printf("BAD %s: %v, want %v\n", name, err, want)
		} else {
			fmt.Printf("ok %s\n", name)
		}
	}
	create := func(dirfd int, p string) error {
		fd, err := unix.Openat(dirfd, p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o666)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	cwd, _ := unix.Open(".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	wd, _ := os.Getwd()
	_ = os.Mkdir("sub", 0o755)
	_ = os.WriteFile("src", []byte("x"), 0o644)
	file, _ := unix.Open("src", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	check("dotdot", create(unix.AT_FDCWD, "sub/../.bashrc"), unix.EPERM)
	check("absolute", create(unix.AT_FDCWD, wd+"/.bash_profile"), unix.EPERM)
	check("double slashes", create(unix.AT_FDCWD, "//"+wd+"//.zprofile"), unix.EPERM)
	check("dot", create(unix.AT_FDCWD, "./.vscode"), unix.EPERM)
	check("proc self cwd", create(unix.AT_FDCWD, "/proc/self/cwd/.zshrc"), unix.EPERM)
	check("proc thread-self cwd", create(unix.AT_FDCWD, "/proc/thread-self/cwd/.profile"), unix.EPERM)
	check("dev fd", create(unix.AT_FDCWD, fmt.Sprintf("/dev/fd/%d/.mcp.json", cwd)), unix.EPERM)
	check("proc self fd", create(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d/sub/../.gitconfig", cwd)), unix.EPERM)
	check("dirfd", create(cwd, ".gemini"), unix.EPERM)
	check("the init's /proc", create(unix.AT_FDCWD, "/proc/1/cwd/x"), unix.ENOENT)
	check("mkdirat dirfd", unix.Mkdirat(cwd, ".claude", 0o755), unix.EPERM)
	check("mknod fifo", unix.Mknodat(unix.AT_FDCWD, ".zshenv", unix.S_IFIFO|0o644, 0), unix.EPERM)
	check("rename onto", unix.Renameat2(unix.AT_FDCWD, "src", unix.AT_FDCWD, ".gitmodules", 0), unix.EPERM)
	check("rename exchange", unix.Renameat2(unix.AT_FDCWD, "src", unix.AT_FDCWD, ".codex", unix.RENAME_EXCHANGE), unix.EPERM)
	check("link", unix.Linkat(unix.AT_FDCWD, "src", unix.AT_FDCWD, ".ripgreprc", 0), unix.EPERM)
	check("link empty path", unix.Linkat(file, "", unix.AT_FDCWD, "flinked", unix.AT_EMPTY_PATH), unix.ENOENT)
	_ = os.Symlink(".bashrc", "dangling")
	check("dangling link", create(unix.AT_FDCWD, "dangling"), unix.EPERM)
	check("dangling link, O_EXCL", func() error {
		_, err := unix.Open("dangling", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
		return err
	}(), unix.EEXIST)
	_ = os.Symlink("c2", "c1")
	_ = os.Symlink(wd+"/.idea/x", "c2")
	check("link chain into a missing directory", create(unix.AT_FDCWD, "c1"), unix.ENOENT)
	_ = os.Symlink("l2", "l1")
	_ = os.Symlink("l1", "l2")
	check("link loop", create(unix.AT_FDCWD, "l1"), unix.ELOOP)
	check("link through a link to the directory", func() error {
		_ = os.Symlink(".", "here")
		return create(unix.AT_FDCWD, "here/here/.bashrc")
	}(), unix.EPERM)
	check("trailing slash", create(unix.AT_FDCWD, "newdir/"), unix.EISDIR)
	check("O_NOFOLLOW on a link", func() error {
		_, err := unix.Open("here", unix.O_CREAT|unix.O_WRONLY|unix.O_NOFOLLOW, 0o644)
		return err
	}(), unix.ELOOP)
	// The kernel's own errnos: O_CREAT|O_DIRECTORY is invalid whatever
	// the name (Linux 6.4 on); O_CREAT with a trailing slash is EISDIR,
	// for an existing file too.
	openErr := func(p string, flags int) error {
		fd, err := unix.Open(p, flags|unix.O_CLOEXEC, 0o644)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	check("O_CREAT|O_DIRECTORY, missing", openErr("cdnew", unix.O_CREAT|unix.O_DIRECTORY), unix.EINVAL)
	check("O_CREAT|O_DIRECTORY, a directory", openErr(".", unix.O_CREAT|unix.O_DIRECTORY), unix.EINVAL)
	check("O_CREAT|O_DIRECTORY, a file", openErr("src", unix.O_CREAT|unix.O_DIRECTORY), unix.EINVAL)
	check("O_CREAT, a file with a trailing slash", openErr("src/", unix.O_CREAT|unix.O_WRONLY), unix.EISDIR)
	check("O_CREAT, a directory with a trailing slash", openErr("sub/", unix.O_CREAT|unix.O_WRONLY), unix.EISDIR)
	check("O_CREAT, a slash under a missing directory", openErr("nodir/x/", unix.O_CREAT|unix.O_WRONLY), unix.ENOENT)
	check("bad dirfd", create(999, "x"), unix.EBADF)
	check("file as dirfd", create(file, "x"), unix.ENOTDIR)
	check("exclusive on an existing file", func() error {
		_, err := unix.Open("src", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
		return err
	}(), unix.EEXIST)
	// PATH_MAX: 4095 bytes and the NUL are a path; 4096 without are not.
	long := strings.Repeat("./", 2046) + "abc" // 4095 bytes
	check("PATH_MAX - 1", create(unix.AT_FDCWD, long), nil)
	check("PATH_MAX", create(unix.AT_FDCWD, long+"d"), unix.ENAMETOOLONG)
	check("longer", create(unix.AT_FDCWD, strings.Repeat("a/", 5000)), unix.ENAMETOOLONG)
	// No NUL before unreadable memory, and pointers to nothing.
	mem, _ := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	for i := range 4096 {
		mem[i] = 'a'
	}
	_ = unix.Mprotect(mem[4096:], unix.PROT_NONE)
	raw := func(p uintptr) error {
		fd, _, e := unix.Syscall6(unix.SYS_OPENAT, atFDCWD, p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644, 0, 0)
		if e != 0 {
			return e
		}
		unix.Close(int(fd))
		return nil
	}
	check("no NUL before a hole", raw(uintptr(unsafe.Pointer(&mem[4000]))), unix.EFAULT)
	check("NULL", raw(0), unix.EFAULT)
	check("a kernel address", raw(0xffff800000001000), unix.EFAULT)
	check("unmapped", raw(0x10), unix.EFAULT)
	// What is not protected works as it always did.
	old := unix.Umask(0o027)
	check("ordinary file", create(unix.AT_FDCWD, "ok.txt"), nil)
	if fi, err := os.Stat("ok.txt"); err != nil || fi.Mode().Perm() != 0o640 {
		fmt.Printf("BAD umask: %v %v\n", fi.Mode(), err)
	}
	unix.Umask(old)
	check("mkdir", unix.Mkdir("okdir", 0o755), nil)
	check("symlink", unix.Symlink("ok.txt", "oklink"), nil)
	check("write through a link", create(unix.AT_FDCWD, "oklink"), nil)
	check("rename", unix.Rename("okdir", "okdir2"), nil)
	check("link", unix.Link("ok.txt", "ok2.txt"), nil)
	check("stdout", create(unix.AT_FDCWD, "/dev/stdout"), nil)
	check("/dev/null", create(unix.AT_FDCWD, "/dev/null"), nil)
	check("/proc is not written", create(unix.AT_FDCWD, "/proc/self/comm"), unix.EACCES)
	check("O_TMPFILE, linked to a protected name", func() error {
		fd, err := unix.Open(".", unix.O_TMPFILE|unix.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, ".bash_login", unix.AT_SYMLINK_FOLLOW)
	}(), unix.EPERM)
	check("O_TMPFILE, linked", func() error {
		fd, err := unix.Open(".", unix.O_TMPFILE|unix.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, "tmpok", unix.AT_SYMLINK_FOLLOW)
	}(), nil)
	check("O_CLOEXEC kept", func() error {
		fd, err := unix.Open("ok3.txt", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if f, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); f&unix.FD_CLOEXEC == 0 {
			return errors.New("no FD_CLOEXEC")
		}
		fd2, err := unix.Open("ok4.txt", unix.O_CREAT|unix.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer unix.Close(fd2)
		if f, _ := unix.FcntlInt(uintptr(fd2), unix.F_GETFD, 0); f&unix.FD_CLOEXEC != 0 {
			return errors.New("FD_CLOEXEC unasked")
		}
		return nil
	}(), nil)
}

// Attacks on the supervisor: a path rewritten by another thread while the
// call is made, paths of every shape (.., absolute, /proc/self, /dev/fd,
// dangling links and loops, PATH_MAX and longer, no NUL before unreadable
// memory, bad pointers), callers killed while it serves them, and many
// callers at once.
func TestSupervisorAttacks(t *testing.T) {
	sb, dir := supervisedSession(t)
	run := func(t *testing.T, name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(bg, 120*time.Second)
		defer cancel()
		res, err := sb.Exec(ctx, sandbox.Command{Args: testenv.ProgramArgv(args...), Env: map[string]string{testenv.ProgramEnvKey: name}, Timeout: 110 * time.Second})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: exit %d, %v\n%s%s", name, res.ExitCode, err, res.Stdout, res.Stderr)
		}
		return string(res.Stdout)
	}
	cases := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"a path rewritten during the call", func(t *testing.T) {
			out := run(t, "supervisor-race")
			var made int
			if _, err := fmt.Sscanf(out, "made %d", &made); err != nil || made == 0 {
				t.Errorf("the race made nothing at all (%q): it did not run", out)
			}
			t.Logf("%s", strings.TrimSpace(out))
		}},
		{"paths of every shape", func(t *testing.T) {
			out := run(t, "supervisor-paths")
			if strings.Contains(out, "BAD") || strings.Count(out, "ok ") < 40 {
				t.Errorf("%s", out)
			}
		}},
		{"callers killed mid-call", func(t *testing.T) {
			out, code := execShell(t, sb, `mkdir -p k && for i in $(seq 40); do (while :; do : > k/f$i; mkdir k/d$i; rmdir k/d$i; done) & p=$!; sleep 0.02; kill -9 $p; done; wait; echo x > k/after && cat k/after`)
			if code != 0 || !strings.HasSuffix(out, "x\n") {
				t.Errorf("exit %d: %s", code, out)
			}
		}},
		{"FIFO writers killed while they wait", func(t *testing.T) {
			// Each writer waits for a reader off the supervisor's thread;
			// one killed meanwhile must give its place back, or after
			// sixteen no writer could wait for a reader any more.
			out, _ := execShell(t, sb, `mkfifo ff && for i in $(seq 20); do sh -c 'exec 3>ff' 2>/dev/null & p=$!; sleep 0.05; kill -9 $p 2>/dev/null; done; wait; sleep 0.2; (sleep 0.3; cat ff) & echo through > ff; wait; rm ff`)
			if out != "through\n" {
				t.Errorf("a writer after killed ones: %q", out)
			}
		}},
		{"many callers at once", func(t *testing.T) {
			out, code := execShell(t, sb, `mkdir -p m && for i in $(seq 32); do (for j in $(seq 200); do : > m/f$i-$j; done) & done; wait; ls m | wc -l`)
			if code != 0 || strings.TrimSpace(out) != "6400" {
				t.Errorf("exit %d: %s", code, out)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.check(t)
			if p := planted(dir); len(p) > 0 {
				t.Errorf("made %v", p)
			}
		})
	}
	// The supervisor is still serving.
	if out, code := execShell(t, sb, "echo fine > fine && cat fine"); code != 0 || out != "fine\n" {
		t.Errorf("after the attacks: exit %d, %q", code, out)
	}
}

// Ordinary work is the same under the supervisor: many files, nested
// directories, moves, links, a compiler and a script writing a tree.
func TestSupervisedOrdinaryWork(t *testing.T) {
	sb, dir := supervisedSession(t)
	cases := []struct{ name, script, want string }{
		{"2000 files", `mkdir out && i=0; while [ $i -lt 2000 ]; do echo $i > out/f$i; i=$((i+1)); done; ls out | wc -l; cat out/f1999`, "2000\n1999\n"},
		{"mkdir -p", "mkdir -p a/b/c && ls -d a/b/c", "a/b/c\n"},
		{"mv", "mv a moved && ls -d moved/b/c", "moved/b/c\n"},
		{"ln -s", "ln -s moved/b l && ls -d l/c && echo x > l/c/f && cat moved/b/c/f", "l/c\nx\n"},
		{"hard link", "echo y > h1 && ln h1 h2 && echo z >> h2 && cat h1", "y\nz\n"},
		{"redirections and tee", "echo a > r && echo b >> r && echo c | tee -a r >/dev/null && cat r", "a\nb\nc\n"},
		{"/dev/stdout and /dev/stderr", "echo out | tee /dev/stderr > /dev/stdout", "out\nout\n"},
		{"cc", `[ -x /usr/bin/cc ] || { echo skip; exit 0; }; printf 'int main(void){return 7;}\n' > m.c && cc -o m m.c && { ./m; echo $?; }`, "7\n"},
		{"python tree", `[ -x /usr/bin/python3 ] || { echo skip; exit 0; }; python3 -c '
import os
for i in range(50):
    os.makedirs(f"build/obj/{i%7}", exist_ok=True)
    with open(f"build/obj/{i%7}/m{i}.o.tmp", "w") as f: f.write("x"*100)
    os.replace(f"build/obj/{i%7}/m{i}.o.tmp", f"build/obj/{i%7}/m{i}.o")
print(sum(len(fs) for _, _, fs in os.walk("build")))'`, "50\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := execShell(t, sb, c.script)
			if out == "skip\n" {
				testenv.Missing(t, "%s for %s", strings.Fields(c.script)[2], c.name)
			}
			if code != 0 || out != c.want {
				t.Errorf("exit %d, %q, want %q", code, out, c.want)
			}
		})
	}
	if p := planted(dir); len(p) > 0 {
		t.Errorf("made %v", p)
	}
}

// A one-shot run (isolated.Run) in a writable root missing protected
// paths goes through a session, whose supervisor keeps them.
func TestRunKeepsMissingProtectedPaths(t *testing.T) {
	e := newEnv(t)
	pol := e.pol.Extend(policy.Policy{Write: []string{e.work}})
	pol.Dir = e.work
	res, err := isolated.Run(bg, pol, sandbox.Command{Shell: "echo x > .bashrc; mkdir .vscode; echo y > ok; cat ok", Timeout: 20 * time.Second})
	if err != nil || string(res.Stdout) != "y\n" {
		t.Fatalf("%v %q %s", err, res.Stdout, res.Stderr)
	}
	if p := planted(e.work); len(p) > 0 {
		t.Errorf("made %v", p)
	}
	// Nor does such a run go without /proc, which the supervisor needs.
	for _, deny := range []string{"/proc", "/proc/self"} {
		if _, err := isolated.Run(bg, pol.Extend(policy.Policy{Deny: []string{deny}}), sandbox.Command{Shell: "true"}); !errors.Is(err, sandbox.ErrConfig) || !strings.Contains(err.Error(), "unprotect") {
			t.Errorf("deny %s with protected paths missing: %v, want an ErrConfig naming unprotect", deny, err)
		}
	}
	// The one-shot PID 1 itself refuses such a policy: it has no
	// supervisor to give.
	cwd, _ := os.Getwd()
	npol, err := pol.Normalize(cwd)
	if err != nil {
		t.Fatal(err)
	}
	job := wire.Job{Policy: npol, Dir: e.work, Argv: []string{"/bin/true"}, HostUID: os.Getuid(), HostGID: os.Getgid()}
	if _, _, err := helper.RunOnce(bg, job, nil2(t), nil2(t), nil2(t), helper.OneShot{Timeout: 10 * time.Second}); !errors.Is(err, helper.ErrNeedsSupervisor) || !errors.Is(err, sandbox.ErrUnsupported) {
		t.Errorf("RunOnce with protected paths missing: %v, want ErrNeedsSupervisor", err)
	}
}

// A start directory deeper in a writable path keeps its protected paths
// as the top of the writable path does: it cannot be moved aside (where
// its protected paths would be at names nothing keeps) nor can any
// directory above it up to the writable path, whether its protected
// paths all exist (no supervisor) or some are missing (the supervisor);
// and one named through a symbolic link (a shell's $PWD) keeps them
// under its real name. Found by a red-team pass: a command moved the
// start directory aside and planted .git/config, hooks and .bashrc in it,
// and wrote them freely in a start directory named through a link.
func TestStartDirectoryKeepsItsProtectedPaths(t *testing.T) {
	plant := `for d in "$@"; do mv "$d" "$d.moved" && echo "MOVED $d"; done
mkdir -p .git/hooks 2>/dev/null; echo 'echo PWNED' > .bashrc; printf '[core]\n\tfsmonitor = x\n' > .git/config
echo '#!/bin/sh' > .git/hooks/pre-commit; echo '{}' > .mcp.json; echo RAN`
	for _, c := range []struct {
		name    string
		all     bool   // every protected path exists in the start directory
		link    string // the start directory is named through this link (relative to the writable path), to "real/sub"
		startAt string // the start directory, relative to the writable path
	}{
		{name: "deeper, some protected paths missing", startAt: "a/b/sub"},
		{name: "deeper, all protected paths there", all: true, startAt: "a/b/sub"},
		{name: "named through a link, some missing", link: "s", startAt: "s"},
		{name: "named through a link, all there", all: true, link: "s", startAt: "s"},
		{name: "through a linked parent", all: true, link: "l", startAt: "l/sub"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			real := filepath.Join(e.work, "a", "b", "sub")
			if c.link != "" {
				real = filepath.Join(e.work, "real", "sub")
			}
			if err := os.MkdirAll(real, 0o755); err != nil {
				t.Fatal(err)
			}
			switch c.link {
			case "s":
				os.Symlink("real/sub", filepath.Join(e.work, "s"))
			case "l":
				os.Symlink("real", filepath.Join(e.work, "l"))
			}
			sandboxtest.MakeProtected(t, e.work)
			if c.all {
				sandboxtest.MakeProtected(t, real)
			} else {
				os.WriteFile(filepath.Join(real, ".bashrc"), []byte("original\n"), 0o644)
			}
			pol := e.pol.Extend(policy.Policy{Write: []string{e.work}})
			pol.Dir = filepath.Join(e.work, c.startAt)
			// Every directory from the start directory up to the writable
			// path, deepest first.
			before := files(e.work)
			var moves []string
			for d := real; d != e.work; d = filepath.Dir(d) {
				moves = append(moves, d)
			}
			r, err := isolated.Run(bg, pol, sandbox.Command{Args: append([]string{"/bin/sh", "-c", plant, "sh"}, moves...), Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(r.Stdout), "RAN") {
				t.Fatalf("the command did not run to its end: %q %q", r.Stdout, r.Stderr)
			}
			if strings.Contains(string(r.Stdout), "MOVED") {
				t.Errorf("a directory from the start directory up to the writable path was moved aside: %s", r.Stdout)
			}
			if after := files(e.work); !maps.Equal(before, after) {
				for p, b := range after {
					if before[p] != b {
						t.Errorf("%s was made or written: %q", p, b)
					}
				}
			}
		})
	}
}

// files maps each regular file below dir (relative) to its content.
func files(dir string) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}
