package isolated_test

// Review 3: attacks on the one-shot path (isolated.Run -> helper.RunOnce:
// a raw fork of the caller becomes the sandbox's PID 1) and on the shared
// root and confinement programs. Each test is one attack with a positive
// control and asserts the SAFE behaviour: a failing test is a hole.
// Tests marked FINDING fail on the code as reviewed.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

// r3Secret lives in the caller's heap (and so in every forked PID 1).
var r3Secret = func() []byte {
	b := []byte("r3-heap-")
	return append(b, []byte(strconv.FormatInt(time.Now().UnixNano()%1e9, 36)+"-SECRET")...)
}()

func init() { r3Init() }

// r3Init runs the review's Go attacks inside the sandbox when HUTCH_R3
// names one (its own variable: attack_test.go's init exits on any name).
func r3Init() {
	name := os.Getenv("HUTCH_R3")
	if name == "" {
		return
	}
	args := os.Args[len(os.Args)-countArgs():]
	switch name {
	case "procmem":
		r3ProcMem()
	case "shmalloc":
		mib, _ := strconv.Atoi(args[1])
		r3Alloc(args[0], mib)
	}
	fmt.Printf("r3 %s done\n", name)
	os.Exit(0)
}

// r3ProcMem tries every way to PID 1's memory and descriptors.
func r3ProcMem() {
	buf := make([]byte, 16)
	// Control: our own memory through the same call.
	local := []unix.Iovec{{Base: &buf[0], Len: 16}}
	self := []byte("control-bytes-xx")
	remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&self[0])), Len: 16}}
	n, err := unix.ProcessVMReadv(os.Getpid(), local, remote, 0)
	fmt.Println("process_vm_readv self:", n, err)
	remote[0].Base = 0x400000
	n, err = unix.ProcessVMReadv(1, local, remote, 0)
	fmt.Println("process_vm_readv pid1:", n, err)
	for _, p := range []string{"/proc/1/mem", "/proc/1/task/1/mem", "/proc/1/environ", "/proc/1/maps", "/proc/1/auxv", "/proc/1/fd/3", "/proc/1/task/1/fd/3", "/proc/1/root/proc/1/mem"} {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			f, err = os.Open(p)
		}
		if err != nil {
			fmt.Println("open", p, "denied:", err)
			continue
		}
		f.Close()
		fmt.Println("open", p, "OPENED")
	}
	pfd, err := unix.PidfdOpen(1, 0)
	if err != nil {
		fmt.Println("pidfd_open(1):", err)
	} else {
		_, err = unix.PidfdGetfd(pfd, 3, 0)
		fmt.Println("pidfd_getfd(1, 3):", err)
		err = unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0)
		fmt.Println("pidfd_send_signal(1, KILL):", err)
	}
}

// r3Alloc maps mib MiB, private or shared, and touches every page.
func r3Alloc(kind string, mib int) {
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if kind == "shared" {
		flags = unix.MAP_SHARED | unix.MAP_ANONYMOUS
	}
	m, err := unix.Mmap(-1, 0, mib<<20, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		fmt.Println("ALLOC FAILED", err)
		return
	}
	for i := 0; i < len(m); i += 4096 {
		m[i] = 1
	}
	fmt.Printf("ALLOCATED %d MiB %s\n", mib, kind)
}

func (e *env) r3attack(t *testing.T, pol policy.Policy, name string, args ...string) string {
	t.Helper()
	self, _ := os.Executable()
	r := e.runWith(t, pol, sandbox.Command{Args: append([]string{self, "-test.run=^$"}, args...),
		Env: map[string]string{"HUTCH_R3": name}, Timeout: 9 * time.Second})
	out := string(r.Stdout) + string(r.Stderr)
	if !strings.Contains(out, "r3 "+name+" done") {
		t.Fatalf("attack %s did not run to the end (exit %d): %s", name, r.ExitCode, out)
	}
	return out
}

// ---------------------------------------------------------------------------
// PID 1 is a copy of the caller's memory: no /proc file of it (nor of its
// tasks) may show the caller's environment, heap or arguments.
func TestReview3PID1ProcFilesShowNothingOfTheCaller(t *testing.T) {
	e := newEnv(t)
	t.Setenv("HUTCH_R3_ENV_SECRET", "r3-env-SECRET")
	script := `dump() { for f in $1/* $1/task/*/* $1/task/*/fdinfo/* $1/fdinfo/*; do [ -f "$f" ] && head -c 2000000 "$f" 2>/dev/null; done; }
echo "control: $(dump /proc/self | grep -a -c r3-ctl-SECRET)"
echo "pid1: $(dump /proc/1 | grep -a -c -e r3-env-SECRET -e r3-heap- -e test.run -e test.v)"
echo "fds: $(ls /proc/1/fd /proc/1/task/1/fd 2>/dev/null | wc -l)"`
	r := e.runWith(t, e.pol, sandbox.Command{Shell: script, Env: map[string]string{"R3CTL": "r3-ctl-SECRET"}, Timeout: 9 * time.Second})
	out := string(r.Stdout)
	if !strings.Contains(out, "control: ") || strings.Contains(out, "control: 0") {
		t.Fatalf("control: the dump did not find the command's own environment: %q %q", out, r.Stderr)
	}
	if !strings.Contains(out, "pid1: 0") {
		t.Errorf("a /proc/1 file shows the caller's secrets or arguments: %q", out)
	}
	if bytes.Contains(r.Stdout, r3Secret) {
		t.Errorf("heap secret leaked: %q", out)
	}
}

// process_vm_readv, pidfd_getfd, /proc/1/mem and friends on PID 1.
func TestReview3PID1MemoryAndDescriptorsUnreachable(t *testing.T) {
	e := newEnv(t)
	out := e.r3attack(t, e.pol, "procmem")
	t.Logf("%s", out)
	if strings.Contains(out, "OPENED") {
		t.Errorf("a file of PID 1's memory or descriptors opened:\n%s", out)
	}
	// pidfd_send_signal "succeeds" (the kernel drops a SIGKILL from inside
	// the namespace to its init): r3attack's run returning a record at
	// all shows PID 1 lived on.
	if strings.Contains(out, "process_vm_readv pid1: 16") || strings.Contains(out, "pidfd_getfd(1, 3): <nil>") {
		t.Errorf("PID 1 reachable:\n%s", out)
	}
}

// Forging the status record: writing to PID 1's status pipe by every
// name the command could know.
func TestReview3ForgeStatusRecord(t *testing.T) {
	e := newEnv(t)
	script := `rec=$(printf '\001\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000')
for p in /proc/1/fd/3 /proc/1/task/1/fd/3 /dev/fd/3 /proc/self/fd/3 /proc/$PPID/fd/3; do printf "$rec%0200d" 0 >$p 2>/dev/null && echo WROTE $p; done
printf "$rec%0200d" 0 >&3 2>/dev/null && echo WROTE 3
exit 7`
	r := e.run(t, sh(script))
	if r.ExitCode != 7 || strings.Contains(string(r.Stdout), "WROTE") {
		t.Errorf("the command forged or reached its status record: exit %d, %q %q", r.ExitCode, r.Stdout, r.Stderr)
	}
}

// Every signal 1..64 to PID 1, STOP and CONT included, from the command
// and from a grandchild in another session: PID 1 must still report the
// command's own ending, promptly.
func TestReview3EverySignalToPID1(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	r := e.run(t, sandbox.Command{Shell: `kill -STOP 1; i=1; while [ $i -le 64 ]; do kill -$i 1 2>/dev/null; i=$((i+1)); done
setsid sh -c 'kill -STOP 1; kill -TSTP 1; kill -TTIN 1; kill -TTOU 1' ; sleep 0.2; echo ALIVE; exit 5`, Timeout: 9 * time.Second})
	if r.ExitCode != 5 || !strings.Contains(string(r.Stdout), "ALIVE") || r.TimedOut {
		t.Errorf("signals reached PID 1: %+v %q %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("PID 1 stalled (stopped?): Run took %v", d)
	}
}

// A command that stops itself (PID 1 does not wait for stopped children)
// must still be ended by the timeout; a stopped grandchild must not hold
// the run when the command exits.
func TestReview3StoppedCommandAndGrandchild(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	r, err := isolated.Run(bg, e.pol, sandbox.Command{Shell: "echo before; kill -STOP $$; echo after", Timeout: time.Second})
	if err != nil || !r.TimedOut || !strings.Contains(string(r.Stdout), "before") {
		t.Errorf("a self-stopped command: %+v %v", r, err)
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("Run with a stopped command took %v", d)
	}
	start = time.Now()
	r = e.run(t, sandbox.Command{Shell: "sh -c 'kill -STOP $$' & sleep 0.2; exit 4", Timeout: 9 * time.Second})
	if r.ExitCode != 4 || r.TimedOut || time.Since(start) > 5*time.Second {
		t.Errorf("a stopped grandchild held the run: %+v after %v", r, time.Since(start))
	}
}

// Nothing of the command outlives a NORMAL ending (not the timeout):
// daemons, double forks, processes that closed their streams, and
// processes forked while PID 1 kills everything; none keeps writing to
// the workspace after Run returned.
func TestReview3NothingOutlivesANormalEnding(t *testing.T) {
	e := newEnv(t)
	marker := fmt.Sprintf("4100.%d", time.Now().UnixNano()%1e6)
	log := filepath.Join(e.work, "log")
	script := fmt.Sprintf(`setsid sh -c 'exec sleep %[1]s1' </dev/null >/dev/null 2>&1 &
(sh -c 'exec sleep %[1]s2' </dev/null >/dev/null 2>&1 &) 
nohup sh -c 'exec >/dev/null 2>&1 </dev/null; while :; do echo x >> %[2]s; done' >/dev/null 2>&1 &
# a forker that never stops making new processes
sh -c 'exec >/dev/null 2>&1 </dev/null; while :; do sleep %[1]s3 & done' &
sleep 0.3; echo started; exit 0`, marker, log)
	r := e.run(t, sandbox.Command{Shell: script, Timeout: 9 * time.Second})
	if r.ExitCode != 0 || !strings.Contains(string(r.Stdout), "started") {
		t.Fatalf("control: %+v %q %q", r, r.Stdout, r.Stderr)
	}
	st1, err := os.Stat(log)
	if err != nil {
		t.Fatalf("control: the writer never wrote: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	st2, _ := os.Stat(log)
	if st2.Size() != st1.Size() {
		t.Errorf("a process kept writing to the workspace after Run returned: %d -> %d bytes", st1.Size(), st2.Size())
	}
	if left := sandboxtest.Survivors(marker, 3*time.Second); len(left) > 0 {
		t.Errorf("processes outlived the command: %v", left)
	}
}

// The command holds only 0, 1, 2 whatever the caller had open (even
// descriptors the caller opened without close-on-exec).
func TestReview3NoCallerDescriptorsWithoutCloexec(t *testing.T) {
	e := newEnv(t)
	f, err := os.Open(e.secret)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := unix.Dup(int(f.Fd())) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	r := e.run(t, sh(fmt.Sprintf("ls /proc/self/fd | tr '\\n' ' '; cat <&%d 2>/dev/null; cat /proc/self/fd/%d 2>/dev/null", fd, fd)))
	if strings.Contains(string(r.Stdout), "TOP-SECRET") {
		t.Errorf("the command read a descriptor of the caller: %q", r.Stdout)
	}
	for _, s := range strings.Fields(string(r.Stdout)) {
		if s != "0" && s != "1" && s != "2" && s != "3" {
			t.Errorf("the command holds fd %s: %q", s, r.Stdout)
		}
	}
}

// Concurrent runs: one run's PID 1 is a fork of a caller that holds the
// other runs' pipes. Neither may see the other's output, and a slow
// neighbour must not delay a quick run's end.
func TestReview3ConcurrentRunsStayApart(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	var bad atomic.Int32
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := fmt.Sprintf("tok%d", i)
			r, err := isolated.Run(bg, e.pol, sandbox.Command{Shell: "echo " + tok + "; ls /proc/self/fd | wc -l", Timeout: 9 * time.Second})
			if err != nil || strings.TrimSpace(strings.Split(string(r.Stdout), "\n")[0]) != tok {
				bad.Add(1)
				t.Errorf("run %d: %v %q", i, err, r.Stdout)
			}
		}()
	}
	wg.Wait()
	// A quick run next to a slow one ends quickly.
	slow := make(chan struct{})
	go func() {
		isolated.Run(bg, e.pol, sandbox.Command{Shell: "sleep 4", Timeout: 9 * time.Second})
		close(slow)
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	e.run(t, sh("true"))
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a quick run took %v next to a slow one", d)
	}
	<-slow
}

// The rlimit memory fallback (no memory cgroup, as for a non-root user
// without delegation): helper.RunOnce with MemoryByCgroup false applies
// RLIMIT_DATA to the command before execve. (RLIMIT_DATA does not count
// shared mappings — mmap(MAP_SHARED|MAP_ANONYMOUS), memfd, /dev/zero — so
// this fallback is best effort: the README and hutch check say so; a
// memory cgroup bounds them.)
func TestReview3RlimitMemoryFallback(t *testing.T) {
	e := newEnv(t)
	cwd, _ := os.Getwd()
	pol, err := e.pol.Extend(policy.Policy{Limits: policy.Limits{Memory: 200 << 20}, Dir: e.work}).Normalize(cwd)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	run := func(kind string, mib int) string {
		job := helper.Job{Policy: pol, Dir: e.work, HostUID: os.Getuid(), HostGID: os.Getgid(),
			Argv: []string{self, "-test.run=^$", kind, strconv.Itoa(mib)},
			Env:  []string{"PATH=/usr/bin:/bin", "HUTCH_R3=shmalloc", "GOGC=off"}}
		outR, outW, _ := os.Pipe()
		defer outR.Close()
		done := make(chan []byte)
		go func() { b, _ := io.ReadAll(outR); done <- b }()
		ctx, cancel := context.WithTimeout(bg, 8*time.Second)
		defer cancel()
		st, _, err := helper.RunOnce(ctx, job, nil2(t), outW, outW, nil, nil, 8*time.Second)
		outW.Close()
		out := string(<-done)
		if err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		return fmt.Sprintf("%s (maxrss %d KiB)", strings.TrimSpace(out), st.MaxRSSKiB)
	}
	priv := run("private", 600)
	t.Logf("private: %s", priv)
	if !strings.Contains(priv, "ALLOC FAILED") && !strings.Contains(priv, "out of memory") {
		t.Fatalf("control: 600 MiB private under a 200 MiB limit was not refused: %s", priv)
	}
	if small := run("private", 50); !strings.Contains(small, "ALLOCATED") {
		t.Fatalf("control: 50 MiB under a 200 MiB limit was refused: %s", small)
	}
}

func nil2(t *testing.T) *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// A denied path that is missing when a sandbox is built can be planted by
// the command (its parent is writable). The next sandbox with the same
// policy must still build: a magic link (/proc/self/root/...) or a link
// loop at the denied name is passed over (inside, it leads nowhere, or to
// what the policy governs by its own name). An ordinary link there moves
// the mask onto its target, by design (masks follow links so that a
// denied file's links are masked too; the README says so): that is
// checked to stay a build that works, not a wider view.
func TestReview3PlantedLinkAtMissingDeniedPath(t *testing.T) {
	e := newEnv(t)
	os.WriteFile(filepath.Join(e.work, "keep.txt"), []byte("KEEP-VISIBLE"), 0o644)
	denied := filepath.Join(e.work, "secret.env")
	pol := e.pol.Extend(policy.Policy{Deny: []string{denied}})
	// Control: the policy builds and works.
	wantOut(t, "control", e.runWith(t, pol, sh("cat keep.txt")), 0, "KEEP-VISIBLE")
	for _, target := range []string{"/proc/self/root/etc/hostname", "secret.env", "keep.txt"} {
		os.Remove(denied)
		r := e.runWith(t, pol, sh("ln -s "+target+" secret.env && echo PLANTED"))
		if !strings.Contains(string(r.Stdout), "PLANTED") {
			t.Fatalf("could not plant a link at the missing denied path: %q %q", r.Stdout, r.Stderr)
		}
		r2, err := isolated.Run(bg, pol, sandbox.Command{Shell: "cat keep.txt; echo; ls /usr/bin | wc -l", Timeout: 9 * time.Second})
		if err != nil {
			t.Errorf("a link planted by a command at a missing denied path (-> %s) stops the next sandbox from building: %v", target, err)
			continue
		}
		if target != "keep.txt" && !strings.Contains(string(r2.Stdout), "KEEP-VISIBLE") {
			t.Errorf("a link planted at a missing denied path (-> %s) hid another file: %q %q", target, r2.Stdout, r2.Stderr)
		}
	}
	os.Remove(denied)
}

// Race: a host-side writer (e.g. a concurrent sandbox sharing the
// workspace) swaps a nested policy path between a directory and a link to
// a directory outside the policy while sandboxes are built. The link
// must never be followed (the child reopens without links and checks the
// type).
func TestReview3SwapNestedPolicyPathDuringBuild(t *testing.T) {
	e := newEnv(t)
	nested := filepath.Join(e.work, "ro")
	os.MkdirAll(nested, 0o755)
	os.WriteFile(filepath.Join(nested, "ok"), []byte("NESTED-OK"), 0o644)
	pol := e.pol.Extend(policy.Policy{Read: []string{nested}})
	wantOut(t, "control", e.runWith(t, pol, sh("cat ro/ok")), 0, "NESTED-OK")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		alt := filepath.Join(e.work, "ro.alt")
		link := filepath.Join(e.work, "ro.link")
		os.Symlink(e.outside, link)
		os.MkdirAll(alt, 0o755)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Swap the directory and the link atomically, back and forth.
			unix.Renameat2(unix.AT_FDCWD, nested, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
			unix.Renameat2(unix.AT_FDCWD, nested, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	var ok, refused int
	for time.Now().Before(deadline) {
		r, err := isolated.Run(bg, pol, sandbox.Command{Shell: "cat ro/secret.txt 2>/dev/null; cat ro/ok 2>/dev/null", Timeout: 5 * time.Second})
		if err != nil {
			refused++
			continue
		}
		ok++
		if strings.Contains(string(r.Stdout), "TOP-SECRET") {
			t.Errorf("a directory outside the policy was bound through a swapped link: %q", r.Stdout)
			break
		}
	}
	close(stop)
	wg.Wait()
	// Put things back for cleanup.
	if fi, err := os.Lstat(nested); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		unix.Renameat2(unix.AT_FDCWD, nested, unix.AT_FDCWD, filepath.Join(e.work, "ro.link"), unix.RENAME_EXCHANGE)
	}
	t.Logf("%d runs, %d refused", ok, refused)
}

// A file policy path swapped for a FIFO or a directory between the
// caller's check and the child's open: refused, not bound.
func TestReview3SwapFilePolicyPathType(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(e.work, "cfg")
	os.WriteFile(file, []byte("CFG"), 0o644)
	pol := e.pol.Extend(policy.Policy{Read: []string{file}})
	wantOut(t, "control", e.runWith(t, pol, sh("cat cfg")), 0, "CFG")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	other := filepath.Join(e.work, "cfg.dir")
	os.Symlink(e.outside, other)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			unix.Renameat2(unix.AT_FDCWD, file, unix.AT_FDCWD, other, unix.RENAME_EXCHANGE)
		}
	}()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		r, err := isolated.Run(bg, pol, sandbox.Command{Shell: "cat cfg/secret.txt 2>/dev/null; ls cfg 2>/dev/null", Timeout: 5 * time.Second})
		if err == nil && strings.Contains(string(r.Stdout), "TOP-SECRET") {
			t.Errorf("a swapped policy file let the sandbox see outside: %q", r.Stdout)
			break
		}
	}
	close(stop)
	wg.Wait()
}

// The retitled command line hides the caller's arguments even from a
// process that reads /proc/1/cmdline while PID 1 is still being built.
// (The command cannot exist before the build ends; this checks the title
// the command sees, and that the environment area does not follow it.)
func TestReview3CmdlineDoesNotSpillIntoEnvironment(t *testing.T) {
	e := newEnv(t)
	t.Setenv("HUTCH_R3_SPILL", "r3-spill-SECRET")
	r := e.run(t, sh("od -c /proc/1/cmdline | tail -3; tr '\\0' '\\n' </proc/1/cmdline | grep -c SECRET"))
	if !strings.HasSuffix(strings.TrimSpace(string(r.Stdout)), "0") {
		t.Errorf("PID 1's command line shows the caller's environment: %q", r.Stdout)
	}
}
