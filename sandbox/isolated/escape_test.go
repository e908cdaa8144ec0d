package isolated_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/internal/nofile/nofiletest"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

var bg = context.Background()

// env is one attack's world: a writable work directory, a host directory
// the policy does not list, and the policy itself.
type env struct {
	work, outside, secret string
	pol                   policy.Policy
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "this host cannot build isolated sandboxes: %v", err)
	}
	e := &env{work: t.TempDir(), outside: t.TempDir()}
	e.secret = filepath.Join(e.outside, "secret.txt")
	if err := os.WriteFile(e.secret, []byte("TOP-SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The test binary doubles as the attacker (see attack_test.go), so
	// its directory is readable.
	self, _ := os.Executable()
	e.pol = policy.Default().Extend(policy.Policy{Write: []string{e.work}, Read: []string{filepath.Dir(self)}})
	return e
}

func (e *env) run(t *testing.T, c sandbox.Command) sandbox.Result {
	t.Helper()
	return e.runWith(t, e.pol, c)
}

func (e *env) runWith(t *testing.T, pol policy.Policy, c sandbox.Command) sandbox.Result {
	t.Helper()
	if c.Timeout == 0 {
		c.Timeout = 20 * time.Second
	}
	run := isolated.Run
	if os.Getenv("HUTCH_TEST_VIA_SESSION") == "1" {
		run = viaSession
	}
	r, err := run(bg, pol, c)
	if err != nil {
		t.Fatalf("Run(%q %q): %v", c.Shell, c.Args, err)
	}
	return r
}

// viaSession is isolated.Run through a session (New, Exec, Close): with
// HUTCH_TEST_VIA_SESSION=1 the escape suite attacks the session's init
// and runner instead of the one-shot's forked PID 1.
func viaSession(ctx context.Context, pol policy.Policy, c sandbox.Command) (sandbox.Result, error) {
	if c.Dir != "" {
		pol.Dir, c.Dir = c.Dir, ""
	}
	sb, err := isolated.New(ctx, pol)
	if err != nil {
		return sandbox.Result{}, err
	}
	defer sb.Close()
	return sb.Exec(ctx, c)
}

func sh(script string) sandbox.Command { return sandbox.Command{Shell: script} }

// attack runs one Go attack inside the sandbox (see attack_test.go) and
// returns what it printed.
func (e *env) attack(t *testing.T, pol policy.Policy, name string, args ...string) string {
	t.Helper()
	self, _ := os.Executable()
	r := e.runWith(t, pol, sandbox.Command{Args: append([]string{self, "-test.run=^$"}, args...), Env: map[string]string{"HUTCH_ATTACK": name}})
	out := string(r.Stdout) + string(r.Stderr)
	if !strings.Contains(out, "attack "+name+" done") {
		t.Fatalf("attack %s did not run to the end (exit %d): %s", name, r.ExitCode, out)
	}
	return out
}

func wantOut(t *testing.T, what string, r sandbox.Result, code int, sub string) {
	t.Helper()
	if r.ExitCode != code || !strings.Contains(string(r.Stdout)+string(r.Stderr), sub) {
		t.Errorf("%s: exit %d (want %d), output %q (want %q)", what, r.ExitCode, code, string(r.Stdout)+string(r.Stderr), sub)
	}
}

// Positive controls: the sandbox works at all.
func TestControl(t *testing.T) {
	e := newEnv(t)
	wantOut(t, "echo", e.run(t, sh("echo ok")), 0, "ok")
	wantOut(t, "write in the work dir", e.run(t, sh("echo made > "+e.work+"/made.txt && cat "+e.work+"/made.txt")), 0, "made")
	if b, err := os.ReadFile(e.work + "/made.txt"); err != nil || string(b) != "made\n" {
		t.Errorf("the write did not reach the host: %q %v", b, err)
	}
	wantOut(t, "starts in the work dir", e.run(t, sh("pwd")), 0, e.work)
	wantOut(t, "private /tmp is writable", e.run(t, sh("echo t > /tmp/t && cat /tmp/t")), 0, "t")
	wantOut(t, "system programs run", e.run(t, sandbox.Command{Args: []string{"ls", "/usr/bin/env"}}), 0, "/usr/bin/env")
	wantOut(t, "not found", e.run(t, sandbox.Command{Args: []string{"hutch-no-such-program"}}), 127, "not found")
	wantOut(t, "stdin", e.runWith(t, e.pol, sandbox.Command{Args: []string{"cat"}, Stdin: strings.NewReader("in")}), 0, "in")
}

func TestHostFilesAreInvisible(t *testing.T) {
	e := newEnv(t)
	hostTmp, err := os.CreateTemp("", "hutch-host-tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	hostTmp.Close()
	defer os.Remove(hostTmp.Name())
	home, _ := os.UserHomeDir()
	for _, c := range []struct{ name, script string }{
		{"unlisted host directory", "cat " + e.secret},
		{"listing it", "ls " + e.outside},
		{"$HOME", "ls -a " + home},
		{"/root", "ls /root"},
		{"/home", "ls /home"},
		{"/var, /run, /srv, /opt", "ls /var/log /run /srv /opt"},
		{"host /tmp", "ls /tmp/" + filepath.Base(hostTmp.Name())},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.run(t, sh(c.script))
			if r.ExitCode == 0 || strings.Contains(string(r.Stdout), "TOP-SECRET") {
				t.Errorf("%q succeeded: %q", c.script, r.Stdout)
			}
		})
	}
}

func TestWritesOutsideFail(t *testing.T) {
	e := newEnv(t)
	for _, target := range []string{"/usr/bin/hutch-x", "/etc/hutch-x", "/hutch-x", "/proc/hutch-x", "/dev/hutch-x", e.outside + "/x"} {
		t.Run(target, func(t *testing.T) {
			r := e.run(t, sh("echo x > "+target))
			if r.ExitCode == 0 {
				t.Errorf("writing %s succeeded", target)
			}
			if _, err := os.Stat(target); err == nil && !strings.HasPrefix(target, "/proc") {
				t.Errorf("%s exists on the host", target)
			}
		})
	}
}

func TestSymlinksInWritableDirs(t *testing.T) {
	e := newEnv(t)
	if err := os.Symlink(e.secret, filepath.Join(e.work, "hostlink")); err != nil {
		t.Fatal(err)
	}
	for _, script := range []string{
		"cat hostlink",                      // planted by the host
		"ln -s " + e.secret + " l && cat l", // made inside
		"ln -s ../../../../../../ up && ls up/" + filepath.Base(e.outside),
		"echo pwn > hostlink", // write through a link out
	} {
		r := e.run(t, sh(script))
		if r.ExitCode == 0 || strings.Contains(string(r.Stdout), "TOP-SECRET") {
			t.Errorf("%q: exit %d, %q", script, r.ExitCode, r.Stdout)
		}
	}
	if b, _ := os.ReadFile(e.secret); string(b) != "TOP-SECRET" {
		t.Errorf("the secret was changed: %q", b)
	}
}

func TestDenied(t *testing.T) {
	e := newEnv(t)
	os.MkdirAll(filepath.Join(e.work, "keys"), 0o755)
	os.WriteFile(filepath.Join(e.work, "keys", "k"), []byte("KEY"), 0o644)
	os.WriteFile(filepath.Join(e.work, ".env"), []byte("PASSWORD"), 0o644)
	pol := e.pol.Extend(policy.Policy{Deny: []string{filepath.Join(e.work, "keys"), filepath.Join(e.work, ".env")}})
	r := e.runWith(t, pol, sh("ls -A keys; echo ---; cat .env; echo ---; cat keys/k; touch keys/new"))
	out := string(r.Stdout)
	if strings.Contains(out, "KEY") || strings.Contains(out, "PASSWORD") || strings.Contains(out, "\nk\n") || r.ExitCode == 0 {
		t.Errorf("denied paths leaked: %q %q", out, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(e.work, "keys", "new")); err == nil {
		t.Error("a write landed in a denied directory")
	}
	wantOut(t, "the rest of the work dir still works", e.runWith(t, pol, sh("echo ok > ok && cat ok")), 0, "ok")
}

func TestProcessesAndSignals(t *testing.T) {
	e := newEnv(t)
	marker := fmt.Sprintf("3000.%d", time.Now().UnixNano()%1e6)
	host := exec.Command("sleep", marker)
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer host.Process.Kill()
	pid := strconv.Itoa(host.Process.Pid)
	// "[s]leep" so that grep does not find its own command line.
	r := e.run(t, sh("grep -l '[s]leep.*"+marker+"' /proc/[0-9]*/cmdline; ls /proc | grep -c '^[0-9]'"))
	if strings.Contains(string(r.Stdout), "cmdline") {
		t.Errorf("a host process is visible: %q", r.Stdout)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(string(r.Stdout))); n > 10 {
		t.Errorf("%d processes visible in /proc", n)
	}
	e.run(t, sh("kill -9 "+pid+"; kill -9 -1"))
	time.Sleep(100 * time.Millisecond)
	if stat, err := os.ReadFile("/proc/" + pid + "/stat"); err != nil || bytes.Contains(stat, []byte(") Z ")) {
		t.Errorf("the sandbox killed host process %s", pid)
	}
}

// The host's control-group paths (which name its containers, units and
// users) are not visible: the sandbox has its own cgroup namespace, rooted
// at its own groups when a limit makes some. Under a process limit the
// command is in the commands' subgroup, which it sees as /cmd (cgroup v1)
// or /../cmd (v2, from hutch's sibling group): hutch's own names, nothing
// of the host's.
func TestHostCgroupPathsHidden(t *testing.T) {
	e := newEnv(t)
	host, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no /proc/self/cgroup here: %v", err)
	}
	for name, pol := range map[string]policy.Policy{
		"no limits":       e.pol,
		"memory and pids": e.pol.Extend(policy.Policy{Limits: policy.Limits{Memory: 256 << 20, Processes: 64}}),
	} {
		t.Run(name, func(t *testing.T) {
			r := e.runWith(t, pol, sh("cat /proc/self/cgroup"))
			lines := strings.Fields(string(r.Stdout))
			if r.ExitCode != 0 || len(lines) == 0 {
				t.Fatalf("exit %d, %q %q", r.ExitCode, r.Stdout, r.Stderr)
			}
			for _, line := range lines {
				if parts := strings.SplitN(line, ":", 3); len(parts) != 3 || !sandboxCgroupPath[parts[2]] {
					t.Errorf("a cgroup path shows through: %q (the host's: %q)", line, host)
				}
			}
		})
	}
}

// sandboxCgroupPath are the cgroup paths a sandbox may show.
var sandboxCgroupPath = map[string]bool{"/": true, "/cmd": true, "/../cmd": true}

func TestCapabilitiesAndPrivileges(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, sh("grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status"))
	out := string(r.Stdout)
	for _, want := range []string{"CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in %q", want, out)
		}
	}
	// A setuid binary gains nothing (no_new_privs, nosuid mounts).
	if p, err := exec.LookPath("su"); err == nil {
		r = e.run(t, sh(p+" -c id root"))
		if r.ExitCode == 0 {
			t.Errorf("su worked: %q", r.Stdout)
		}
	}
	for _, script := range []string{"unshare -U true", "unshare -m true", "unshare -n true", "mount -t tmpfs x /tmp", "hostname evil", "chroot / true"} {
		if r := e.run(t, sh(script)); r.ExitCode == 0 {
			t.Errorf("%q succeeded", script)
		}
	}
}

func TestDevices(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, sh("ls /dev"))
	got := strings.Fields(string(r.Stdout))
	for _, dev := range got {
		switch dev {
		case "null", "zero", "full", "random", "urandom", "tty", "fd", "stdin", "stdout", "stderr", "shm":
		default:
			t.Errorf("unexpected device %s in /dev", dev)
		}
	}
	for _, script := range []string{"cat /dev/sda", "cat /dev/mem", "mknod /tmp/sda b 8 0", "mknod /tmp/n c 1 3", "head -c 4 /dev/kmsg"} {
		if r := e.run(t, sh(script)); r.ExitCode == 0 {
			t.Errorf("%q succeeded", script)
		}
	}
	wantOut(t, "the harmless devices work", e.run(t, sh("head -c 3 /dev/zero | wc -c; echo x > /dev/null")), 0, "3")
}

func TestNetworkNone(t *testing.T) {
	e := newEnv(t)
	for _, network := range []string{"tcp4", "tcp6"} {
		addr := map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network]
		ln, err := net.Listen(network, addr)
		if err != nil {
			if testenv.InCI() || network == "tcp4" {
				t.Fatalf("listen %s: %v", addr, err)
			}
			t.Logf("no %s on this host (outside CI only): %v", network, err)
			continue
		}
		accepted := make(chan struct{}, 1)
		go func() {
			if c, err := ln.Accept(); err == nil {
				accepted <- struct{}{}
				c.Close()
			}
		}()
		out := e.attack(t, e.pol, "dial", "tcp", ln.Addr().String())
		ln.Close()
		if !strings.Contains(out, "BLOCKED") {
			t.Errorf("%s to the host's loopback: %s", network, out)
		}
		select {
		case <-accepted:
			t.Errorf("the host listener on %s got a connection from the sandbox", ln.Addr())
		default:
		}
	}
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	e.attack(t, e.pol, "dial", "udp", udp.LocalAddr().String())
	udp.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _, err := udp.ReadFrom(make([]byte, 64)); err == nil {
		t.Errorf("a UDP datagram from the sandbox reached the host (%d bytes)", n)
	}
	// Control: with network all the same dial works.
	ln, _ := net.Listen("tcp4", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	out := e.attack(t, e.pol.Extend(policy.Policy{Network: policy.NetworkAll}), "dial", "tcp", ln.Addr().String())
	if !strings.Contains(out, "CONNECTED") {
		t.Errorf("network all: %s", out)
	}
}

func TestHostUnixSocket(t *testing.T) {
	e := newEnv(t)
	sockDir := t.TempDir()
	sock := filepath.Join(sockDir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			got <- struct{}{}
			c.Close()
		}
	}()
	pol := e.pol.Extend(policy.Policy{Read: []string{sockDir}})
	out := e.attack(t, pol, "unix", sock)
	if !strings.Contains(out, "socket BLOCKED") || !strings.Contains(out, "socketpair OK") {
		t.Errorf("unix sockets: %s", out)
	}
	select {
	case <-got:
		t.Error("the host's unix socket accepted a connection from the sandbox")
	case <-time.After(200 * time.Millisecond):
	}
}

func TestDeniedSyscalls(t *testing.T) {
	e := newEnv(t)
	out := e.attack(t, e.pol, "syscalls")
	for _, name := range []string{"ptrace", "mount", "unshare-user", "setns", "keyctl", "add_key", "bpf", "perf_event_open", "init_module",
		"kexec_load", "userfaultfd", "io_uring_setup", "clone-newuser", "socket-packet", "socket-raw", "chroot", "pivot_root"} {
		if !strings.Contains(out, name+" BLOCKED") {
			t.Errorf("%s was not refused: %s", name, out)
		}
	}
	if strings.Contains(out, "ALLOWED") {
		t.Errorf("some syscall got through: %s", out)
	}
}

func TestLimits(t *testing.T) {
	e := newEnv(t)
	t.Run("cpu loop", func(t *testing.T) {
		pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{CPUTime: time.Second}})
		r := e.runWith(t, pol, sh("while :; do :; done"))
		if r.Limit != "cpu_time" || r.TimedOut {
			t.Errorf("cpu loop: %+v", r)
		}
	})
	t.Run("huge file", func(t *testing.T) {
		pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{FileSize: 1 << 20}})
		r := e.runWith(t, pol, sh("head -c 5000000 /dev/zero > big"))
		fi, err := os.Stat(filepath.Join(e.work, "big"))
		if r.Limit != "file_size" || err != nil || fi.Size() > 1<<20 {
			t.Errorf("huge file: limit %q, exit %d, size %v %v", r.Limit, r.ExitCode, fi, err)
		}
	})
	t.Run("memory bomb", func(t *testing.T) {
		pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Memory: 128 << 20}})
		self, _ := os.Executable()
		r := e.runWith(t, pol, sandbox.Command{Args: []string{self, "-test.run=^$", "1024"}, Env: map[string]string{"HUTCH_ATTACK": "alloc"}})
		out := string(r.Stdout) + string(r.Stderr)
		if strings.Contains(out, "ALLOCATED") || r.ExitCode == 0 || r.Limit != "memory" {
			t.Errorf("1 GiB under a 128 MiB limit: exit %d, limit %q, %.300s", r.ExitCode, r.Limit, out)
		}
	})
	// Many processes, each smaller than hutch's own PID 1 (or init and
	// runner) in the same memory cgroup: the OOM killer must pick the
	// command's, not hutch's, or the sandbox dies and the result names
	// nothing. Commands start with oom_score_adj 1000; PID 1 keeps the
	// caller's.
	t.Run("memory bomb of small processes", func(t *testing.T) {
		pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Memory: 64 << 20}})
		var pid1 string
		r := withStarterAfter(t, e.work, func(script string) sandbox.Result {
			return e.runWith(t, pol, sandbox.Command{Shell: script, Timeout: 30 * time.Second})
		}, `for i in $(seq 30); do (x=$(head -c 3000000 /dev/zero | tr "\0" a); sleep 2) & done; wait; `,
			`echo "command $(cat /proc/self/oom_score_adj)"`, func(s starter) {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", s.pid))
				pid1 = strings.TrimSpace(string(b))
			})
		own, err := os.ReadFile("/proc/self/oom_score_adj")
		if err != nil {
			t.Fatal(err)
		}
		if pid1 != strings.TrimSpace(string(own)) {
			t.Errorf("PID 1's oom_score_adj is %q, want the caller's %q", pid1, strings.TrimSpace(string(own)))
		}
		want := "command 1000"
		if r.Limit != "memory" || !strings.Contains(string(r.Stdout), want) {
			t.Errorf("30 small processes under a 64 MiB limit: exit %d, limit %q, stdout %q (want %q), stderr %.300q", r.ExitCode, r.Limit, r.Stdout, want, r.Stderr)
		}
	})
	t.Run("fork bomb", func(t *testing.T) {
		pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Processes: 32}})
		r := e.runWith(t, pol, sandbox.Command{Shell: "i=0; while [ $i -lt 200 ]; do sleep 5 & i=$((i+1)); done; wait; echo spawned", Timeout: 15 * time.Second})
		if r.Limit != "pids" || strings.Contains(string(r.Stdout), "spawned") && r.ExitCode == 0 {
			t.Errorf("200 processes under a limit of 32: exit %d, limit %q, %.200s", r.ExitCode, r.Limit, r.Stderr)
		}
	})
	t.Run("open files", func(t *testing.T) {
		pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{OpenFiles: 16}})
		wantOut(t, "ulimit -n", e.runWith(t, pol, sh("ulimit -n")), 0, "16")
	})
}

// Without a policy limit a command gets the soft open-files limit hutch
// started with, not the one Go raised for hutch itself; with one, the
// policy's, soft and hard.
func TestOpenFilesLimitHutchStartedWith(t *testing.T) {
	e := newEnv(t)
	if !nofiletest.InChild(t, 300) {
		return
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		limit int
		want  string
	}{{0, "300 " + strconv.FormatUint(lim.Max, 10)}, {64, "64 64"}} {
		pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{OpenFiles: c.limit}})
		r := e.runWith(t, pol, sh(`echo "$(ulimit -Sn) $(ulimit -Hn)"`))
		if got := strings.TrimSpace(string(r.Stdout)); r.ExitCode != 0 || got != c.want {
			t.Errorf("open-files limit %d in the policy: exit %d, soft and hard %q (want %q), stderr %q", c.limit, r.ExitCode, got, c.want, r.Stderr)
		}
	}
}

func TestTimeoutKillsDaemons(t *testing.T) {
	e := newEnv(t)
	marker := fmt.Sprintf("4000.%d", time.Now().UnixNano()%1e6)
	start := time.Now()
	r, err := isolated.Run(bg, e.pol, sandbox.Command{
		Shell:   fmt.Sprintf("setsid sh -c 'sleep %[1]s1 &' ; (sleep %[1]s2 &) ; nohup sleep %[1]s3 >/dev/null 2>&1 & echo started; sleep %[1]s4", marker),
		Timeout: time.Second,
	})
	if err != nil || !r.TimedOut || !strings.Contains(string(r.Stdout), "started") {
		t.Fatalf("timeout: %+v %v", r, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run returned after %v", d)
	}
	if left := sandboxtest.Survivors(marker, 3*time.Second); len(left) > 0 {
		t.Fatalf("processes outlived the timeout: %v", left)
	}
}

// The command holds only its three standard streams: not the control
// socket, not the status pipe (which would let it forge its own result).
func TestNoLeakedDescriptors(t *testing.T) {
	e := newEnv(t)
	check := func(what string, r sandbox.Result) {
		t.Helper()
		fds := strings.Fields(string(r.Stdout))
		for _, fd := range fds {
			if fd != "0" && fd != "1" && fd != "2" && fd != "3" { // 3: ls's own directory (the lowest free)
				t.Errorf("%s: the command holds fd %s: %q", what, fd, r.Stdout)
			}
		}
	}
	check("one-shot", e.run(t, sh("ls /proc/self/fd")))
	sb, err := isolated.New(bg, e.pol)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	r, err := sb.Exec(bg, sh("ls /proc/self/fd"))
	if err != nil {
		t.Fatal(err)
	}
	check("session", r)
	r, _ = sb.Exec(bg, sh(`printf '{"exited":true,"exit_code":0}\n' >&4; exit 3`))
	if r.ExitCode != 3 {
		t.Errorf("a command forged its status: %+v", r)
	}
}

func TestSecretsInParentEnvironment(t *testing.T) {
	e := newEnv(t)
	t.Setenv("HUTCH_TEST_SECRET", "s3cret")
	r := e.run(t, sh("env; cat /proc/self/environ; cat /proc/1/environ"))
	if strings.Contains(string(r.Stdout), "s3cret") {
		t.Errorf("a parent secret leaked: %q", r.Stdout)
	}
	r = e.runWith(t, e.pol, sandbox.Command{Args: []string{"env"}, Env: map[string]string{"ADDED": "1"}})
	for _, line := range strings.Split(strings.TrimSpace(string(r.Stdout)), "\n") {
		k, _, _ := strings.Cut(line, "=")
		if k != "PATH" && k != "HOME" && k != "LANG" && k != "ADDED" {
			t.Errorf("unexpected variable %s", line)
		}
	}
}

// No set-user-ID or set-group-ID file, and no file capability, can be
// left on the host, by any route: mknod and mknodat of a regular file
// (which left -rwsr-xr-x root files before they were refused), the chmod
// family, creating opens, an xattr, a whiteout, a link to or a copy of a
// host set-user-ID file. The work directory is then read from the host.
func TestNoSetIDFiles(t *testing.T) {
	e := newEnv(t)
	setid := readableSetID()
	out := e.attack(t, e.pol, "setid", e.work, setid)
	names := []string{"mknodat-suid", "mknodat-sgid", "mknodat-notype", "mknodat-raw-highbits", "chmod", "fchmodat",
		"fchmodat2", "fchmod", "open-creat", "open-tmpfile", "setxattr-capability", "setxattr-trusted",
		"open_by_handle_at"}
	if runtime.GOARCH == "amd64" {
		names = append(names, "mknod")
	}
	if setid != "" {
		names = append(names, "link-setuid-file", "copy-setuid-file")
	} else {
		t.Log("no readable set-user-ID file on this host: the link and copy cases are not tried")
	}
	for _, name := range names {
		if !strings.Contains(out, "\n"+name+" BLOCKED") && !strings.HasPrefix(out, name+" BLOCKED") {
			t.Errorf("%s was not refused: %s", name, out)
		}
	}
	if strings.Count(out, "ALLOWED") > strings.Count(out, "renameat2-whiteout ALLOWED") {
		t.Errorf("a route got through: %s", out)
	}
	// And through a shell, as the escape suite found it.
	e.run(t, sh("python3 -c 'import os; os.mknod(\"m-py\", 0o104755)'; cp -p "+setid+" cp-p 2>/dev/null; install -m 4755 /bin/true inst 2>/dev/null; true"))
	err := filepath.WalkDir(e.work, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 && d.Type().IsRegular() {
			t.Errorf("a set-id file is on the host: %s, mode %o", p, st.Mode)
		}
		if n, _ := syscall.Getxattr(p, "security.capability", nil); n > 0 {
			t.Errorf("a file capability is on the host: %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// readableSetID is a set-user-ID file of the default policy's paths, or "".
func readableSetID() string {
	for _, p := range []string{"/usr/bin/su", "/usr/bin/passwd", "/usr/bin/mount", "/usr/bin/newgrp", "/usr/bin/chsh"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSetuid != 0 {
			return p
		}
	}
	return ""
}

// No lease: a read lease on a file the sandbox's root owns, in a readable
// directory, made host writers wait for the command (up to the host's
// lease-break-time, 45 s).
func TestNoLeases(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(e.outside, "leased")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := e.pol.Extend(policy.Policy{Read: []string{e.outside}})
	done := make(chan string, 1)
	go func() { done <- e.attack(t, pol, "lease", file) }()
	// While the command runs (a granted lease is held 3 s), a host writer
	// gets through at once.
	time.Sleep(time.Second)
	start := time.Now()
	if f, err := os.OpenFile(file, os.O_WRONLY, 0); err == nil {
		f.Close()
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a host open for writing waited %v for the sandbox's lease", d)
	}
	out := <-done
	for _, name := range []string{"F_SETLEASE", "F_SETLEASE-highbits"} {
		if !strings.Contains(out, name+" BLOCKED") {
			t.Errorf("%s was not refused: %s", name, out)
		}
	}
}

// No command can type into a terminal: TIOCSTI and TIOCLINUX are refused
// by the filter (EPERM) before the kernel looks at the descriptor, which
// here is a pipe (the kernel's own answer would be ENOTTY). Commands never
// get hutch's terminal and have no controlling one; this is the layer
// beneath.
func TestNoTerminalInjection(t *testing.T) {
	e := newEnv(t)
	out := e.attack(t, e.pol, "tty")
	for _, name := range []string{"TIOCSTI", "TIOCSTI-highbits", "TIOCLINUX"} {
		if !strings.Contains(out, name+" BLOCKED operation not permitted") {
			t.Errorf("%s was not refused by the filter: %s", name, out)
		}
	}
}

// Nothing in /proc that the host's unprivileged users cannot read is
// readable in the sandbox, even when hutch runs as root and the sandbox's
// root is the host's (slabinfo, kpageflags, vmallocinfo, root-only
// sysctls...). The list is the running kernel's, walked here on the host;
// with the host's network, /proc/sys/net's root-only entries (the TCP
// Fast Open key) are the host's too.
func TestRootOnlyProcHidden(t *testing.T) {
	e := newEnv(t)
	if os.Getuid() != 0 {
		t.Log("not root: the sandbox's root is this user, who cannot read root-only files anyway; the test still runs")
	}
	for _, c := range []struct {
		name    string
		network policy.Network
	}{{"own network", policy.NetworkNone}, {"host network", policy.NetworkAll}} {
		t.Run(c.name, func(t *testing.T) {
			var rootOnly []string
			err := filepath.WalkDir("/proc", func(p string, d os.DirEntry, err error) error {
				if err != nil {
					return nil // a directory it cannot read (WalkDir skips it)
				}
				name := d.Name()
				if filepath.Dir(p) == "/proc" && (name[0] >= '0' && name[0] <= '9' || name == "self" || name == "thread-self") ||
					p == "/proc/sys/net" && c.network != policy.NetworkAll {
					if d.IsDir() {
						return filepath.SkipDir
					}
					return nil // self, thread-self: links
				}
				fi, err := d.Info()
				if err != nil || !fi.Mode().IsRegular() {
					return nil
				}
				if m := fi.Mode().Perm(); m&0o004 == 0 && m&0o444 != 0 {
					rootOnly = append(rootOnly, p)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(rootOnly) == 0 {
				t.Fatal("no root-only file in this host's /proc: the walk is wrong")
			}
			// head's exit status says whether it could read; a masked file
			// cannot even be opened.
			script := `for f in "$@"; do if head -c 1 "$f" >/dev/null 2>&1; then echo "READABLE $f"; fi; done; echo checked`
			pol := e.pol
			pol.Network = c.network
			r := e.runWith(t, pol, sandbox.Command{Args: append([]string{"sh", "-c", script, "sh"}, rootOnly...)})
			if !strings.Contains(string(r.Stdout), "checked") {
				t.Fatalf("the check did not run: exit %d, %q %q", r.ExitCode, r.Stdout, r.Stderr)
			}
			if strings.Contains(string(r.Stdout), "READABLE") {
				t.Errorf("root-only /proc files are readable in the sandbox:\n%s", r.Stdout)
			}
			t.Logf("%d root-only files checked: %s", len(rootOnly), strings.Join(rootOnly, " "))
		})
	}
}

// No process of a sandbox holds a descriptor opened on the host, nor has
// its working directory or root there (a host descriptor is what runc's
// CVE-2024-21626 climbed out through): every file descriptor, cwd and
// root of the one-shot's PID 1, a session's init, runner and exec helper,
// and the commands themselves, lies on a mount of the process's own
// mount namespace. Pipes, sockets and anonymous inodes are not files of
// any tree. The one exception, by design, is the control files of the
// sandbox's own commands' cgroup (cgroup.procs, cgroup.threads or tasks,
// pids.current), which hutch's helpers hold close-on-exec to put each
// command in its group: regular files, never a directory, so no path
// leads from them anywhere.
func TestNoHostDescriptorsInSandbox(t *testing.T) {
	e := newEnv(t)
	if os.Getuid() != 0 {
		testenv.Missing(t, "reading the descriptors of hutch's undumpable processes needs root")
	}
	const marker = "4242.17"
	waitFor := func(t *testing.T, n int) []int {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			procs := descendants(os.Getpid())
			found := 0
			for _, p := range procs {
				if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); bytes.Contains(cmdline, []byte(marker)) {
					found++
				}
			}
			if found >= n {
				return procs
			}
			if time.Now().After(deadline) {
				t.Fatalf("the commands did not start: %d of %d", found, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	check := func(t *testing.T, procs []int) {
		t.Helper()
		for _, p := range procs {
			checkOwnMounts(t, p)
		}
	}
	pol := e.pol.Extend(policy.Policy{Limits: policy.Limits{Processes: 64, Memory: 256 << 20}})
	t.Run("one-shot", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := isolated.Run(bg, pol, sandbox.Command{Args: []string{"sleep", marker}, Timeout: 20 * time.Second})
			done <- err
		}()
		check(t, waitFor(t, 1))
		killMarked(marker)
		<-done
	})
	t.Run("session", func(t *testing.T) {
		sb, err := isolated.New(bg, pol)
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		if _, err := sb.Exec(bg, sh("true")); err != nil { // the runner is up
			t.Fatal(err)
		}
		// Two at once: one through the runner, one through an exec helper.
		done := make(chan error, 2)
		for range 2 {
			go func() {
				_, err := sb.Exec(bg, sandbox.Command{Args: []string{"sleep", marker}, Timeout: 20 * time.Second})
				done <- err
			}()
		}
		check(t, waitFor(t, 2))
		killMarked(marker)
		<-done
		<-done
	})
}

// checkOwnMounts fails t for every descriptor, working directory or root
// of process pid that is not on a mount of pid's own mount namespace.
func checkOwnMounts(t *testing.T, pid int) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d", pid)
	comm, _ := os.ReadFile(dir + "/comm")
	who := fmt.Sprintf("process %d (%s)", pid, bytes.TrimSpace(comm))
	info, err := os.ReadFile(dir + "/mountinfo")
	if err != nil {
		return // gone
	}
	own := map[uint64]bool{}
	for line := range strings.SplitSeq(string(info), "\n") {
		if id, err := strconv.ParseUint(strings.SplitN(line, " ", 2)[0], 10, 64); err == nil {
			own[id] = true
		}
	}
	mountOf := func(path string) (uint64, bool) {
		var stx unix.Statx_t
		if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_MNT_ID, &stx); err != nil {
			return 0, false
		}
		return stx.Mnt_id, true
	}
	for _, link := range []string{"cwd", "root"} {
		if id, ok := mountOf(dir + "/" + link); ok && !own[id] {
			target, _ := os.Readlink(dir + "/" + link)
			t.Errorf("%s: its %s %s is outside its own mounts", who, link, target)
		}
	}
	fds, _ := os.ReadDir(dir + "/fd")
	for _, fd := range fds {
		path := dir + "/fd/" + fd.Name()
		target, err := os.Readlink(path)
		if err != nil || !strings.HasPrefix(target, "/") {
			continue // gone, or a pipe, socket or anonymous inode
		}
		if strings.HasPrefix(target, "/sys/fs/cgroup/") && strings.Contains(target, "/hutch-") {
			switch filepath.Base(target) {
			case "cgroup.procs", "cgroup.threads", "tasks", "pids.current":
				continue // the commands' group: see TestNoHostDescriptorsInSandbox
			}
		}
		if id, ok := mountOf(path); ok && !own[id] {
			t.Errorf("%s: descriptor %s is %s, opened outside its own mounts", who, fd.Name(), target)
		}
	}
}

// processParents maps every process of the host to its parent.
func processParents() map[int]int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The parent is the second field after the command's ")".
		if i := bytes.LastIndexByte(stat, ')'); i > 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 {
				parent[p], _ = strconv.Atoi(f[1])
			}
		}
	}
	return parent
}

// descendants lists every process below pid.
func descendants(pid int) []int {
	children := map[int][]int{}
	for p, pp := range processParents() {
		children[pp] = append(children[pp], p)
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			out = append(out, c)
			walk(c)
		}
	}
	walk(pid)
	return out
}

// killMarked kills every process of this test whose command line holds
// marker.
func killMarked(marker string) {
	for _, p := range descendants(os.Getpid()) {
		if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); bytes.Contains(cmdline, []byte(marker)) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// The kernel counts inotify instances, fanotify groups and message queue
// bytes per host user through every user namespace: a command holding
// all it could get left every other process of hutch's user (other
// sandboxes, hutch itself) with "too many open files". A sandbox gets a
// share (helper.QuotaShare) and cannot raise it; while a command holds
// all of its share, the host still gets one of each.
func TestSandboxCannotExhaustUserQuotas(t *testing.T) {
	e := newEnv(t)
	hold := filepath.Join(e.work, "holding")
	done := make(chan string, 1)
	go func() { done <- e.attack(t, e.pol, "quotas", hold) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(hold); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command never held its quotas: %s", <-done)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fd, err := unix.InotifyInit1(unix.IN_CLOEXEC); err != nil {
		t.Errorf("the host got no inotify instance while the sandbox held its own: %v", err)
	} else {
		unix.Close(fd)
	}
	if fd, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_REPORT_FID, unix.O_RDONLY); err != nil {
		t.Errorf("the host got no fanotify group while the sandbox held its own: %v", err)
	} else {
		unix.Close(fd)
	}
	name, _ := unix.BytePtrFromString(fmt.Sprintf("hutch-test-%d", os.Getpid()))
	attr := [8]int64{0, 10, 8192}
	if fd, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(name)), unix.O_CREAT|unix.O_RDWR, 0o600, uintptr(unsafe.Pointer(&attr)), 0, 0); errno != 0 {
		t.Errorf("the host got no message queue while the sandbox held its own: %v", errno)
	} else {
		unix.Close(int(fd))
		unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(name)), 0, 0)
	}
	out := <-done
	t.Log(out)
	for _, name := range []string{"raise-sysctl", "raise-msgqueue", "raise-sigpending", "raise-memlock"} {
		if !strings.Contains(out, name+" BLOCKED") {
			t.Errorf("%s was not refused: %s", name, out)
		}
	}
	var inotify, fanotify, queues int
	if i := strings.Index(out, "\ninotify "); i < 0 {
		t.Fatalf("no counts: %s", out)
	} else if _, err := fmt.Sscanf(out[i+1:], "inotify %d fanotify %d queues %d", &inotify, &fanotify, &queues); err != nil {
		t.Fatalf("no counts: %v: %s", err, out)
	}
	q := helper.SandboxQuotas()
	if n := q.Sysctls["max_inotify_instances"]; n == 0 || int64(inotify) > n {
		t.Errorf("the sandbox took %d inotify instances, its share is %d", inotify, n)
	}
	if n := q.Sysctls["max_fanotify_groups"]; n > 0 && int64(fanotify) > n {
		t.Errorf("the sandbox took %d fanotify groups, its share is %d", fanotify, n)
	}
}

// A command's per-user rlimits are the sandbox's shares, soft and hard.
func TestSandboxQuotaRlimits(t *testing.T) {
	e := newEnv(t)
	q := helper.SandboxQuotas()
	r := e.run(t, sh("cat /proc/self/limits"))
	for _, c := range []struct {
		row string
		v   uint64
	}{{"Max msgqueue size", q.MsgQueue}, {"Max pending signals", q.SigPending}, {"Max locked memory", q.MemLock}} {
		want := fmt.Sprintf("%d", c.v)
		found := false
		for line := range strings.SplitSeq(string(r.Stdout), "\n") {
			if strings.HasPrefix(line, c.row) {
				f := strings.Fields(strings.TrimPrefix(line, c.row))
				found = len(f) >= 2 && f[0] == want && f[1] == want
				if !found {
					t.Errorf("%s: %q, want %s soft and hard", c.row, line, want)
				}
			}
		}
		if !found && !t.Failed() {
			t.Errorf("no %q in %q", c.row, r.Stdout)
		}
	}
}

// Commands see only their own processes in /proc: hutch's (a one-shot's
// PID 1, a session's init, runner and exec helpers) are not there to
// list, open or read, even by their PID.
func TestCommandsDoNotSeeHutch(t *testing.T) {
	e := newEnv(t)
	script := `for d in /proc/[0-9]*; do printf 'PID %s %s\n' "${d#/proc/}" "$(tr '\0' ' ' < $d/cmdline)"; done
for p in 1 2 3; do if [ -e /proc/$p/cmdline ]; then printf 'HAS %s %s\n' $p "$(tr '\0' ' ' < /proc/$p/cmdline)"; fi; done; echo listed`
	r := e.run(t, sh(script))
	out := string(r.Stdout)
	if !strings.Contains(out, "listed") || !strings.Contains(out, "PID ") {
		t.Fatalf("the listing did not run: exit %d, %q %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	for line := range strings.SplitSeq(out, "\n") {
		for _, name := range []string{helper.InitName, helper.RunnerName, helper.ExecName, "hutch"} {
			if strings.Contains(line, name) {
				t.Errorf("a command sees hutch's process: %q", line)
			}
		}
	}
}

// starter is what started a command: hutch's process (a one-shot's PID 1,
// a session's runner or exec helper), which the command itself cannot
// see, as the host sees it.
type starter struct {
	pid  int    // on the host
	name string // its command line's first word
}

// withStarter runs script through run, first making the command say it
// has started (a file in dir) and wait; meanwhile it finds on the host the
// process that started the command's shell and calls inspect with it. It
// returns the command's result.
func withStarter(t *testing.T, dir string, run func(script string) sandbox.Result, script string, inspect func(starter)) sandbox.Result {
	t.Helper()
	return withStarterAfter(t, dir, run, "", script, inspect)
}

// withStarterAfter is withStarter with first, a part of the script that
// runs before the host looks.
func withStarterAfter(t *testing.T, dir string, run func(script string) sandbox.Result, first, script string, inspect func(starter)) sandbox.Result {
	t.Helper()
	// The file's name is unique, and in the shell's command line: that is
	// how the host tells this command's shell from any other sandbox's.
	file := filepath.Join(dir, fmt.Sprintf(".starter-%d", time.Now().UnixNano()))
	defer os.Remove(file)
	defer os.Remove(file + ".go")
	wait := `: > ` + file + `; while [ ! -e ` + file + `.go ]; do sleep 0.01; done; `
	done := make(chan sandbox.Result, 1)
	go func() { done <- run(first + wait + script) }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(file); err == nil {
			inspect(hostStarter(t, file))
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the command ended before saying it started: exit %d, %q %q", r.ExitCode, r.Stdout, r.Stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	if err := os.WriteFile(file+".go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return <-done
}

// startedBy is the name of what started script's command (see
// withStarter), and the command's result.
func startedBy(t *testing.T, dir string, run func(script string) sandbox.Result, script string) (string, sandbox.Result) {
	t.Helper()
	var name string
	r := withStarter(t, dir, run, script, func(s starter) { name = s.name })
	return name, r
}

// hostStarter finds, among this test's processes, the shell whose command
// line holds marker and whose parent is one of hutch's, and returns that
// parent.
func hostStarter(t *testing.T, marker string) starter {
	t.Helper()
	parents := processParents()
	var found []starter
	for _, p := range descendants(os.Getpid()) {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if !bytes.Contains(cmd, []byte(marker)) {
			continue
		}
		pp := parents[p]
		parent, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pp))
		if name, _, _ := strings.Cut(string(parent), "\x00"); strings.HasPrefix(name, "hutch-sandbox") {
			found = append(found, starter{pp, name})
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one shell of this command started by hutch's process, found %v", found)
	}
	return found[0]
}
