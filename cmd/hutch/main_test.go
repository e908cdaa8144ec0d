package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/internal/testenv"
)

// The test binary is also the isolated tier's helper, as hutch is, and
// hutch itself: the program "hutch" (see hutchCommand).
func TestMain(m *testing.M) {
	helper.Main()
	testenv.RunProgram()
	os.Exit(m.Run())
}

// The program "hutch" runs the CLI with its arguments on this process's
// stdio and exits with its status, for commands that read os.Stdin
// directly ("hutch mcp" on stdio) or must run in a process of their own.
func init() {
	testenv.RegisterProgram("hutch", func(args []string) {
		os.Exit(execute(args, os.Stdin, os.Stdout, os.Stderr))
	})
}

// hutchCommand is hutch with args in a child process: this test binary
// run as the program "hutch".
func hutchCommand(args ...string) *exec.Cmd {
	argv := testenv.ProgramArgv(args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), testenv.ProgramEnv("hutch"))
	return cmd
}

// hutch runs the CLI in-process and returns its exit status and output.
func hutch(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestRunExitStatus(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/noexec", []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	local := []string{"run", "--tier", "local", "--root", dir}
	cases := []struct {
		name     string
		args     []string
		code     int
		stderrRE string // substring the one-line reason must contain
	}{
		{"success", append(local, "--", "true"), 0, ""},
		{"command's own status", append(local, "--", "sh", "-c", "exit 7"), 7, ""},
		{"timeout", append(local, "--timeout", "200ms", "--", "sleep", "10"), 124, "timed out"},
		{"not executable", append(local, "--", "./noexec"), 126, "not executable"},
		{"not found", append(local, "--", "hutch-no-such-command"), 127, "not found"},
		{"shell not found", append(local, "-c", "hutch-no-such-command"), 127, "not found"},
		{"default tier is isolated", []string{"run", "--", "sh", "-c", "test ! -e " + dir + " && exit 9"}, 9, ""},
		{"isolated cpu limit", []string{"run", "--cpu-time", "1s", "--", "sh", "-c", "while :; do :; done"}, 128 + 24, "cpu time limit"},
		{"isolated bad memory", []string{"run", "--memory", "lots", "--", "true"}, 125, "--memory"},
		{"isolated bad network", []string{"run", "--network", "some", "--", "true"}, 125, "choose none, all or allow"},
		{"isolated wildcard over a suffix", []string{"run", "--network", "allow=*.com", "--", "true"}, 125, "*.com"},
		{"isolated deny without allow", []string{"run", "--network-deny", "example.com", "--", "true"}, 125, "network allow"},
		{"isolated missing policy", []string{"run", "--policy", dir + "/nope.yaml", "--", "true"}, 125, "nope.yaml"},
		{"policy flag on local", append(local, "--read", "/x", "--", "true"), 125, "apply to the isolated tier"},
		{"virtual has no shell", []string{"run", "--tier", "virtual", "--", "true"}, 125, "no shell"},
		{"unknown tier", []string{"run", "--tier", "bogus", "--", "true"}, 125, `unknown tier "bogus"`},
		{"bad flag", append(local, "--bogus", "--", "true"), 125, "unknown flag: --bogus"},
		{"bad env", append(local, "--env", "NOEQUALS", "--", "true"), 125, "NAME=VALUE"},
		{"bad timeout", append(local, "--timeout", "-1s", "--", "true"), 125, "--timeout must be positive"},
		{"unparsable timeout", append(local, "--timeout", "soon", "--", "true"), 125, "invalid argument"},
		{"no command", local, 125, "no command"},
		{"both forms", append(local, "-c", "true", "--", "true"), 125, "not both"},
		{"missing root", []string{"run", "--tier", "local", "--root", dir + "/nope", "--", "true"}, 125, "root"},
		{"dir escapes", append(local, "--dir", "..", "--", "true"), 125, "escapes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := hutch(t, "", c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, c.code, stderr)
			}
			if !strings.Contains(stderr, c.stderrRE) {
				t.Errorf("stderr %q does not contain %q", stderr, c.stderrRE)
			}
			if c.code == 125 && strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("reason must be one line, got %q", stderr)
			}
		})
	}
}

func TestRunStreamsAndFlags(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(dir+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HUTCH_CLI_SECRET", "leak")
	code, out, errOut := hutch(t, "piped in",
		"run", "--tier", "local", "--root", dir, "--dir", "sub", "--env", "A=1", "--env", "B=x=y", "--",
		"sh", "-c", `echo "$A $B $HUTCH_CLI_SECRET"; pwd; cat; echo oops >&2`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := fmt.Sprintf("1 x=y \n%s/sub\npiped in", dir); out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if errOut != "oops\n" {
		t.Errorf("stderr %q", errOut)
	}
	// Flags after CMD belong to CMD.
	code, out, _ = hutch(t, "", "run", "--tier", "local", "--root", dir, "echo", "--json", "-c")
	if code != 0 || out != "--json -c\n" {
		t.Errorf("flags after CMD: exit %d, stdout %q", code, out)
	}
}

type jsonResult struct {
	ExitCode        *int      `json:"exit_code"`
	Stdout          *string   `json:"stdout"`
	Stderr          *string   `json:"stderr"`
	TimedOut        *bool     `json:"timed_out"`
	Signal          *string   `json:"signal"`
	DurationMS      *int64    `json:"duration_ms"`
	StdoutTruncated *bool     `json:"stdout_truncated"`
	StderrTruncated *bool     `json:"stderr_truncated"`
	Blocked         *[]string `json:"blocked"`
	BlockedOmitted  *int      `json:"blocked_omitted"`
}

func decodeOne(t *testing.T, out string) jsonResult {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var r jsonResult
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("stdout is not JSON: %v: %q", err, out)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON value: %q", out)
	}
	if r.ExitCode == nil || r.Stdout == nil || r.Stderr == nil || r.TimedOut == nil || r.Signal == nil ||
		r.DurationMS == nil || r.StdoutTruncated == nil || r.StderrTruncated == nil || r.Blocked == nil || r.BlockedOmitted == nil {
		t.Fatalf("JSON lacks a required key: %q", out)
	}
	return r
}

func TestRunJSON(t *testing.T) {
	dir := t.TempDir()
	code, out, _ := hutch(t, "", "run", "--tier", "local", "--root", dir, "--json", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	r := decodeOne(t, out)
	if code != 3 || *r.ExitCode != 3 || *r.Stdout != "out\n" || *r.Stderr != "err\n" || *r.TimedOut || *r.Signal != "" {
		t.Errorf("exit %d, result %s", code, out)
	}
	code, out, _ = hutch(t, "", "run", "--tier", "local", "--root", dir, "--json", "--timeout", "200ms", "--", "sh", "-c", "echo before; sleep 10")
	r = decodeOne(t, out)
	if code != 124 || !*r.TimedOut || *r.Signal != "SIGKILL" || *r.Stdout != "before\n" {
		t.Errorf("timeout: exit %d, result %s", code, out)
	}
	code, out, _ = hutch(t, "", "run", "--tier", "local", "--root", dir, "--json", "-c", "head -c 2000000 /dev/zero | tr '\\0' a")
	r = decodeOne(t, out)
	if code != 0 || !*r.StdoutTruncated || len(*r.Stdout) != 1<<20 {
		t.Errorf("flood: exit %d, truncated %v, kept %d", code, *r.StdoutTruncated, len(*r.Stdout))
	}
}

// A command killed by a signal from outside exits 128+N and names it.
func TestRunKilledBySignal(t *testing.T) {
	dir := t.TempDir()
	marker := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000)
	type outcome struct {
		code int
		out  string
	}
	done := make(chan outcome, 1)
	go func() {
		code, out, _ := hutch(t, "", "run", "--tier", "local", "--root", dir, "--json", "--timeout", "20s", "--", "sleep", marker)
		done <- outcome{code, out}
	}()
	pid := waitForProcess(t, marker)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	o := <-done
	r := decodeOne(t, o.out)
	if o.code != 137 || *r.Signal != "SIGKILL" || *r.ExitCode != 137 || *r.TimedOut {
		t.Errorf("exit %d, result %s", o.code, o.out)
	}
}

func waitForProcess(t *testing.T, marker string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if pid := testenv.FindProcess(marker); pid != 0 {
			return pid
		}
	}
	t.Fatalf("process %s never appeared", marker)
	return 0
}

func TestCheckAndVersion(t *testing.T) {
	code, out, errOut := hutch(t, "", "check")
	if code != 0 || !strings.Contains(out, "virtual") || !strings.Contains(out, "local ") || !strings.Contains(out, "sh ") {
		t.Errorf("check: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = hutch(t, "", "check", "--json")
	var rep struct {
		Tiers []struct {
			Tier      string
			Supported bool
			Reason    string
		}
		Environment struct {
			Commands map[string]struct{ Path string }
			Error    string
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("check --json: exit %d, %v: %q", code, err, out)
	}
	got := map[string]bool{}
	for _, s := range rep.Tiers {
		got[s.Tier] = s.Supported
		if !s.Supported && s.Reason == "" {
			t.Errorf("unsupported tier %s without a reason", s.Tier)
		}
	}
	_, dockerErr := exec.LookPath("docker")
	if !got["virtual"] || !got["local"] || !got["isolated"] || got["container"] != (dockerErr == nil) || !got["remote"] {
		t.Errorf("tiers: %+v", rep.Tiers)
	}
	if rep.Environment.Error != "" || rep.Environment.Commands["sh"].Path == "" {
		t.Errorf("environment: %+v", rep.Environment)
	}
	code, out, _ = hutch(t, "", "version")
	if code != 0 || !strings.HasPrefix(out, "hutch ") {
		t.Errorf("version: %d %q", code, out)
	}
}

// Only the subcommand named is built, yet help lists every one, each
// subcommand's own help works, and a name hutch does not have is an error
// that suggests the nearest.
func TestSubcommandsBuiltOnDemand(t *testing.T) {
	for _, c := range commands {
		if got := c.build().Name(); got != c.name {
			t.Errorf("commands lists %q for the command named %q", c.name, got)
		}
		if built := subcommands([]string{c.name, "--help"}); len(built) != 1 || built[0].Name() != c.name {
			t.Errorf("%s: built %d commands", c.name, len(built))
		}
		code, out, errOut := hutch(t, "", c.name, "--help")
		if code != 0 || !strings.Contains(out, "hutch "+c.name) {
			t.Errorf("hutch %s --help: exit %d, stdout %q, stderr %q", c.name, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"--help"}, {"help"}, {}} {
		code, out, errOut := hutch(t, "", args...)
		for _, c := range commands {
			if !strings.Contains(out, "  "+c.name+" ") {
				t.Errorf("hutch %q: exit %d, %s not listed: %q %q", args, code, c.name, out, errOut)
			}
		}
	}
	code, out, errOut := hutch(t, "", "rnu")
	if code != exitUsage || !strings.Contains(errOut, `unknown command "rnu"`) || !strings.Contains(errOut, "run") {
		t.Errorf("hutch rnu: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// --network allow=... : listed hosts through the proxy, refusals in
// --json's "blocked" (an empty list when none).
func TestRunNetworkAllow(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hi") })}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	addr := l.Addr().String()
	code, out, errs := hutch(t, "", "run", "--json", "--network", "allow="+addr, "--", "curl", "-sS", "http://"+addr+"/")
	r := decodeOne(t, out)
	if code != 0 || *r.Stdout != "hi" || len(*r.Blocked) != 0 {
		t.Errorf("allowed: exit %d, %s %s", code, out, errs)
	}
	code, out, errs = hutch(t, "", "run", "--json", "--network", "allow="+addr, "--network-deny", "127.0.0.2", "--", "curl", "-sS", "http://"+addr+"/")
	r = decodeOne(t, out)
	if strings.Contains(*r.Stdout, "hi") || len(*r.Blocked) != 1 || (*r.Blocked)[0] != addr {
		t.Errorf("denied: exit %d, %s %s", code, out, errs)
	}
}

// dockerImage is the test image (HUTCH_TEST_IMAGE, or the busybox image
// scripts/docker-up.sh builds), on a Docker engine that has it: missing,
// a failure under CI and a skip outside it.
func dockerImage(t *testing.T) string {
	t.Helper()
	image := os.Getenv("HUTCH_TEST_IMAGE")
	if image == "" {
		image = "hutch-test-busybox:latest"
	}
	if out, err := exec.Command("docker", "image", "inspect", image).CombinedOutput(); err != nil {
		testenv.Missing(t, "no Docker engine with %s (run scripts/docker-up.sh): %v %s", image, err, out)
	}
	return image
}

// hutch run --tier container on a real Docker engine (scripts/docker-up.sh
// starts one and builds the busybox image): hardened by default, the
// policy flags mapped onto binds, bad combinations refused.
func TestRunContainer(t *testing.T) {
	image := dockerImage(t)
	dir := t.TempDir()
	// The helper is a static build: this test binary may be linked
	// dynamically (cgo), and a writable bind missing protected paths
	// needs the helper's supervisor, which the container tier never
	// drops silently.
	code, out, errs := hutch(t, "", "run", "--tier", "container", "--image", image, "--helper", staticHutch(t), "--write", dir, "--json", "--",
		"sh", "-c", "pwd; grep CapEff /proc/self/status; echo x > made.txt; touch /etc/x 2>/dev/null || echo ro; touch .bashrc 2>/dev/null || echo protected")
	r := decodeOne(t, out)
	if code != 0 || *r.Stdout != dir+"\nCapEff:\t0000000000000000\nro\nprotected\n" {
		t.Errorf("exit %d, %s %s", code, out, errs)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "made.txt")); err != nil || string(b) != "x\n" {
		t.Errorf("the writable path is not the host's: %q %v", b, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--tier", "container", "--", "true"}, "needs an image"},
		{[]string{"run", "--image", image, "--", "true"}, "apply to --tier container"},
		{[]string{"run", "--tier", "container", "--image", image, "--network", "allow=example.com", "--", "true"}, "isolated tier"},
		{[]string{"run", "--tier", "container", "--image", image, "--runtime", "lxc", "--", "true"}, "unknown runtime"},
	} {
		if code, _, errs := hutch(t, "", c.args...); code != 125 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, %q; want 125 and %q", c.args, code, errs, c.want)
		}
	}
}

// hutchChild runs hutch with args in a child process (hutchCommand) in
// dir, with an empty stdin, and returns its exit status and its combined
// output.
func hutchChild(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	cmd := hutchCommand(args...)
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

// writeFile writes body to path, failing t when it cannot, and returns
// path.
func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// hasControl reports whether s, less one trailing newline, holds a
// control character.
func hasControl(s string) bool {
	return strings.IndexFunc(strings.TrimSuffix(s, "\n"), unicode.IsControl) >= 0
}

// hutch's one error line carries no control character: a path (or any
// input echoed with %s) carrying ANSI escapes or backspaces is escaped,
// so it cannot rewrite the terminal line the person reads.
// Origin: review 9.
func TestErrorLineEscapesControlChars(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--dir", "/x\x1b[2K\x1b[1Gall good", "--", "true"},
		{"run", "--read", "/x", "--dir", "/y\b\b\b\bz", "--", "true"},
	} {
		code, _, errs := hutch(t, "", args...)
		if code != 125 {
			t.Errorf("%q: exit %d, want 125", args, code)
		}
		if hasControl(errs) {
			t.Errorf("%q: the error line carries control characters: %q", args, errs)
		}
	}
}

// oneLine's result is valid UTF-8, even for an input with no other
// non-printable rune: a raw 0x9b (the 8-bit CSI, acted on by terminals not
// in UTF-8 mode) or 0x90/0x9d (DCS, OSC), which strings.IndexFunc sees as
// the printable U+FFFD, never reaches the terminal as is.
// Origin: review 11.
func TestOneLineIsValidUTF8(t *testing.T) {
	for _, in := range []string{"open /w/\x9b31mred: no such file", "path /w/\x9d0;title\x9c: bad"} {
		got := oneLine(in)
		if !utf8.ValidString(got) {
			t.Errorf("oneLine(%q) = %q: raw C1 / invalid bytes reach the terminal", in, got)
		}
	}
}
