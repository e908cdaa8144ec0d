//go:build linux

package sysprog

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/nofile/nofiletest"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/policy"
)

// spawnWait starts job's command with spawn, feeds it stdin, and returns
// its exit status, stdout and stderr.
func spawnWait(t *testing.T, job wire.Job, prog, stdin string, setsid bool) (int, string, string) {
	t.Helper()
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	pid, err := spawn(job, prog, setsid, [3]*os.File{inR, outW, errW})
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.WriteString(inW, stdin); inW.Close() }()
	var out, errOut bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = errOut.ReadFrom(errR); close(done) }()
	_, _ = out.ReadFrom(outR)
	<-done
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	return ws.ExitStatus(), out.String(), errOut.String()
}

func TestSpawn(t *testing.T) {
	dir := t.TempDir()
	plain := dir + "/plain"
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=/usr/bin:/bin", "HUTCH_T=1"}
	sh := func(script string) wire.Job {
		return wire.Job{Argv: []string{"sh", "-c", script}, Env: env, Dir: dir}
	}
	cases := []struct {
		name     string
		job      wire.Job
		prog     string
		setsid   bool
		code     int
		out, err string // substrings
	}{
		{"streams, directory, environment",
			sh(`read x; echo "out:$x"; echo err >&2; pwd; echo "$HUTCH_T"`), "/bin/sh", false, 0,
			"out:in\n" + dir + "\n1\n", "err\n"},
		// Even a descriptor left without close-on-exec (see leak).
		{"only 0, 1 and 2 are open", sh(`ls /proc/$$/fd; echo end`), "/bin/sh", false, 0, "\n0\n1\n2\nend\n", ""},
		{"a session of its own", sh(`test "$(cut -d' ' -f6 /proc/$$/stat)" = $$ && echo leader`), "/bin/sh", true, 0, "leader", ""},
		{"no session without setsid", sh(`test "$(cut -d' ' -f6 /proc/$$/stat)" != $$ && echo member`), "/bin/sh", false, 0, "member", ""},
		{"missing program", wire.Job{Argv: []string{"nope"}, Env: env, Dir: dir}, "/nonexistent/nope", false, 127, "", "hutch: nope: command not found"},
		{"not executable", wire.Job{Argv: []string{"x"}, Env: env, Dir: dir}, plain, false, 126, "", "hutch: x: permission denied"},
		{"missing directory", wire.Job{Argv: []string{"true"}, Env: env, Dir: dir + "/gone"}, "/bin/true", false, 126, "", "hutch: true: cannot enter its directory: no such file or directory"},
	}
	leak, err := unix.Open(os.DevNull, unix.O_RDONLY, 0) // not close-on-exec
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(leak)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := spawnWait(t, c.job, c.prog, "in\n", c.setsid)
			out = "\n" + out
			if code != c.code || !strings.Contains(out, c.out) || !strings.Contains(errOut, c.err) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, c.code, c.out, c.err)
			}
		})
	}
}

// A stream's source may sit at 0, 1 or 2 in this process, where another
// stream goes: each still ends up where the command should have it. Here
// the command's stdin is this process's stderr (fd 2, the target of the
// command's stderr), and its stdout and stderr are one pipe.
func TestSpawnStreamsAtLowDescriptors(t *testing.T) {
	r, w, _ := os.Pipe()
	defer r.Close()
	job := wire.Job{Argv: []string{"sh", "-c", `echo one; echo two >&2; test "$(readlink /proc/$$/fd/0)" = "$IN" && echo stdin-ok`},
		Env: []string{"PATH=/usr/bin:/bin", "IN=" + mustReadlink(t, "/proc/self/fd/2")}, Dir: "/"}
	pid, err := spawn(job, "/bin/sh", false, [3]*os.File{os.Stderr, w, w})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(r)
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, 0, nil)
	if string(out) != "one\ntwo\nstdin-ok\n" || ws.ExitStatus() != 0 {
		t.Errorf("got %q, exit %d", out, ws.ExitStatus())
	}
}

func mustReadlink(t *testing.T, path string) string {
	t.Helper()
	s, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Without a memory cgroup the command's RLIMIT_DATA is in place before
// it runs: once it has exec'd, its limits already show it (it used to be
// set from outside just after the start, a window a command could use).
func TestSpawnMemoryLimitBeforeExec(t *testing.T) {
	const limit = 64 << 20
	job := wire.Job{Argv: []string{"sleep", "5"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/",
		Policy: policy.Policy{Limits: policy.Limits{Memory: limit}}}
	devnull, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	defer devnull.Close()
	pid, err := spawn(job, "/bin/sleep", false, [3]*os.File{devnull, devnull, devnull})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = unix.Kill(pid, unix.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	}()
	proc := "/proc/" + strconv.Itoa(pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if comm, _ := os.ReadFile(proc + "/comm"); string(comm) == "sleep\n" {
			break // it has exec'd
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not exec in 10 s")
		}
	}
	limits, err := os.ReadFile(proc + "/limits")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(limits), "\n") {
		if strings.HasPrefix(line, "Max data size") {
			if f := strings.Fields(line); len(f) < 5 || f[3] != strconv.Itoa(limit) || f[4] != strconv.Itoa(limit) {
				t.Errorf("the command's data limit at its start: %q, want %d both", line, limit)
			}
			return
		}
	}
	t.Fatalf("no data limit line in %q", limits)
}

func TestSpawnRefusesNUL(t *testing.T) {
	job := wire.Job{Argv: []string{"echo", "a\x00b"}, Env: []string{}, Dir: "/"}
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	if _, err := spawn(job, "/bin/echo", false, [3]*os.File{devnull, devnull, devnull}); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("argv with a NUL byte: %v, want an error naming it", err)
	}
}

// decimal reads a cgroup counter as the child sees it: digits up to the
// first other byte or the end of what was read; a value that fills the
// buffer reads as more than any limit (fail closed).
func TestDecimal(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{
		{"0\n", 0},
		{"4\n", 4},
		{"1024\n", 1024},
		{"12", 12},
		{"", 0},
		{"7x9", 7},
		{"123456789012345678901234", ^uint64(0)},
	} {
		var buf [24]byte
		n := copy(buf[:], c.in)
		if got := decimal(&buf, uintptr(n)); got != c.want {
			t.Errorf("decimal(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// A command gets the soft open-files limit this process started with,
// not the one Go raised for itself (os/exec restores it; spawn must too),
// under the same hard limit.
func TestSpawnGivesTheStartOpenFilesLimit(t *testing.T) {
	if !nofiletest.InChild(t, 300) {
		return
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	job := wire.Job{Argv: []string{"sh", "-c", "ulimit -Sn; ulimit -Hn"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/"}
	code, out, errOut := spawnWait(t, job, "/bin/sh", "", false)
	if want := "300\n" + strconv.FormatUint(lim.Max, 10) + "\n"; code != 0 || out != want {
		t.Errorf("the command's open-files limits: exit %d, %q (want %q), stderr %q; this process has %d, %d", code, out, want, errOut, lim.Cur, lim.Max)
	}
}

// Commands get the start soft open-files limit back only when os/exec's
// children would (the hard limit unchanged since the start, as Go's own
// forkAndExecInChild1 wants): after another process sets hutch's limit to
// K-1/K, commands get K-1/K too. Origin: review 13.
func TestOpenFilesRestoredOnlyAsOSExecWould(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max < 304 {
		t.Fatalf("hard open-files limit %d: no room for a lowered hard limit above the start soft one (raise it with ulimit -Hn)", lim.Max)
	}
	if !nofiletest.InChild(t, 300) {
		return
	}
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// As another process's prlimit would: a raw system call leaves Go's
	// record of the start limit as it is, as an outside change does.
	k := 301 + (lim.Max-301)/2 // 300 < k-1, k < the start hard limit
	set := unix.Rlimit{Cur: k - 1, Max: k}
	if _, _, e := syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&set)), 0, 0, 0); e != 0 {
		t.Fatal(e)
	}
	want := strconv.FormatUint(k-1, 10) + "\n" + strconv.FormatUint(k, 10) + "\n"
	script := "ulimit -Sn; ulimit -Hn"
	viaExec, err := exec.Command("/bin/sh", "-c", script).Output()
	if err != nil || string(viaExec) != want {
		t.Fatalf("control: os/exec's child has %q, %v (want %q)", viaExec, err, want)
	}
	job := wire.Job{Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/"}
	code, out, errOut := spawnWait(t, job, "/bin/sh", "", false)
	if code != 0 || out != want {
		t.Errorf("after this process's limit was set to %d/%d from outside, spawn's command has %q (os/exec's child has %q), exit %d, stderr %q", k-1, k, out, viaExec, code, errOut)
	}
}

// A fork refused with EAGAIN is blamed on the policy's process limit only
// when the sandbox's task count has reached it; a refusal from outside
// the policy (a pids cgroup hutch runs in, RLIMIT_NPROC, threads-max) is
// named as such, with the count. The test runs spawn in a child held by a
// pids cgroup with no room left, under a policy limit far above every
// task there is. Origin: review 14.
func TestNprocMessageOnlyWhenTheLimitIsReached(t *testing.T) {
	if testenv.IsChild(t) {
		fullPidsGroupChild(t, os.Getenv("HUTCH_TEST_PIDS_GROUP"))
		return
	}
	dir := newPidsGroup(t, 1<<22).dir // no limit yet: the child sets it
	testenv.InChild(t, "export HUTCH_TEST_PIDS_GROUP="+dir)
}

func fullPidsGroupChild(t *testing.T, dir string) {
	// Threads for the runtime to reuse once the cgroup is full.
	ReserveThreads(8)
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(filepath.Join(dir, "pids.current"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strings.TrimSpace(string(cur))), 0o644); err != nil {
		t.Fatal(err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	const limit = 4194304 // above any task count there is
	job := wire.Job{Argv: []string{"sh", "-c", "true"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/",
		Policy: policy.Policy{Limits: policy.Limits{Processes: limit}}}
	pid, err := spawn(job, "/bin/sh", false, [3]*os.File{null, null, null})
	_ = os.WriteFile(filepath.Join(dir, "pids.max"), []byte("max"), 0o644)
	if err == nil {
		_, _ = unix.Wait4(pid, nil, 0, nil)
		t.Fatalf("control: the fork in a full pids cgroup (pids.current %s) succeeded", strings.TrimSpace(string(cur)))
	}
	if n := sandboxTasks(); n < limit && strings.Contains(err.Error(), "processes are taken") {
		t.Errorf("with %d tasks, far below the policy's %d, a fork refused by a pids cgroup is blamed on the policy's limit: %v", n, limit, err)
	}
}

func init() {
	testenv.RegisterProgram("group-command", func(args []string) { os.Exit(groupCommandProgram(args)) })
}

// groupCommandProgram runs, as a program of this test binary (its
// CmdGroupFD the file the parent put there, its job's process limit
// args[0]), one command through ForkCommand with a command group, and
// prints what came of it on stdout.
func groupCommandProgram(args []string) int {
	job := wire.Job{Argv: []string{"sh", "-c", "echo ran"}, Dir: "/", Env: []string{"PATH=/usr/bin:/bin"}, CmdGroup: true}
	job.Policy.Limits.Processes, _ = strconv.Atoi(args[0])
	devnull, _ := os.Open(os.DevNull)
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	pid, st, ok := ForkCommand(job, "/bin/sh", false, devnull, outW, errW)
	devnull.Close()
	outW.Close()
	errW.Close()
	var errBuf bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = errBuf.ReadFrom(errR); close(done) }()
	out, _ := io.ReadAll(outR)
	<-done
	code := st.ExitCode
	if ok {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
		code = ws.ExitStatus()
	}
	fmt.Printf("exit=%d\nstdout=%q\nstderr=%q\n", code, out, errBuf.String())
	return 0
}

// runGroupCommand runs this test binary's groupCommandProgram with f at
// CmdGroupFD and count at CountFD, its job's process limit limit; it
// returns the child's stdout and stderr.
func runGroupCommand(t *testing.T, f, count *os.File, limit int) (string, string) {
	t.Helper()
	argv := testenv.ProgramArgv(strconv.Itoa(limit))
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = append(os.Environ(), testenv.ProgramEnv("group-command"))
	c.ExtraFiles = boundary.PlaceGroupFiles(nil, f, count)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	if err := c.Run(); err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// A command that cannot be put into the commands' group does not run and
// says why on its stderr (README: "exit 126, saying why"). The child
// joins the group before it has moved its streams to 0-2, so the line
// went to the helper's own stderr, and the caller of the command saw a
// bare 126. Here the group's file is one that refuses writes (read-only).
func TestGroupFailureSaysWhyOnCommandsStderr(t *testing.T) {
	ro, err := os.Open(os.DevNull) // write(2) on it: EBADF
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	out, helperErr := runGroupCommand(t, ro, nil, 0)
	if !strings.Contains(out, "exit=126\n") || strings.Contains(out, `"ran\n"`) {
		t.Fatalf("the command ran or did not exit 126 outside its group:\n%s", out)
	}
	if !strings.Contains(out, "commands' cgroup") {
		t.Errorf("the command's stderr does not say why it did not run:\n%s\n(the helper's own stderr: %q)", out, helperErr)
	}
}

// The commands' group holds exactly the policy's process limit (README,
// Limits). The pids controller does not check pids.max when a task is
// moved in, only at fork; the child forked outside the group and then
// wrote itself in, so a session's new command started (and ran) in a
// group already at its limit. Here pids.max (and the job's limit) is 1
// and one process is in the group already: the command must not run.
func TestCommandDoesNotStartInAFullGroup(t *testing.T) {
	root := "/sys/fs/cgroup/pids"
	if _, err := os.Stat(filepath.Join(root, "tasks")); err != nil || os.Getuid() != 0 {
		testenv.Missing(t, "needs root and a cgroup v1 pids hierarchy")
	}
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	dir := filepath.Join(root, "hutch-test-"+hex.EncodeToString(id))
	if err := os.Mkdir(dir, 0o755); err != nil {
		testenv.Missing(t, "cannot make a pids group (CI runs as root on a host with a v1 pids hierarchy): %v", err)
	}
	defer os.Remove(dir)
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("/bin/sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(holder.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	tasks, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tasks.Close()
	count, err := os.Open(filepath.Join(dir, "pids.current"))
	if err != nil {
		t.Fatal(err)
	}
	defer count.Close()
	out, _ := runGroupCommand(t, tasks, count, 1)
	cur, _ := os.ReadFile(filepath.Join(dir, "pids.current"))
	if strings.Contains(out, `"ran\n"`) || !strings.Contains(out, "exit=126\n") {
		t.Errorf("a command started in a group already at pids.max 1 (pids.current now %s):\n%s", bytes.TrimSpace(cur), out)
	}
}

// A program that exists but whose interpreter does not (a script's #!
// line, or a binary's ELF loader) fails execve with ENOENT. spawn is
// given the file findProgram already found, yet the child called every
// all-ENOENT outcome "command not found", sending the reader after the
// wrong file. Go's ForkExec said "no such file or directory" (127 both).
func TestMissingInterpreterIsNotCommandNotFound(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "tool")
	if err := os.WriteFile(script, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	job := wire.Job{Argv: []string{"tool"}, Env: []string{"PATH=" + dir}, Dir: dir}
	code, _, errOut := spawnWait(t, job, script, "", false)
	if code != 127 || strings.Contains(errOut, "command not found") {
		t.Errorf("exit %d, stderr %q: the command exists; its interpreter is what is missing", code, errOut)
	}
}
