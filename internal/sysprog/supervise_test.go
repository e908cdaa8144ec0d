package sysprog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/policy"
)

// seedAll makes every default protected path in dir.
func seedAll(t *testing.T, dir string) {
	t.Helper()
	for _, e := range policy.DefaultProtected {
		p := filepath.Join(dir, e)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if strings.Contains(e, "hooks") || !strings.Contains(e[1:], ".") && e != ".bashrc" && !strings.HasPrefix(e, ".z") && !strings.HasPrefix(e, ".bash") && e != ".profile" && e != ".gitconfig" && e != ".ripgreprc" && e != ".gitmodules" {
			err = os.Mkdir(p, 0o755)
		} else {
			err = os.WriteFile(p, []byte("seed"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Commands need the supervisor exactly when a protected path is not
// there, as itself, at a writable path's top or the start directory's.
func TestNeedsSupervision(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string) policy.Policy
		want  bool
	}{
		{"nothing writable", func(t *testing.T, dir string) policy.Policy { return policy.Policy{Read: []string{dir}} }, false},
		{"all there", func(t *testing.T, dir string) policy.Policy {
			seedAll(t, dir)
			return policy.Policy{Write: []string{dir}}
		}, false},
		{"none there", func(t *testing.T, dir string) policy.Policy { return policy.Policy{Write: []string{dir}} }, true},
		{"one missing", func(t *testing.T, dir string) policy.Policy {
			seedAll(t, dir)
			os.Remove(filepath.Join(dir, ".zshrc"))
			return policy.Policy{Write: []string{dir}}
		}, true},
		{"one a symbolic link", func(t *testing.T, dir string) policy.Policy {
			seedAll(t, dir)
			os.Remove(filepath.Join(dir, ".zshrc"))
			os.Symlink("other", filepath.Join(dir, ".zshrc"))
			return policy.Policy{Write: []string{dir}}
		}, true},
		{"behind a symbolic link", func(t *testing.T, dir string) policy.Policy {
			seedAll(t, dir)
			os.RemoveAll(filepath.Join(dir, ".git"))
			os.MkdirAll(filepath.Join(dir, "g", "hooks"), 0o755)
			os.WriteFile(filepath.Join(dir, "g", "config"), nil, 0o644)
			os.WriteFile(filepath.Join(dir, "g", "commondir"), nil, 0o644)
			os.Symlink("g", filepath.Join(dir, ".git"))
			return policy.Policy{Write: []string{dir}}
		}, true},
		{"the missing one unprotected", func(t *testing.T, dir string) policy.Policy {
			seedAll(t, dir)
			os.RemoveAll(filepath.Join(dir, ".idea"))
			return policy.Policy{Write: []string{dir}, Unprotect: []string{".idea"}}
		}, false},
		{"missing in the start directory", func(t *testing.T, dir string) policy.Policy {
			seedAll(t, dir)
			os.Mkdir(filepath.Join(dir, "sub"), 0o755)
			return policy.Policy{Write: []string{dir}, Dir: filepath.Join(dir, "sub")}
		}, true},
		{"a writable path that is missing", func(t *testing.T, dir string) policy.Policy {
			return policy.Policy{Write: []string{filepath.Join(dir, "gone")}}
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.setup(t, t.TempDir())
			if got := NeedsSupervision(p); got != c.want {
				t.Errorf("NeedsSupervision = %v, want %v", got, c.want)
			}
		})
	}
}
