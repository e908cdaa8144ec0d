package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// ProtectedFactory returns a fresh sandbox whose root and start directory
// is the host directory dir, writable, with the default protected paths
// (policy.DefaultProtected). RunProtected closes it.
type ProtectedFactory func(t *testing.T, dir string) sandbox.Sandbox

// protectedDirs are the default entries that are directories.
var protectedDirs = map[string]bool{".git/hooks": true, ".vscode": true, ".idea": true, ".claude": true, ".codex": true, ".gemini": true}

// seedProtected makes every default protected path in dir (a directory
// holding a file "keep", or a file holding "seed"), a file "other", and
// a link "ln-N" to each protected path; with existing false only .git
// (holding HEAD) and the links, dangling.
func seedProtected(t *testing.T, dir string, existing bool) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, ".git"), 0o755))
	must(os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "other"), []byte("other"), 0o644))
	for i, e := range policy.DefaultProtected {
		must(os.Symlink(e, filepath.Join(dir, fmt.Sprintf("ln-%d", i))))
	}
	if existing {
		MakeProtected(t, dir)
	}
}

// MakeProtected makes every default protected path in dir: a directory
// holding a file "keep", or a file holding "seed".
func MakeProtected(t *testing.T, dir string) {
	t.Helper()
	for _, e := range policy.DefaultProtected {
		p := filepath.Join(dir, e)
		var err error
		if protectedDirs[e] {
			if err = os.MkdirAll(p, 0o755); err == nil {
				err = os.WriteFile(filepath.Join(p, "keep"), []byte("seed"), 0o755)
			}
		} else if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			err = os.WriteFile(p, []byte("seed"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkProtected fails unless every protected path in dir is as
// seedProtected left it.
func checkProtected(t *testing.T, dir string, existing bool, after string) {
	t.Helper()
	for _, e := range policy.DefaultProtected {
		p := filepath.Join(dir, e)
		fi, err := os.Lstat(p)
		switch {
		case !existing:
			if err == nil {
				t.Errorf("after %s: %s was made (%v)", after, e, fi.Mode())
				_ = os.RemoveAll(p) // the next case starts clean
			}
		case err != nil:
			t.Errorf("after %s: %s is gone: %v", after, e, err)
		case protectedDirs[e]:
			ents, _ := os.ReadDir(p)
			data, _ := os.ReadFile(filepath.Join(p, "keep"))
			if !fi.IsDir() || len(ents) != 1 || string(data) != "seed" {
				t.Errorf("after %s: %s changed (%v, %d entries, keep %q)", after, e, fi.Mode(), len(ents), data)
			}
		default:
			data, _ := os.ReadFile(p)
			if !fi.Mode().IsRegular() || string(data) != "seed" || fi.Mode().Perm() != 0o644 {
				t.Errorf("after %s: %s changed (%v, %q)", after, e, fi.Mode(), data)
			}
		}
	}
}

// RunProtected proves that the file operations (what write_file,
// edit_file, apply_patch, move, delete and mkdir do) cannot write,
// create, rename or remove a protected path in a writable root, whether
// it existed when the sandbox started or not, directly or through a
// symbolic link, and that each refusal matches sandbox.ErrProtected.
func RunProtected(t *testing.T, newSB ProtectedFactory) {
	for _, existing := range []bool{true, false} {
		t.Run(map[bool]string{true: "existing", false: "missing"}[existing], func(t *testing.T) {
			dir := t.TempDir()
			seedProtected(t, dir, existing)
			sb := newSB(t, dir)
			t.Cleanup(func() { _ = sb.Close() })
			ctx := context.Background()
			for i, e := range policy.DefaultProtected {
				target, link := e, fmt.Sprintf("ln-%d", i)
				if protectedDirs[e] {
					target, link = e+"/x", link+"/x"
				}
				ops := map[string]func() error{
					"write":                 func() error { return sb.Write(ctx, target, []byte("planted")) },
					"write through a link":  func() error { return sb.Write(ctx, link, []byte("planted")) },
					"mkdir":                 func() error { return sb.Mkdir(ctx, e+"/sub") },
					"move a file onto it":   func() error { return sb.Rename(ctx, "other", target) },
					"move it away":          func() error { return sb.Rename(ctx, e, "moved") },
					"delete it":             func() error { return sb.Remove(ctx, e, true) },
					"delete what holds it":  func() error { return sb.Remove(ctx, strings.Split(e, "/")[0], true) },
					"move what holds it":    func() error { return sb.Rename(ctx, strings.Split(e, "/")[0], "held") },
					"mkdir through a link":  func() error { return sb.Mkdir(ctx, link+"/sub") },
					"write below it as dir": func() error { return sb.Write(ctx, e+"/y/z", []byte("planted")) },
					// A file named as what holds it: a .git file (a gitfile)
					// points git at a config and hooks of the agent's.
					"write a file as what holds it, deeper": func() error {
						return sb.Write(ctx, "deep/"+strings.Split(e, "/")[0], []byte("gitdir: elsewhere"))
					},
				}
				for name, op := range ops {
					err := op()
					if !existing && (name == "move it away" || name == "delete it") && errors.Is(err, sandbox.ErrNotFound) {
						continue // nothing there to move or delete
					}
					if !errors.Is(err, sandbox.ErrProtected) {
						t.Errorf("%s %s: %v, want sandbox.ErrProtected", name, e, err)
					} else if !strings.Contains(err.Error(), "--unprotect") {
						t.Errorf("%s %s: %v does not say how to lift the protection", name, e, err)
					}
					checkProtected(t, dir, existing, name+" "+e)
				}
			}
			// What is not protected stays writable.
			for _, p := range []string{"src/main.go", ".git/HEAD", ".git/refs/heads/main", ".github/workflows/ci.yml", "sub/.gitignore"} {
				if err := sb.Write(ctx, p, []byte("ok")); err != nil {
					t.Errorf("write %s: %v", p, err)
				}
			}
		})
	}
}

// protectedCommands are the shell commands RunProtectedCommands tries on
// each protected path P (F: P itself for a file, P/x for a directory; L:
// the link ln-N to P, made on the host, likewise extended).
var protectedCommands = []string{
	"echo planted > F", "echo planted >> F", "printf planted | tee F", "cp other F", "mv -f other F",
	"ln -sf /bin/sh F", "ln -f other F", "mkdir -p P/sub", "touch P/new",
	"echo planted > L", "mkdir -p L/sub",
	"chmod 777 F", "chmod 777 P", "ln P hard && echo planted >> hard",
	"mv P moved", "rm -f F", "rm -rf P", "rm -rf DIR",
}

// RunProtectedCommands proves that a command cannot write, create,
// rename or remove a protected path in a writable root by any of
// protectedCommands (with existing, for paths that existed when the
// sandbox started; else for paths that did not). A sandbox whose
// commands cannot be kept from making a path that did not exist says so
// with missingGap (the case is then skipped naming it); "" runs it.
func RunProtectedCommands(t *testing.T, newSB ProtectedFactory, existing bool, missingGap string) {
	if !existing && missingGap != "" {
		t.Skipf("this tier cannot guarantee that a command does not create a protected path that did not exist when the sandbox started: %s", missingGap)
	}
	dir := t.TempDir()
	seedProtected(t, dir, existing)
	sb := newSB(t, dir)
	t.Cleanup(func() { _ = sb.Close() })
	for i, e := range policy.DefaultProtected {
		f, l := e, fmt.Sprintf("ln-%d", i)
		if protectedDirs[e] {
			f, l = e+"/x", l+"/x"
		}
		for _, c := range protectedCommands {
			cmd := strings.NewReplacer("F", f, "P", e, "L", l, "DIR", strings.Split(e, "/")[0]).Replace(c)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res, err := sb.Exec(ctx, sandbox.Command{Shell: cmd + " 2>&1; true", Timeout: 20 * time.Second})
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", cmd, err)
			}
			if !fileEq(filepath.Join(dir, "other"), "other") {
				_ = os.WriteFile(filepath.Join(dir, "other"), []byte("other"), 0o644)
			}
			checkProtected(t, dir, existing, fmt.Sprintf("%q (output %q)", cmd, res.Stdout))
		}
	}
}

func fileEq(p, want string) bool {
	data, err := os.ReadFile(p)
	return err == nil && string(data) == want
}

// RunProtectedAll runs RunProtected and RunProtectedCommands (existing
// and missing paths) as subtests: the whole guarantee of a tier whose
// commands are confined.
func RunProtectedAll(t *testing.T, newSB ProtectedFactory, missingGap string) {
	t.Run("file_tools", func(t *testing.T) { RunProtected(t, newSB) })
	t.Run("commands_existing", func(t *testing.T) { RunProtectedCommands(t, newSB, true, missingGap) })
	t.Run("commands_missing", func(t *testing.T) { RunProtectedCommands(t, newSB, false, missingGap) })
}

// CreateRoute is one way a shell command may try to make a path: Script
// with F standing for the path.
type CreateRoute struct{ Name, Script string }

// CreateRoutes are the routes to a new name that busybox's sh has too:
// redirection, tee, cp, mv, ln -s, a hard link, mkdir (nested too),
// touch, install, mkfifo, a dangling link, .., an absolute path and
// /proc/self/cwd. A file "other" must exist in the start directory.
var CreateRoutes = []CreateRoute{
	{">", "echo planted > F"},
	{">>", "echo planted >> F"},
	{"tee", "echo planted | tee F"},
	{"cp", "cp other F"},
	{"mv", "cp other o2 && mv -f o2 F"},
	{"ln -s", "ln -s other F"},
	{"ln", "ln other F"},
	{"mkdir", "mkdir F"},
	{"mkdir -p", "mkdir -p F/a/b"},
	{"touch", "touch F"},
	{"install", "install -m 755 other F"},
	{"mkfifo", "mkfifo F"},
	{"dangling link", "ln -sf F dangling && echo planted > dangling"},
	{"dotdot", "mkdir -p sub && echo planted > sub/../F"},
	{"absolute", `echo planted > "$PWD/F"`},
	{"proc cwd", "echo planted > /proc/self/cwd/F"},
}

// ProtectedScript is r tried on every default protected path, each
// failure silenced, then "echo done" (which shows the script ran).
func ProtectedScript(r CreateRoute) string {
	var script strings.Builder
	for _, e := range policy.DefaultProtected {
		script.WriteString(strings.ReplaceAll(r.Script, "F", e) + " 2>/dev/null\n")
	}
	script.WriteString("echo done")
	return script.String()
}
