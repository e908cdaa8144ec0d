//go:build linux

package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/policy"
)

// Only configs written as git init writes them, with its settings alone,
// are checked in.
func TestSafeGitConfig(t *testing.T) {
	cases := []struct {
		in   string
		want bool
	}{
		{"", true},
		{"[core]\n\trepositoryformatversion = 0\n", true},
		{"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n", true},
		{"[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha256\n", true},
		{"[core]\n\trepositoryformatversion = 0", false},                       // no final newline
		{"[core]\n\tfsmonitor = touch /tmp/x\n", false},                        // runs a program
		{"[core]\n\tfsmonitor = x\n", false},                                   // key not allowed
		{"[core]\n\thookspath = /tmp\n", false},                                // idem
		{"[core]\n\tfileMode = true\n", false},                                 // only git's own spelling
		{"[include]\n\tpath = ../evil\n", false},                               // includes
		{"[includeIf \"gitdir:/\"]\n\tpath = x\n", false},                      // idem
		{"[core \"\"]\n\tbare = false\n", false},                               // subsection
		{"[core]\n\tbare = false ; fsmonitor = x\n", false},                    // comment syntax in a value
		{"[core]\n\tbare = \"false\"\n", false},                                // quoting
		{"[core]\n\tbare = fal\\\nse\n", false},                                // continuation
		{"[core]\n\tbare=false\n", false},                                      // other spacing
		{"[core]\n  bare = false\n", false},                                    // idem
		{"\tbare = false\n", false},                                            // no section
		{"[core]\n\n\tbare = false\n", false},                                  // blank line
		{"[core]\n# comment\n\tbare = false\n", false},                         // comment
		{"[core]\n\tbare = false\n[core]\n\tsshcommand = evil\n", false},       // later section
		{"[extensions]\n\tworktreeconfig = true\n", false},                     // reads config.worktree
		{"[core]\n\trepositoryformatversion = 0\n[user]\n\tname = a\n", false}, // not git init's
	}
	for _, c := range cases {
		if got := safeGitConfig([]byte(c.in)); got != c.want {
			t.Errorf("safeGitConfig(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// testSupervisor is a supervisor of root with the default protected
// paths, its .git made by it when fresh.
func testSupervisor(t *testing.T, fresh bool) (*supervisor, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	rootFD, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(rootFD) })
	s := &supervisor{roots: []string{dir, dir + "/sub"}, entries: policy.Policy{}.Protected(), root: rootFD, fresh: map[fileID]bool{}, sealed: map[fileID]string{}}
	if fresh {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, ".git"), &st); err != nil {
			t.Fatal(err)
		}
		s.fresh[idOf(&st)] = true
	}
	return s, dir
}

// What each intent may do where: nothing at or below a protected path,
// only a new directory on the way to one, git init's own in a .git the
// supervisor made.
func TestSupervisorAllowed(t *testing.T) {
	cases := []struct {
		path   string
		intent int
		fresh  bool
		vet    bool
		err    error
	}{
		{"/a.txt", intentOpenCreate, false, false, nil},
		{"/src/.bashrc", intentOpenCreate, false, false, nil}, // deeper than the roots' tops
		{"/.bashrc", intentOpenCreate, false, false, errProtected},
		{"/.bashrc", intentWrite, false, false, errProtected},
		{"/.bashrc", intentMkdir, false, false, errProtected},
		{"/.bashrc", intentCreate, false, false, errProtected},
		{"/.vscode", intentMkdir, false, false, errProtected},
		{"/.vscode/tasks.json", intentOpenCreate, false, false, errProtected},
		{"/.vscode/a/b", intentMkdir, false, false, errProtected},
		{"/sub/.zshrc", intentRename, false, false, errProtected}, // the start directory's top
		{"/sub", intentMkdir, false, false, nil},                  // a root that is not a mount: a new directory only
		{"/sub", intentRename, false, false, errProtected},
		{"/sub", intentCreate, false, false, errProtected},
		{"/.git", intentMkdir, false, false, nil},
		{"/.git", intentRename, false, false, errProtected},
		{"/.git", intentCreate, false, false, errProtected}, // a gitfile or a link
		{"/.git", intentOpenCreate, false, false, errProtected},
		{"/.git", intentWrite, false, false, errProtected},
		{"/.git/objects/x", intentOpenCreate, false, false, nil},
		{"/.git/hooks", intentMkdir, false, false, errProtected},
		{"/.git/hooks", intentMkdir, true, false, nil},
		{"/.git/hooks/pre-commit.sample", intentOpenCreate, true, false, nil},
		{"/.git/hooks/pre-commit.sample", intentOpenCreate, false, false, errProtected},
		{"/.git/hooks/pre-commit.sample", intentCreate, true, false, errProtected}, // a link or rename
		{"/.git/hooks/pre-commit", intentOpenCreate, true, false, errProtected},
		{"/.git/hooks/x/y.sample", intentOpenCreate, true, false, errProtected},
		{"/.git/config", intentRename, true, true, nil},
		{"/.git/config", intentRename, false, false, errProtected},
		{"/.git/config", intentOpenCreate, true, false, errProtected},
		{"/.git/config", intentWrite, true, false, errProtected},
		{"/.git/commondir", intentRename, true, false, errProtected},
	}
	for _, c := range cases {
		s, dir := testSupervisor(t, c.fresh)
		vet, err := s.allowed(dir+c.path, c.intent, false)
		if vet != c.vet || err != c.err {
			t.Errorf("%s, intent %d, fresh %v: vet %v, %v; want %v, %v", c.path, c.intent, c.fresh, vet, err, c.vet, c.err)
		}
	}
}

// A config the supervisor sealed stays sealed while it is where the
// supervisor wrote it (by that name or a hard link), and is forgotten
// once it is not: git replaced it, or the command removed it. Its inode
// may then be another file's (a file made later, as in a git run that
// rewrote its config: the file could then not be appended to).
func TestSealedConfigIsForgottenOnceGone(t *testing.T) {
	s, dir := testSupervisor(t, true)
	config, link := filepath.Join(dir, ".git", "config"), filepath.Join(dir, "cfg2")
	stat := func(p string) *unix.Stat_t {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return &st
	}
	write := func(p string) {
		t.Helper()
		if err := os.WriteFile(p, []byte("[core]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(config)
	if err := os.Link(config, link); err != nil {
		t.Fatal(err)
	}
	sealed := stat(config)
	s.sealed[idOf(sealed)] = strings.TrimPrefix(config, "/")
	if !s.isSealed(sealed) || !s.isSealed(stat(link)) {
		t.Fatal("the sealed config, by its name or a hard link, is not sealed")
	}
	// git replaces the config: the old file lives on as cfg2 alone.
	write(config + ".new")
	if err := os.Rename(config+".new", config); err != nil {
		t.Fatal(err)
	}
	if s.isSealed(stat(link)) {
		t.Error("a file that is no longer the config stays sealed")
	}
	if _, ok := s.sealed[idOf(sealed)]; ok {
		t.Error("the replaced config is not forgotten")
	}
	// Where the supervisor could not tell the place, the file stays
	// sealed wherever it is.
	other := stat(link)
	s.sealed[idOf(other)] = ""
	if !s.isSealed(other) {
		t.Error("a config sealed without its place is not sealed")
	}
}
