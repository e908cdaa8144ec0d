package helper

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/nofile/nofiletest"
	"github.com/hutchsandbox/hutch/policy"
)

// spawnWait starts job's command with spawn, feeds it stdin, and returns
// its exit status, stdout and stderr.
func spawnWait(t *testing.T, job Job, prog, stdin string, setsid bool) (int, string, string) {
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
	sh := func(script string) Job {
		return Job{Argv: []string{"sh", "-c", script}, Env: env, Dir: dir}
	}
	cases := []struct {
		name     string
		job      Job
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
		{"missing program", Job{Argv: []string{"nope"}, Env: env, Dir: dir}, "/nonexistent/nope", false, 127, "", "hutch: nope: command not found"},
		{"not executable", Job{Argv: []string{"x"}, Env: env, Dir: dir}, plain, false, 126, "", "hutch: x: permission denied"},
		{"missing directory", Job{Argv: []string{"true"}, Env: env, Dir: dir + "/gone"}, "/bin/true", false, 126, "", "hutch: true: cannot enter its directory: no such file or directory"},
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
	job := Job{Argv: []string{"sh", "-c", `echo one; echo two >&2; test "$(readlink /proc/$$/fd/0)" = "$IN" && echo stdin-ok`},
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
	job := Job{Argv: []string{"sleep", "5"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/",
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
	job := Job{Argv: []string{"echo", "a\x00b"}, Env: []string{}, Dir: "/"}
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
	job := Job{Argv: []string{"sh", "-c", "ulimit -Sn; ulimit -Hn"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/"}
	code, out, errOut := spawnWait(t, job, "/bin/sh", "", false)
	if want := "300\n" + strconv.FormatUint(lim.Max, 10) + "\n"; code != 0 || out != want {
		t.Errorf("the command's open-files limits: exit %d, %q (want %q), stderr %q; this process has %d, %d", code, out, want, errOut, lim.Cur, lim.Max)
	}
}
