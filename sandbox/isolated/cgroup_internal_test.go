package isolated

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
)

// sweepGroups removes exactly the groups of groupName's form whose
// creator (in this PID namespace) is gone, and only while they are empty;
// a plain directory stands for the cgroup parent here.
func TestSweepRemovesOnlyTheEmptyGroupsOfGoneCreators(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	self := selfOwner()
	if self.ns == 0 || self.start == 0 {
		t.Skip("this process's PID namespace or start time cannot be read")
	}
	name := func(o groupOwner) string { return fmt.Sprintf("hutch-%d-%d-%d-0123456789ab", o.ns, o.pid, o.start) }
	gone := name(groupOwner{self.ns, uint64(dead.Process.Pid), 12345})
	reused := name(groupOwner{self.ns, self.pid, self.start + 1}) // this PID, another process's start
	busy := name(groupOwner{self.ns, uint64(dead.Process.Pid), 777})
	keep := []string{
		groupName(), // this process's own
		name(groupOwner{self.ns + 1, uint64(dead.Process.Pid), 12345}), // another PID namespace
		"hutch-0123456789ab", // an older hutch's: no creator named
		gone + "0",           // not the exact form
		"other-" + gone[len("hutch-"):],
		busy, // holds something (for a group: a process)
	}
	parent := t.TempDir()
	for _, n := range append([]string{gone, reused}, keep...) {
		if err := os.MkdirAll(filepath.Join(parent, n, cmdGroup), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(parent, busy, "cgroup.procs"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sweepGroups(parent)
	for _, n := range []string{gone, reused} {
		if _, err := os.Stat(filepath.Join(parent, n)); err == nil {
			t.Errorf("%s (creator gone) was not removed", n)
		}
	}
	for _, n := range keep {
		if _, err := os.Stat(filepath.Join(parent, n)); err != nil {
			t.Errorf("%s was removed: %v", n, err)
		}
	}
}

// removeDir waits for a busy directory as long as its patience lasts,
// and returns as soon as the directory is gone: a cgroup whose last
// process is still exiting is removed a moment later, not after a fixed
// pause.
func TestRemoveDirWaitsOnlyWhileBusy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "group")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	busy := filepath.Join(dir, "member") // a non-empty directory: busy
	if err := os.WriteFile(busy, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		os.Remove(busy)
	}()
	removeDir(dir, 5*time.Second)
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the directory is still there once it emptied: %v", err)
	}
	// Patience spent: it gives up, leaving the directory.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(busy, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	removeDir(dir, 20*time.Millisecond)
	if _, err := os.Stat(busy); err != nil {
		t.Fatalf("a directory that stays busy was emptied: %v", err)
	}
}

// A session's init is born in the sandbox's groups (on v1 the thread
// that forks it visits them, with no move by pid to wait for), and the
// thread goes back: no thread of this process stays in them.
func TestStartInsideBearsTheInitInItsGroups(t *testing.T) {
	if os.Getuid() != 0 {
		testenv.Missing(t, "making control groups needs root")
	}
	cg, err := newCgroup(policy.Limits{Processes: 64, Memory: 256 << 20})
	if cg == nil {
		testenv.Missing(t, "no memory or pids cgroup controller here: %v", err)
	}
	defer cg.remove()
	var child *exec.Cmd
	inside, err := cg.startInside(func() error {
		child = exec.Command("sleep", "30")
		return child.Start()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	if !cg.v2 && !inside {
		t.Error("on cgroup v1 the child was not born inside the groups")
	}
	if !inside {
		if err := cg.add(child.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	groups := func(pid, tid int) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/cgroup", pid, tid))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	in := groups(child.Process.Pid, child.Process.Pid)
	for ctrl, dir := range cg.dirs {
		rel := strings.TrimPrefix(dir, filepath.Join(cgroupRoot, ctrl))
		if cg.v2 {
			rel = strings.TrimPrefix(filepath.Join(dir, hutchGroup), cgroupRoot)
		}
		if !strings.Contains(in, ":"+rel+"\n") {
			t.Errorf("the child is not in %s: %s", rel, in)
		}
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var name string // every controller's group has the same name
	for _, dir := range cg.dirs {
		name = filepath.Base(dir)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		if g := groups(os.Getpid(), tid); strings.Contains(g, name) {
			t.Errorf("thread %d of this process stayed in the sandbox's groups: %s", tid, g)
		}
	}
}

// startInsideFromMain is TestStartInsideNeverVisitsFromTheMainThread's
// program: it calls startInside from the main goroutine on the main
// thread, not locked there (as a program calling New from main does:
// while it waits, the main thread is free to run the visit), and prints
// which thread visited the groups.
const startInsideFromMain = "start-inside-from-main"

func init() {
	testenv.RegisterProgram(startInsideFromMain, func([]string) {
		caller := unix.Gettid()
		if caller != unix.Getpid() {
			fmt.Println("not on the main thread")
			os.Exit(3)
		}
		cg, err := newCgroup(policy.Limits{Processes: 64, Memory: 256 << 20})
		if cg == nil {
			fmt.Println("no cgroup:", err)
			os.Exit(4)
		}
		defer cg.remove()
		visitor := 0
		visitedBy = func(tid int) { visitor = tid }
		var child *exec.Cmd
		inside, err := cg.startInside(func() error {
			child = exec.Command("sleep", "30")
			return child.Start()
		})
		if err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		_ = child.Process.Kill()
		_ = child.Wait()
		fmt.Printf("v2=%v inside=%v main=%d visitor=%d caller=%d\n", cg.v2, inside, unix.Getpid(), visitor, caller)
	})
}

// On cgroup v1 the memory controller charges a process's memory to the
// group of its main thread: called from the main thread, startInside
// still visits the sandbox's groups from another thread.
func TestStartInsideNeverVisitsFromTheMainThread(t *testing.T) {
	if os.Getuid() != 0 {
		testenv.Missing(t, "making control groups needs root")
	}
	argv := testenv.ProgramArgv()
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = append(os.Environ(), testenv.ProgramEnv(startInsideFromMain))
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var v2, inside bool
	var main, visitor, caller int
	if _, err := fmt.Sscanf(string(out), "v2=%t inside=%t main=%d visitor=%d caller=%d", &v2, &inside, &main, &visitor, &caller); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if caller != main {
		t.Fatalf("the program did not call from the main thread: %s", out)
	}
	if !v2 && !inside {
		t.Errorf("on cgroup v1 the child was not born inside the groups: %s", out)
	}
	if inside && (visitor == 0 || visitor == main) {
		t.Errorf("the main thread visited the sandbox's groups: %s", out)
	}
}

// cgroupIn finds a controller's group in a /proc cgroup listing (also
// in a hierarchy of several controllers), the unified one for "", and
// says when there is none.
func TestCgroupInReadsTheListing(t *testing.T) {
	listing := []byte("9:name=systemd:/\n8:pids:/user/a\n2:cpu,cpuacct:/c/../d\n4:memory:/process_api/x\n0::/unified/u\n")
	for _, c := range []struct {
		controller, want string
		ok               bool
	}{
		{"memory", "/process_api/x", true},
		{"pids", "/user/a", true},
		{"cpuacct", "/d", true},
		{"", "/unified/u", true},
		{"blkio", "/", false},
		{"cpuac", "/", false},
	} {
		if got, ok := cgroupIn(listing, c.controller); got != c.want || ok != c.ok {
			t.Errorf("%q: %q %v, want %q %v", c.controller, got, ok, c.want, c.ok)
		}
	}
	if got, ok := cgroupIn([]byte("4:memory:/m\n"), ""); got != "/" || ok {
		t.Errorf("no unified line: %q %v", got, ok)
	}
}
