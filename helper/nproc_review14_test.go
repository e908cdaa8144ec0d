package helper

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
)

// Review 14 found that spawn (64f9c92) blames the policy's process limit
// for every EAGAIN from the fork whenever the policy has a process limit
// and no pids cgroup bounds it: "the policy's N processes are taken ...
// (M now)", even when M is far below N and the fork was refused by
// something else — a pids cgroup hutch runs in (a container's
// pids-limit, systemd's TasksMax), the user's RLIMIT_NPROC counted in
// the host's user namespace, kernel.threads-max. By hand, as nobody in a
// v1 pids cgroup with pids.max 28: `hutch run --network allow=example.com
// --pids 64 -- sh -c 'echo ran'` said "the policy's 64 processes are
// taken: ... (20 now)". Fix: say so only when the sandbox's task count
// has reached the limit (sandboxTasks() >= Processes); otherwise name
// EAGAIN as a refusal from outside the policy (the system's or a
// cgroup's process limit), with the count.
//
// The test runs spawn in a child process held by a pids cgroup with no
// room left, under a policy limit far above every task there is.
func TestReview14NprocMessageOnlyWhenTheLimitIsReached(t *testing.T) {
	const childEnv = "HUTCH_REVIEW14_PIDS_CGROUP"
	if dir := os.Getenv(childEnv); dir != "" {
		review14FullCgroupChild(t, dir)
		return
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "needs root, to put a child process in a pids cgroup")
	}
	dir := review14PidsCgroup(t)
	c := exec.Command(os.Args[0], "-test.run=^TestReview14NprocMessageOnlyWhenTheLimitIsReached$", "-test.v", "-test.count=1")
	c.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Errorf("in a full pids cgroup: %v\n%s", err, out)
	}
}

// review14PidsCgroup makes a pids cgroup under this process's own (v2
// when its pids controller is enabled there, else v1), removed at the end.
func review14PidsCgroup(t *testing.T) string {
	name := "hutch-review14-" + strconv.Itoa(os.Getpid())
	var candidates []string
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers")); err == nil && strings.Contains(string(b), "pids") {
			candidates = append(candidates, filepath.Join(root, review14Own(""), name))
		}
	}
	candidates = append(candidates, filepath.Join("/sys/fs/cgroup/pids", review14Own("pids"), name))
	for _, dir := range candidates {
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "pids.max")); err != nil {
			_ = os.Remove(dir)
			continue
		}
		t.Cleanup(func() { _ = os.Remove(dir) })
		return dir
	}
	testenv.Missing(t, "no pids cgroup this test may create (tried %v)", candidates)
	return ""
}

func review14Own(controller string) string {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (controller == "" && parts[0] == "0" && parts[1] == "" ||
			controller != "" && strings.Contains(","+parts[1]+",", ","+controller+",")) {
			return filepath.Clean("/" + parts[2])
		}
	}
	return "/"
}

func review14FullCgroupChild(t *testing.T, dir string) {
	// Threads for the runtime to reuse once the cgroup is full: it keeps
	// an M that a locked goroutine let go of.
	var wg, locked sync.WaitGroup
	release := make(chan struct{})
	for range 8 {
		wg.Add(1)
		locked.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			locked.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	close(release)
	wg.Wait()
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
	job := Job{Argv: []string{"sh", "-c", "true"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/",
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
