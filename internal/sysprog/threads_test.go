//go:build linux

package sysprog

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/internal/wire"
)

func init() {
	testenv.RegisterProgram("full-pids", func(args []string) { os.Exit(fullPidsChild(args[0])) })
}

// The helper's Go processes share the sandbox's process limit with its
// commands. Here a child of the test fills a real pids control group
// with sleeping processes, as a fork bomb would, and then does what a
// helper role does: wait on many Conns at once, block in system calls,
// run timers and the collector. With a thread reserve and Conn's waits in
// the poller it carries on; the control, the same waits on blocking
// sockets without the reserve, must die for want of a thread, or the
// test proves nothing.
func TestFullProcessLimit(t *testing.T) {
	cg := newPidsGroup(t, 48)
	for _, tc := range []struct {
		mode    string
		survive bool
	}{
		{"helper", true},
		{"control", false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			argv := testenv.ProgramArgv(tc.mode)
			c := exec.Command(argv[0], argv[1:]...)
			c.Env = append(os.Environ(), testenv.ProgramEnv("full-pids"))
			stdin, err := c.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			c.Stdout, c.Stderr = &out, &out
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			defer cg.killAll(t)
			if err := cg.add(c.Process.Pid); err != nil {
				_ = c.Process.Kill()
				_ = c.Wait()
				t.Fatal(err)
			}
			_, _ = stdin.Write([]byte("go\n"))
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				_ = c.Process.Kill()
				<-done
				t.Fatalf("child hung:\n%s", out.String())
			}
			text := out.String()
			if !strings.Contains(text, "filled: ") {
				t.Fatalf("the child never filled the group (err %v):\n%s", err, text)
			}
			switch {
			case tc.survive && (err != nil || !strings.Contains(text, "survived")):
				t.Fatalf("died with the process limit full (err %v):\n%s", err, head(text))
			case !tc.survive && err == nil:
				t.Fatalf("control survived, so the test could not tell:\n%s", text)
			case !tc.survive && !strings.Contains(text, "failed to create new OS thread") && // the Go runtime's words
				!strings.Contains(text, "pthread_create failed: Resource temporarily unavailable"): // with cgo
				t.Fatalf("control died of something else (err %v):\n%s", err, head(text))
			}
		})
	}
}

func head(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "..."
	}
	return s
}

// fullPidsChild waits to be moved into the group, fills it, then works.
func fullPidsChild(mode string) int {
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 3
	}
	if mode == "helper" {
		ReserveThreads(6)
	}
	const waiters = 16
	var hosts, ends [waiters]int
	for i := range waiters {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			fmt.Println("socketpair:", err)
			return 3
		}
		hosts[i], ends[i] = fds[0], fds[1]
	}
	// Fill the group: sleepers until fork is refused.
	n := 0
	for {
		_, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "300"}, &syscall.ProcAttr{})
		if err == syscall.EAGAIN {
			break
		}
		if err != nil {
			fmt.Println("fork:", err)
			return 3
		}
		n++
	}
	fmt.Printf("filled: %d sleepers\n", n)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var v struct{ N int }
			if mode == "helper" {
				c := wire.NewConn(ends[i])
				_, _ = c.Recv(&v)
				return
			}
			buf := make([]byte, 64)
			_, _, _, _, _ = unix.Recvmsg(ends[i], buf, nil, 0) // blocks its thread
		}()
	}
	// Two blocking reads (the host's stream, a wait for a child).
	r, w, _ := os.Pipe()
	r.Fd() // blocking: each read holds a thread
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = r.Read(make([]byte, 1))
		}()
	}
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	timer := make(chan struct{})
	time.AfterFunc(50*time.Millisecond, func() { close(timer) })
	<-timer
	for i := range waiters {
		_, _ = unix.Write(hosts[i], []byte(`{"N":1}`))
	}
	_, _ = w.Write([]byte("xx"))
	wg.Wait()
	fmt.Println("survived")
	return 0
}

// pidsGroup is a pids control group made for one test (v1 or v2).
type pidsGroup struct{ dir string }

func newPidsGroup(t *testing.T, max int) *pidsGroup {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "needs a pids control group (run as root): not root")
	}
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	name := "hutch-test-" + hex.EncodeToString(id)
	var dir string
	if ctrl, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil && strings.Contains(string(ctrl), "pids") {
		own, _ := os.ReadFile("/proc/self/cgroup")
		rel := strings.TrimSpace(strings.TrimPrefix(string(own), "0::"))
		dir = filepath.Join("/sys/fs/cgroup", filepath.Dir(rel), name)
	} else if _, err := os.Stat("/sys/fs/cgroup/pids/cgroup.procs"); err == nil {
		dir = filepath.Join("/sys/fs/cgroup/pids", name)
	} else {
		testenv.Missing(t, "needs a pids control group (run as root): no pids controller")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		testenv.Missing(t, "needs a pids control group (run as root): %v", err)
	}
	g := &pidsGroup{dir: dir}
	t.Cleanup(func() {
		g.killAll(t)
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *pidsGroup) add(pid int) error {
	return os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// killAll kills every process in the group and waits until it is empty.
func (g *pidsGroup) killAll(t *testing.T) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(g.dir, "cgroup.procs"))
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			return
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("processes left in %s: %s", g.dir, b)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
