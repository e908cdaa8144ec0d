package isolated_test

import (
	"context"
	"os"
	"os/exec"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/sandboxtest"
)

// protectedSession is a session writing dir (its start directory) under
// the default policy, its protected paths included.
func protectedSession(t *testing.T, dir string) sandbox.Sandbox {
	t.Helper()
	e := newEnv(t)
	pol := e.pol.Extend(policy.Policy{Write: []string{dir}, Read: []string{"/usr", "/bin"}})
	pol.Dir = dir
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	sb, err := isolated.New(ctx, isolated.Options{Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// Protected paths stay read-only in a writable root: the file tools
// refuse every one, existing or not; a command cannot write, create,
// rename or remove one, whether it existed when the sandbox started (the
// read-only mounts) or not (the supervisor), by redirection, cp, mv, ln
// (soft or hard), mkdir, touch, chmod or rm, nor through a link.
func TestProtectedPathsStayReadOnly(t *testing.T) {
	sandboxtest.RunProtectedAll(t, protectedSession, "")
}

// git init, add and commit work in a writable root without a repository,
// and git add and commit in one with its hooks and config protected.
func TestGitCommitWorksInAWritableRoot(t *testing.T) {
	git := "/usr/bin/git"
	if _, err := os.Stat(git); err != nil {
		testenv.Missing(t, "git (scripts/test.sh installs it)")
	}
	for _, existing := range []bool{false, true} {
		dir := t.TempDir()
		if existing {
			if out, err := exec.Command(git, "init", "-q", dir).CombinedOutput(); err != nil {
				t.Fatalf("git init on the host: %v %s", err, out)
			}
		}
		sb := protectedSession(t, dir)
		script := `set -e
export HOME=/tmp GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b
[ -d .git ] || git init -q
echo hello > a.txt
git add a.txt
git commit -q -m first
echo more >> a.txt
git commit -q -am second
git log --oneline | wc -l`
		ctx, cancel := context.WithTimeout(bg, 60*time.Second)
		res, err := sb.Exec(ctx, sandbox.Command{Shell: script, Timeout: 50 * time.Second})
		cancel()
		if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "2" {
			t.Errorf("git in a writable root (repository before: %v): exit %d, %v\n%s%s", existing, res.ExitCode, err, res.Stdout, res.Stderr)
		}
		if existing {
			res, _ := sb.Exec(bg, sandbox.Command{Shell: "git config core.fsmonitor 'touch /tmp/x' 2>&1 || echo refused; echo x > .git/hooks/pre-commit 2>&1 || echo refused", Timeout: 20 * time.Second})
			if strings.Count(string(res.Stdout), "refused") != 2 {
				t.Errorf("planting a hook or core.fsmonitor in an existing repository: %s", res.Stdout)
			}
		}
		_ = sb.Close()
	}
}

// BenchmarkProtectedStart is what protection costs a one-shot command
// in a writable root holding every default protected path (a read-only
// copy and the pins each), against the same with none, and a loop of
// 2000 file creations (a build's hot path) in each.
func BenchmarkProtectedStart(b *testing.B) {
	if err := isolated.Supported(); err != nil {
		b.Skip(err)
	}
	dir := b.TempDir()
	for _, e := range policy.DefaultProtected {
		p := dir + "/" + e
		if strings.Contains(e, ".") && !strings.HasSuffix(e, "hooks") && e != ".vscode" && e != ".idea" && e != ".claude" && e != ".codex" && e != ".gemini" {
			_ = os.MkdirAll(path.Dir(p), 0o755)
			_ = os.WriteFile(p, []byte("seed"), 0o644)
		} else {
			_ = os.MkdirAll(p, 0o755)
		}
	}
	for _, c := range []struct {
		name      string
		unprotect []string
		shell     string
	}{
		{"protected/true", nil, "true"},
		{"unprotected/true", policy.DefaultProtected, "true"},
		{"protected/2000 creates", nil, "mkdir -p out && i=0; while [ $i -lt 2000 ]; do : > out/f$i; i=$((i+1)); done; rm -r out"},
		{"unprotected/2000 creates", policy.DefaultProtected, "mkdir -p out && i=0; while [ $i -lt 2000 ]; do : > out/f$i; i=$((i+1)); done; rm -r out"},
	} {
		b.Run(c.name, func(b *testing.B) {
			pol := policy.Default().Extend(policy.Policy{Write: []string{dir}, Unprotect: c.unprotect})
			for b.Loop() {
				res, err := isolated.Run(bg, pol, sandbox.Command{Shell: c.shell, Timeout: 20 * time.Second})
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("%v %d %s", err, res.ExitCode, res.Stderr)
				}
			}
		})
	}
}
