//go:build linux

package sysprog

import (
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
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/internal/wire"
)

func init() {
	testenv.RegisterProgram("threaded-group", func(args []string) { os.Exit(threadedGroupProgram(args)) })
}

// On cgroup v2 a command joins the commands' group as on v1, in threaded
// groups, from a helper under its own seccomp filter (which answers
// clone3 with ENOSYS): the command's single-threaded child writes itself
// into cmd's cgroup.threads before execve, and the forking thread never
// leaves hutch's group. This host's pids controller may be on v1; its
// cgroup2 mount (/sys/fs/cgroup/unified on a hybrid host) has threaded
// groups all the same. The child starts /bin/cat /proc/self/cgroup
// through ForkCommand, unconfined (the control) and confined.
// Origin: review 8.
func TestCommandJoinsThreadedGroupUnderSeccomp(t *testing.T) {
	if os.Getuid() != 0 {
		testenv.Missing(t, "needs root (CI runs as root on a host with a cgroup2 mount)")
	}
	root := "/sys/fs/cgroup/unified"
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		root = "/sys/fs/cgroup" // a pure v2 host
		if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
			testenv.Missing(t, "no cgroup2 mount (CI runs as root on a host with one)")
		}
	}
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	dir := filepath.Join(root, "hutch-test-"+hex.EncodeToString(id))
	if err := os.Mkdir(dir, 0o755); err != nil {
		testenv.Missing(t, "cannot make a v2 group (CI runs as root on a host with a cgroup2 mount): %v", err)
	}
	defer os.Remove(dir)
	for _, sub := range []string{"cmd", "hutch"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(filepath.Join(dir, sub))
		if err := os.WriteFile(filepath.Join(dir, sub, "cgroup.type"), []byte("threaded"), 0); err != nil {
			t.Fatal(err)
		}
	}
	argv := testenv.ProgramArgv(dir)
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = append(os.Environ(), testenv.ProgramEnv("threaded-group"))
	// The thread file at CmdGroupFD from the start, as a session's
	// helpers get it (the runtime's own descriptors come after).
	f, err := os.OpenFile(filepath.Join(dir, "cmd", "cgroup.threads"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c.ExtraFiles = boundary.PlaceGroupFiles(nil, f, nil) // no count: the job has no process limit
	out, err := c.CombinedOutput()
	text := string(out)
	if !strings.Contains(text, "control ok") {
		t.Fatalf("control failed, the test cannot tell (err %v):\n%s", err, text)
	}
	if err != nil || !strings.Contains(text, "confined ok") {
		t.Fatalf("a command does not start in its v2 group from a confined helper (err %v):\n%s", err, text)
	}
}

// threadedGroupProgram is the child of
// TestCommandJoinsThreadedGroupUnderSeccomp, a program of this test
// binary: it joins args[0]'s hutch group and starts a command into its
// cmd group, unconfined and then confined.
func threadedGroupProgram(args []string) int {
	dir := args[0]
	if err := os.WriteFile(filepath.Join(dir, "hutch", "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		fmt.Println("joining hutch:", err)
		return 1
	}
	runtime.LockOSThread()
	base := "0::/" + filepath.Base(dir)
	job := wire.Job{Argv: []string{"cat", "/proc/self/cgroup"}, Dir: "/", Env: []string{}, CmdGroup: true}
	try := func(name string) bool {
		r, w, err := os.Pipe()
		if err != nil {
			fmt.Println(err)
			return false
		}
		devnull, _ := os.Open(os.DevNull)
		var errBuf bytes.Buffer
		er, ew, _ := os.Pipe()
		pid, st, ok := ForkCommand(job, "/bin/cat", false, devnull, w, ew)
		w.Close()
		ew.Close()
		devnull.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(r)
		_, _ = errBuf.ReadFrom(er)
		if !ok {
			fmt.Printf("%s: not started: %+v %s\n", name, st, errBuf.String())
			return false
		}
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
		if unified(buf.String()) != base+"/cmd" {
			fmt.Printf("%s: the command started in %q, not %s/cmd\n", name, buf.String(), base)
			return false
		}
		self, _ := os.ReadFile("/proc/thread-self/cgroup")
		if unified(string(self)) != base+"/hutch" {
			fmt.Printf("%s: the forking thread is in %q\n", name, self)
			return false
		}
		fmt.Printf("%s ok\n", name)
		return true
	}
	if !try("control") {
		return 1
	}
	b := newBuilder()
	b.call("no_new_privs", unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	if err := b.seccomp(); err != nil {
		fmt.Println("seccomp:", err)
		return 1
	}
	prog, err := b.build()
	if err != nil {
		fmt.Println("build:", err)
		return 1
	}
	if err := prog.exec(); err != nil {
		fmt.Println("exec:", err)
		return 1
	}
	if !try("confined") {
		return 1
	}
	return 0
}

// unified is the cgroup2 line ("0::/path") of a /proc/PID/cgroup.
func unified(cgroups string) string {
	for _, line := range strings.Split(cgroups, "\n") {
		if strings.HasPrefix(line, "0::") {
			return line
		}
	}
	return ""
}
