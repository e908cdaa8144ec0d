package isolated_test

import (
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/policy"
)

// TestReview4NoHostCgroupPathAnywhere (an attack that holds, one-shot and
// with HUTCH_TEST_VIA_SESSION=1): beyond /proc/self/cgroup, no process the
// sandbox can see (the session's init, which has no cgroup namespace of
// its own, and its runner among them) shows a host cgroup path in
// /proc/PID/cgroup or /proc/PID/cpuset (hutch's own subgroup for
// commands, /cmd or /../cmd, is no host path; see TestHostCgroupPathsHidden), no cgroup file system is mounted,
// and a new cgroup namespace (which would be rooted where the command is,
// showing nothing more, but is a namespace all the same) is refused.
func TestReview4NoHostCgroupPathAnywhere(t *testing.T) {
	e := newEnv(t)
	for name, pol := range map[string]policy.Policy{
		"no limits":       e.pol,
		"memory and pids": e.pol.Extend(policy.Policy{Limits: policy.Limits{Memory: 256 << 20, Processes: 64}}),
	} {
		t.Run(name, func(t *testing.T) {
			r := e.runWith(t, pol, sh(`sleep 5 & n=0
for p in /proc/[0-9]*; do
  n=$((n+1))
  while IFS= read -r line; do case "$line" in *:/|*:/cmd|*:/../cmd) ;; *) echo "LEAK $p cgroup $line";; esac; done < $p/cgroup
  c=$(cat $p/cpuset 2>/dev/null) && [ "$c" != / ] && echo "LEAK $p cpuset $c"
done
echo "processes $n"
grep -E ' - cgroup2? ' /proc/self/mountinfo /proc/1/mountinfo 2>/dev/null | sed 's/^/LEAK mount /'
ls -d /sys/fs/cgroup 2>/dev/null | sed 's/^/LEAK /'
unshare -C true 2>/dev/null && echo "LEAK unshare -C allowed"
kill $!; echo end`))
			out := string(r.Stdout)
			if r.ExitCode != 0 || !strings.Contains(out, "end") || strings.Contains(out, "processes 0") {
				t.Fatalf("exit %d: %s %s", r.ExitCode, out, r.Stderr)
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "LEAK") {
					t.Error(line)
				}
			}
		})
	}
}
