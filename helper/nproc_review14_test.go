package helper

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

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
	dir := newPidsGroup(t, 1<<22).dir // no limit yet: the child sets it
	c := exec.Command(os.Args[0], "-test.run=^TestReview14NprocMessageOnlyWhenTheLimitIsReached$", "-test.v", "-test.count=1")
	c.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Errorf("in a full pids cgroup: %v\n%s", err, out)
	}
}

func review14FullCgroupChild(t *testing.T, dir string) {
	// Threads for the runtime to reuse once the cgroup is full.
	reserveThreads(8)
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
