package main

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
)

// serveCommand is the --server-command that starts this test binary as
// `hutch serve --stdio` with args (the words hold no spaces).
func serveCommand(t *testing.T, args ...string) string {
	t.Helper()
	t.Setenv(testenv.ProgramEnvKey, "hutch") // the server inherits it
	return strings.Join(testenv.ProgramArgv(append([]string{"serve", "--stdio"}, args...)...), " ")
}

// hutch run --tier remote over a --server-command runs the command in
// the served isolated tier: its writes land where the server lets them,
// the server's policy holds (nothing else is readable), and the
// command's status comes back.
func TestRunRemoteOverStdio(t *testing.T) {
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "this host cannot build isolated sandboxes: %v", err)
	}
	work, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(outside+"/secret", []byte("TOP-SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := serveCommand(t, "--write", work)
	code, out, errs := hutch(t, "", "run", "--tier", "remote", "--server-command", srv, "--", "sh", "-c", "pwd; echo made > f.txt; cat "+outside+"/secret; exit 3")
	if code != 3 || !strings.Contains(out, work) || strings.Contains(out, "TOP-SECRET") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if b, err := os.ReadFile(work + "/f.txt"); err != nil || string(b) != "made\n" {
		t.Fatalf("the write did not land in the served root: %q %v", b, err)
	}
}

// The remote flags apply to the remote tier only, and the remote tier
// needs exactly one way to its server; each mistake is one line naming
// the fix.
func TestRunRemoteFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"run", "--tier", "local", "--server", "http://127.0.0.1:1", "--", "true"}, "apply to --tier remote"},
		{[]string{"run", "--tier", "remote", "--", "true"}, "needs --server URL"},
		{[]string{"run", "--tier", "remote", "--server", "http://127.0.0.1:1", "--", "true"}, "needs --token-file"},
		{[]string{"run", "--tier", "remote", "--server", "http://x", "--server-command", "ssh x", "--", "true"}, "not both"},
		{[]string{"run", "--tier", "remote", "--server-command", " ", "--", "true"}, "empty"},
		{[]string{"run", "--tier", "remote", "--root", "/tmp", "--server-command", "ssh x", "--", "true"}, "the server's"},
		{[]string{"serve"}, "--stdio or --listen"},
		{[]string{"serve", "--stdio", "--listen", ":0"}, "--stdio or --listen"},
		{[]string{"serve", "--stdio", "--token-file", "t"}, "apply to --listen"},
		{[]string{"serve", "--listen", ":0"}, "needs --token-file"},
		{[]string{"serve", "--listen", "0.0.0.0:0", "--token-file", "TOKEN"}, "--insecure"},
		{[]string{"serve", "--stdio", "--tier", "remote"}, "not remote"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			if i := indexOf(c.args, "TOKEN"); i >= 0 {
				c.args[i] = t.TempDir() + "/token"
			}
			code, _, errs := hutch(t, "", c.args...)
			if code != exitUsage || !strings.Contains(errs, c.says) || strings.Count(errs, "\n") != 1 {
				t.Errorf("exit %d, stderr %q: want 125 and one line naming %q", code, errs, c.says)
			}
		})
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// hutch serve --listen with a token file, then hutch check --tier remote
// against it: reachable, authenticated, the served tier and root; with
// another token, reachable but refused.
func TestServeListenAndCheck(t *testing.T) {
	dir := t.TempDir()
	tokenFile := dir + "/token"
	u := startServe(t, "serve", "--tier", "local", "--root", dir, "--listen", "127.0.0.1:0", "--token-file", tokenFile)
	fi, err := os.Stat(tokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	code, out, errs := hutch(t, "", "check", "--json", "--tier", "remote", "--server", u, "--token-file", tokenFile)
	var rep remoteReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.Authenticated || rep.Tier != "local" || rep.Root != dir {
		t.Fatalf("check: exit %d, %q, %q", code, out, errs)
	}
	code, out, errs = hutch(t, "", "run", "--tier", "remote", "--server", u, "--token-file", tokenFile, "--", "sh", "-c", "echo hi > g.txt; cat g.txt")
	if code != 0 || out != "hi\n" {
		t.Fatalf("run: exit %d, %q, %q", code, out, errs)
	}
	bad := dir + "/bad"
	if err := os.WriteFile(bad, []byte("another-servers-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = hutch(t, "", "check", "--json", "--tier", "remote", "--server", u, "--token-file", bad)
	rep = remoteReport{}
	if code != exitUsage || json.Unmarshal([]byte(out), &rep) != nil || !rep.Reachable || rep.Authenticated || !strings.Contains(rep.Error, "401") {
		t.Fatalf("check with another token: exit %d, %q", code, out)
	}
}

// startServe starts hutch with args (a serve --listen) in a child and
// returns the URL it says it listens on; the child is killed at the end.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	srv := hutchCommand(args...)
	stderr, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`on (https?://\S+)/`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				url <- m[1]
			}
		}
	}()
	select {
	case u := <-url:
		return u
	case <-time.After(20 * time.Second):
		t.Fatal("hutch serve did not say where it listens")
	}
	return ""
}

// Mutual TLS from the command line: a server with client CAs and no
// token, a client with its certificate and the server's CA; without the
// certificate, or trusting only the system's CAs, it is refused.
func TestServeListenMutualTLS(t *testing.T) {
	p := testenv.NewPKI(t)
	dir := t.TempDir()
	u := startServe(t, "serve", "--tier", "local", "--root", dir, "--listen", "127.0.0.1:0",
		"--tls-cert", p.ServerCertFile, "--tls-key", p.ServerKeyFile, "--tls-client-ca", p.CAFile)
	if !strings.HasPrefix(u, "https://") {
		t.Fatalf("serving on %s", u)
	}
	remoteArgs := []string{"run", "--tier", "remote", "--server", u, "--server-ca", p.CAFile}
	code, out, errs := hutch(t, "", append(remoteArgs, "--client-cert", p.ClientCertFile, "--client-key", p.ClientKeyFile, "--", "sh", "-c", "echo hi")...)
	if code != 0 || out != "hi\n" {
		t.Fatalf("with a client certificate: exit %d, %q, %q", code, out, errs)
	}
	for _, args := range [][]string{
		append(remoteArgs, "--client-cert", p.ClientCertFile, "--", "true"),
		{"run", "--tier", "remote", "--server", u, "--client-cert", p.ClientCertFile, "--client-key", p.ClientKeyFile, "--", "true"},
		{"run", "--tier", "remote", "--server", strings.Replace(u, "https", "http", 1), "--server-ca", p.CAFile, "--client-cert", p.ClientCertFile, "--client-key", p.ClientKeyFile, "--", "true"},
	} {
		if code, _, errs := hutch(t, "", args...); code != exitUsage || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: exit %d, %q; want 125 and one line", args, code, errs)
		}
	}
	tokenFile := dir + "/token"
	if err := os.WriteFile(tokenFile, []byte("a-token-the-server-never-had-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := hutch(t, "", append(remoteArgs, "--token-file", tokenFile, "--", "true")...); code != exitUsage || !strings.Contains(errs, "certificate") && !strings.Contains(errs, "tls") {
		t.Errorf("without a client certificate: exit %d, %q", code, errs)
	}
}

// The policy flags of hutch run --tier remote narrow the session's policy
// within the server's: with a narrower writable path, the rest of the
// server's is out of the session's reach (and what it writes there lands
// in its private /tmp, not on the host); a wider path, a wider network,
// and flags with no narrowing are refused, one line naming them.
func TestRunRemoteNarrowsTheServersPolicy(t *testing.T) {
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "this host cannot build isolated sandboxes: %v", err)
	}
	dir, work := t.TempDir(), t.TempDir()
	if err := os.Mkdir(work+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(work+"/seen", []byte("SEEN"), 0o644); err != nil {
		t.Fatal(err)
	}
	tokenFile := dir + "/token"
	u := startServe(t, "serve", "--write", work, "--listen", "127.0.0.1:0", "--token-file", tokenFile)
	remote := []string{"run", "--tier", "remote", "--server", u, "--token-file", tokenFile}
	script := "echo a > " + work + "/sub/x; echo b > " + work + "/y; cat " + work + "/seen"
	if code, out, errs := hutch(t, "", append(remote, "--", "sh", "-c", script)...); code != 0 || out != "SEEN" {
		t.Fatalf("the server's own policy: exit %d, %q, %q", code, out, errs)
	}
	if err := os.Remove(work + "/y"); err != nil {
		t.Fatal(err)
	}
	code, out, errs := hutch(t, "", append(remote, "--write", work+"/sub", "--", "sh", "-c", script)...)
	if code == 0 || strings.Contains(out, "SEEN") {
		t.Errorf("the rest of the server's path, narrowed away: exit %d, %q, %q", code, out, errs)
	}
	if b, err := os.ReadFile(work + "/sub/x"); err != nil || string(b) != "a\n" {
		t.Errorf("the narrowed path: %q %v", b, err)
	}
	if _, err := os.Stat(work + "/y"); err == nil {
		t.Error("the session wrote outside its narrowed path")
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{append(remote, "--write", dir, "--", "true"), dir},
		{append(remote, "--network", "all", "--", "true"), "network"},
		{append(remote, "--nice", "5", "--", "true"), "--nice does not apply to --tier remote"},
		{append(remote, "--policy", dir+"/p.yaml", "--", "true"), "--policy does not apply"},
		{[]string{"run", "--tier", "remote", "--server-command", "ssh x", "--read", "/usr", "--", "true"}, "on its own command line"},
	} {
		code, _, errs := hutch(t, "", c.args...)
		if code != exitUsage || !strings.Contains(errs, c.says) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: exit %d, stderr %q: want 125 and one line naming %q", c.args[len(remote):], code, errs, c.says)
		}
	}
}
