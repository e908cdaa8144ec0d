package main

// Review 5: attacks on the flags and files of "hutch run" and "hutch mcp".
// Each test fails while its defect is present; the ones marked "holds"
// are attacks that did not get through.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
)

// review5Child runs the CLI in a child process (this test binary, started
// with HUTCH_REVIEW5_ARGS), for commands that read os.Stdin directly
// ("hutch mcp" on stdio); TestMain hands over to it.
func review5Child() {
	if args := os.Getenv("HUTCH_REVIEW5_ARGS"); args != "" {
		os.Exit(execute(strings.Split(args, "\x1f"), os.Stdin, os.Stdout, os.Stderr))
	}
}

func review5Run(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HUTCH_REVIEW5_ARGS="+strings.Join(args, "\x1f"))
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader("") // the client hangs up at once
	return exitAndOutput(t, cmd)
}

// exitAndOutput runs cmd and returns its exit status and its combined
// output; a command that could not run at all fails t.
func exitAndOutput(t *testing.T, cmd *exec.Cmd) (int, string) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

func review5Write(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A policy file's second YAML document is dropped: its deny list does not
// apply, and the denied file is read.
func TestReview5RunPolicySecondDocumentDropped(t *testing.T) {
	dir := t.TempDir()
	review5Write(t, filepath.Join(dir, "secret"), "s3cret\n")
	pol := review5Write(t, filepath.Join(dir, "p.yaml"), "read: ["+dir+"]\n---\ndeny: ["+dir+"/secret]\n")
	code, out, errs := hutch(t, "", "run", "--policy", pol, "--", "cat", dir+"/secret")
	if strings.Contains(out, "s3cret") || code != 125 {
		t.Errorf("exit %d, stdout %q, stderr %q: the deny list of the second document was ignored; want 125 and an error", code, out, errs)
	}
}

// "policy:" in an mcp --config file is ignored on the local (and virtual)
// tier: the server starts with an unconfined shell, while the same
// --policy given as a flag is refused.
func TestReview5MCPConfigPolicyIgnoredOnLocalTier(t *testing.T) {
	dir := t.TempDir()
	review5Write(t, filepath.Join(dir, "strict.yaml"), "read: ["+dir+"]\ndeny: ["+dir+"/secret]\n")
	cfg := review5Write(t, filepath.Join(dir, "c.yaml"), "tier: local\nroot: "+dir+"\nmode: auto\npolicy: "+dir+"/strict.yaml\n")
	code, out := review5Run(t, dir, "mcp", "--config", cfg)
	if code == 0 {
		t.Errorf("hutch mcp served the local tier and ignored the config's policy file (exit 0, %q); the flag form is refused", out)
	}
}

// "runtime:" in an mcp --config file is overridden by the --runtime flag's
// default (docker) as soon as any container flag is given, though the
// flag was not set: flags should win only when given.
func TestReview5MCPConfigRuntimeOverriddenByDefault(t *testing.T) {
	dir := t.TempDir()
	cfg := review5Write(t, filepath.Join(dir, "c.yaml"), "tier: container\nimage: hutch-test-busybox\nruntime: apple\nroot: "+dir+"\n")
	code, out := review5Run(t, dir, "mcp", "--config", cfg) // control: apple is used
	if code != 125 || !strings.Contains(out, "apple") {
		t.Fatalf("control: the config's apple runtime was not used: exit %d %q", code, out)
	}
	code, out = review5Run(t, dir, "mcp", "--config", cfg, "--cpus", "1")
	if code != 125 || !strings.Contains(out, "apple") {
		t.Errorf("with --cpus 1 the config's runtime apple was replaced by the --runtime default: exit %d %q", code, out)
	}
}

// The container tier drops a denied directory that holds a bound path:
// with --read DIR/sub --deny DIR the command still reads DIR/sub (and
// with --write, changes it). The isolated tier hides it: deny wins.
func TestReview5ContainerDenyAboveBind(t *testing.T) {
	image := os.Getenv("HUTCH_TEST_IMAGE")
	if image == "" {
		image = "hutch-test-busybox:latest"
	}
	if out, err := exec.Command("docker", "image", "inspect", image).CombinedOutput(); err != nil {
		testenv.Missing(t, "no Docker engine with %s (run scripts/docker-up.sh): %v %s", image, err, out)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	review5Write(t, filepath.Join(dir, "sub", "f"), "s3cret\n")
	// Control: the isolated tier hides it.
	if code, out, errs := hutch(t, "", "run", "--read", dir+"/sub", "--deny", dir, "--", "cat", dir+"/sub/f"); strings.Contains(out, "s3cret") {
		t.Fatalf("isolated: exit %d %q %q", code, out, errs)
	}
	code, out, errs := hutch(t, "", "run", "--tier", "container", "--image", image, "--read", dir+"/sub", "--deny", dir, "--", "cat", dir+"/sub/f")
	if strings.Contains(out, "s3cret") {
		t.Errorf("container: --deny %s did not hide %s/sub/f (exit %d, %q %q)", dir, dir, code, out, errs)
	}
	code, out, errs = hutch(t, "", "run", "--tier", "container", "--image", image, "--write", dir+"/sub", "--deny", dir, "--dir", "/tmp",
		"--", "sh", "-c", "echo x > "+dir+"/sub/planted")
	if _, err := os.Stat(filepath.Join(dir, "sub", "planted")); err == nil {
		t.Errorf("container: wrote inside the denied %s (exit %d, %q %q)", dir, code, out, errs)
	}
}

// --network all (or none) with --network-deny: Extend clears the deny
// list together with any allow-list, so the run gets the whole network and
// the host the user refused stays reachable, without a word. (With
// "network: all" in a --policy file the same deny is refused.)
func TestReview5RunNetworkAllDropsDeny(t *testing.T) {
	for _, netw := range []string{"all", "none"} {
		code, _, errs := hutch(t, "", "run", "--network", netw, "--network-deny", "example.com", "--", "true")
		if code != 125 {
			t.Errorf("--network %s --network-deny example.com: exit %d, stderr %q; want 125 (a deny list needs --network allow=...)", netw, code, errs)
		}
	}
}

// --memory / --file-size below one byte parse to 0, "no limit": the
// command runs unbounded with no word.
func TestReview5RunFractionalFileSizeIsNoLimit(t *testing.T) {
	code, out, errs := hutch(t, "", "run", "--file-size", "0.5", "--", "sh", "-c", "ulimit -f")
	if code == 0 && strings.TrimSpace(out) == "unlimited" {
		t.Errorf("--file-size 0.5 ran with no file size limit (stdout %q, stderr %q); want 125 and an error", out, errs)
	}
}

// --root is the local tier's; on the isolated (default) tier it is
// silently ignored, so the command does not get the directory the user
// named. Other tiers' flags are refused on the wrong tier; this one not.
func TestReview5RunRootOnIsolatedTierIgnored(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := hutch(t, "", "run", "--root", dir, "--", "pwd")
	if code == 0 {
		t.Errorf("--root %s on the isolated tier was ignored (ran in %q, stderr %q); want 125: --root applies to --tier local", dir, strings.TrimSpace(out), errs)
	}
}

// Holds: bad flag values that got exit 125 and a one-line reason.
func TestReview5RunFlagsHold(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "lnk")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--read", ""}, "empty path"},
		{[]string{"--deny", ""}, "empty path"},
		{[]string{"--write", "/"}, "whole host"},
		{[]string{"--read", "/"}, "whole host"},
		{[]string{"--read", strings.Repeat("a", 5000)}, "longer than"},
		{[]string{"--read", link + "/passwd"}, "symbolic link"},
		{[]string{"--memory", "1e9"}, "bad size"},
		{[]string{"--memory", "99999999T"}, "too large"},
		{[]string{"--memory", "Infinity"}, "too large"},
		{[]string{"--memory", "1M"}, "at least 16 MiB"},
		{[]string{"--memory", ""}, "bad size"},
		{[]string{"--pids", "-1"}, "negative"},
		{[]string{"--pids", "99999999999999999999"}, "out of range"},
		{[]string{"--nice", "20"}, "give 0"},
		{[]string{"--nice", "-1"}, "give 0"},
		{[]string{"--cpu-time", "400ms"}, "at least 1s"},
		{[]string{"--cpu-time", "-1s"}, "negative"},
		{[]string{"--timeout", "0"}, "must be positive"},
		{[]string{"--timeout", "1e9h"}, "invalid argument"},
		{[]string{"--network", "ALL"}, "choose none, all"},
		{[]string{"--network", "allow="}, "lists no host"},
		{[]string{"--network", "allow=example.com,"}, "empty entry"},
		{[]string{"--network", "allow=,example.com"}, "empty entry"},
		{[]string{"--network-deny="}, "names no host"},
		{[]string{"--network", "allow=example.com", "--network-deny="}, "names no host"},
		{[]string{"--network", "allow=*"}, "*"},
		{[]string{"--network-deny", "evil.com"}, "network allow"},
		{[]string{"--network", "allow=example.com", "--network-deny", "a.example.com,"}, "empty entry"},
		{[]string{"--env", "=x"}, "NAME"},
		{[]string{"--env", "NOEQ"}, "NAME=VALUE"},
		{[]string{"--dir", "/nonexistent"}, "not readable"},
		{[]string{"--policy", dir}, "is a directory"},
		{[]string{"--tier", "Isolated"}, "unknown tier"},
		{[]string{"--tier", "isolated", "--cpus", "2"}, "apply to --tier container"},
	} {
		args := append(append([]string{"run"}, c.args...), "--", "true")
		code, _, errs := hutch(t, "", args...)
		if code != 125 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%q: exit %d, stderr %q; want 125 and one line with %q", c.args, code, errs, c.want)
		}
	}
}
