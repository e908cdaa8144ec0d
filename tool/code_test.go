package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/tool"
)

// needIsolated skips outside CI (and fails under CI) on a host without
// the isolated tier.
func needIsolated(t *testing.T) {
	t.Helper()
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "the isolated tier: %v", err)
	}
}

// codeBed is a workspace, a toolset with run_code whose sandboxes are
// real isolated ones, and a count of the runs that started.
type codeBed struct {
	ws   string
	ts   *tool.Toolset
	runs atomic.Int32
	opts tool.CodeOptions
}

// project reads the workspace and starts there; workspace may change
// it; online may change it too and reach one host.
func newCodeBed(t *testing.T, cfg permission.Config, escalate bool) *codeBed {
	t.Helper()
	needIsolated(t)
	b := &codeBed{ws: t.TempDir()}
	must(t, os.WriteFile(filepath.Join(b.ws, "data.csv"), []byte("a,b\n1,2\n"), 0o644))
	project := policy.Default().Extend(policy.Policy{Read: []string{b.ws}, Dir: b.ws,
		Limits: policy.Limits{Memory: 512 << 20, Processes: 64}})
	b.opts = tool.CodeOptions{
		Default: project,
		Run: func(ctx context.Context, p policy.Policy, cmd sandbox.Command) (sandbox.Result, error) {
			b.runs.Add(1)
			return isolated.Run(ctx, p, cmd)
		},
		RunDirs: t.TempDir(),
	}
	if escalate {
		b.opts.Escalations = map[string]policy.Policy{
			"workspace": project.Extend(policy.Policy{Write: []string{b.ws}}),
			"online":    project.Extend(policy.Policy{Write: []string{b.ws}, Hosts: []string{"example.com"}}),
		}
	}
	langs, err := tool.ProbeLanguages(bg, b.opts)
	must(t, err)
	b.opts.Languages = langs
	b.runs.Store(0)
	sb, err := local.New(bg, local.Options{Dir: b.ws})
	must(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	b.ts = toolsetWith(t, tool.Options{Sandbox: sb, Code: &b.opts}, cfg)
	return b
}

func (b *codeBed) run(t *testing.T, args map[string]any) (tool.CodeResult, tool.Output) {
	t.Helper()
	out := call(t, b.ts, "run_code", args)
	var r tool.CodeResult
	if !out.IsError {
		must(t, json.Unmarshal([]byte(out.Text), &r))
	}
	return r, out
}

func TestProbeLanguagesFindsTheInterpreters(t *testing.T) {
	b := newCodeBed(t, permission.Config{Mode: permission.ReadOnly}, false)
	var names []string
	for _, l := range b.opts.Languages {
		names = append(names, l.Name)
		if l.Version == "" {
			t.Errorf("%s without a version", l.Name)
		}
	}
	for _, want := range []string{"shell", "python", "javascript", "ruby"} {
		if !slices.Contains(names, want) {
			testenv.Missing(t, "the %s interpreter (scripts/test.sh installs it); found %v", want, names)
		}
	}
	desc := b.ts.Tools()[len(b.ts.Tools())-1].Description
	for _, l := range b.opts.Languages {
		if !strings.Contains(desc, l.Version) {
			t.Errorf("the description does not name %s %s: %s", l.Name, l.Version, desc)
		}
	}
}

// The default sandbox runs in every mode, read_only included, without
// asking; it reads the project but cannot change it; what the code writes
// under $RUN_DIR comes back; the run directory is gone afterwards.
func TestRunCodeDefaultSandbox(t *testing.T) {
	b := newCodeBed(t, permission.Config{Mode: permission.ReadOnly}, false)
	r, out := b.run(t, map[string]any{"language": "python", "code": `
import os
print(open("data.csv").read().strip())
open(os.environ["RUN_DIR"] + "/out.txt", "w").write("hello")
os.makedirs(os.environ["RUN_DIR"] + "/sub")
open(os.environ["RUN_DIR"] + "/sub/plot.png", "wb").write(b"\x89PNG\r\n\x1a\n" + bytes(16))
print(os.getcwd())
try:
    open("pwned", "w")
    print("WROTE")
except OSError as e:
    print("refused", e.errno)
`})
	if out.IsError || r.ExitCode != 0 {
		t.Fatalf("run: %+v", out)
	}
	if !strings.Contains(r.Stdout, "a,b\n1,2") || !strings.Contains(r.Stdout, b.ws) || strings.Contains(r.Stdout, "WROTE") {
		t.Errorf("stdout %q: want the project read, started in it, not written", r.Stdout)
	}
	if _, err := os.Stat(filepath.Join(b.ws, "pwned")); err == nil {
		t.Error("the default sandbox changed the project")
	}
	got := map[string]tool.CodeFile{}
	for _, f := range out.Files {
		got[f.Name] = f
	}
	if string(got["out.txt"].Data) != "hello" || got["sub/plot.png"].MediaType != "image/png" || len(out.Files) != 2 {
		t.Errorf("files back: %+v", out.Files)
	}
	if ents, _ := os.ReadDir(b.opts.RunDirs); len(ents) != 0 {
		t.Errorf("run directories left behind: %v", ents)
	}
}

// No state between calls: a file one call writes is not there for the
// next.
func TestRunCodeKeepsNothingBetweenCalls(t *testing.T) {
	b := newCodeBed(t, permission.Config{Mode: permission.Auto}, false)
	b.run(t, map[string]any{"language": "shell", "code": `echo x > "$RUN_DIR/keep"; echo LEFTOVER > /tmp/keep`})
	r, _ := b.run(t, map[string]any{"language": "shell", "code": `ls "$RUN_DIR"; cat /tmp/keep 2>&1; true`})
	if strings.Contains(r.Stdout, "keep\n") || strings.Contains(r.Stdout, "LEFTOVER") {
		t.Errorf("the second call saw the first's files: %q", r.Stdout)
	}
}

// Files copied in are the workspace's, read-only; writing them changes
// neither the copy nor the workspace.
func TestRunCodeCopiesFilesReadOnly(t *testing.T) {
	b := newCodeBed(t, permission.Config{Mode: permission.Auto}, false)
	r, out := b.run(t, map[string]any{"language": "shell", "files": []string{"data.csv"},
		"code": `cd "$RUN_DIR"; cat data.csv; echo z >> data.csv && echo CHANGED; true`})
	if out.IsError || !strings.Contains(r.Stdout, "1,2") || strings.Contains(r.Stdout, "CHANGED") {
		t.Errorf("copied file: %+v", out)
	}
	for _, f := range []string{"../outside", "/etc/passwd", "missing.txt", "a\x00b"} {
		_, out := b.run(t, map[string]any{"language": "shell", "files": []string{f}, "code": "true"})
		if !out.IsError {
			t.Errorf("files [%q] was copied in: %+v", f, out)
		}
	}
	if n := b.runs.Load(); n != 1 {
		t.Errorf("%d runs started; refused copies must run nothing", n)
	}
}

// The files returned are bounded and never follow links: at most 20, a
// file over 10 MiB counted with the rest, a link to a host file, a FIFO
// and a directory left out.
func TestRunCodeReturnsBoundedFiles(t *testing.T) {
	b := newCodeBed(t, permission.Config{Mode: permission.Auto}, false)
	r, out := b.run(t, map[string]any{"language": "shell", "code": `cd "$RUN_DIR"
for i in $(seq 1 25); do echo $i > f$i.txt; done
head -c 11000000 /dev/zero > big.bin
ln -s /etc/passwd link
mkfifo fifo`})
	if out.IsError || r.ExitCode != 0 {
		t.Fatalf("run: %+v", out)
	}
	if len(r.Files) != tool.MaxCodeFiles || r.FilesLeftOut != 6 {
		t.Errorf("%d files back and %d left out; want %d and 6 (5 text files and big.bin)", len(r.Files), r.FilesLeftOut, tool.MaxCodeFiles)
	}
	for _, f := range out.Files {
		if f.Name == "link" || f.Name == "fifo" || bytes.Contains(f.Data, []byte("root:")) {
			t.Errorf("returned %s", f.Name)
		}
	}
}

// An unknown sandbox, a sandbox without a reason, a reason without a
// sandbox, a timeout past the sandbox's: each is an error result, and
// nothing runs. Without escalations the schema has no sandbox at all.
func TestRunCodeRefusesBadEscalationsBeforeRunning(t *testing.T) {
	b := newCodeBed(t, permission.Config{Mode: permission.Ask, Asker: func(context.Context, permission.Request) (bool, error) { return true, nil }}, true)
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"language": "shell", "code": "true", "sandbox": "root", "reason": "x"}, `no sandbox "root"`},
		{map[string]any{"language": "shell", "code": "true", "sandbox": "Workspace", "reason": "x"}, "no sandbox"},
		{map[string]any{"language": "shell", "code": "true", "sandbox": "workspace"}, "needs a reason"},
		{map[string]any{"language": "shell", "code": "true", "sandbox": "workspace", "reason": " "}, "needs a reason"},
		{map[string]any{"language": "shell", "code": "true", "reason": "x"}, "goes with a sandbox"},
		{map[string]any{"language": "shell", "code": "true", "timeout": 121}, "timeout must be"},
		{map[string]any{"language": "cobol", "code": "true"}, "not offered"},
	} {
		if _, out := b.run(t, c.args); !out.IsError || !strings.Contains(out.Text, c.want) {
			t.Errorf("%v: %+v, want an error naming %q", c.args, out, c.want)
		}
	}
	if n := b.runs.Load(); n != 0 {
		t.Errorf("%d runs started from refused calls", n)
	}
	plain := newCodeBed(t, permission.Config{Mode: permission.Auto}, false)
	var schema struct{ Properties map[string]any }
	must(t, json.Unmarshal(plain.ts.Tools()[len(plain.ts.Tools())-1].InputSchema, &schema))
	if _, ok := schema.Properties["sandbox"]; ok {
		t.Errorf("schema without escalations has a sandbox: %v", schema.Properties)
	}
	if _, ok := schema.Properties["reason"]; ok {
		t.Errorf("schema without escalations has a reason: %v", schema.Properties)
	}
	if _, out := plain.run(t, map[string]any{"language": "shell", "code": "true", "sandbox": "workspace", "reason": "x"}); !out.IsError {
		t.Errorf("a sandbox argument without escalations was taken: %+v", out)
	}
}

// An escalation runs in the named sandbox only after the person says yes
// to that call, having seen the language, the code, the reason, the
// sandbox and its summary; the next call is back in the default.
func TestRunCodeEscalationAskedPerCall(t *testing.T) {
	var asked []permission.Request
	answer := true
	b := newCodeBed(t, permission.Config{Mode: permission.Ask, AskWhen: func(permission.Request) bool { return false },
		Allow: []permission.Capability{permission.Shell},
		Asker: func(_ context.Context, r permission.Request) (bool, error) {
			asked = append(asked, r)
			return answer, nil
		}}, true)
	edit := map[string]any{"language": "python", "code": `open("notes.md", "w").write("edited")`, "sandbox": "workspace", "reason": "edit the notes"}
	answer = false
	if _, out := b.run(t, edit); !out.IsError || !strings.Contains(out.Text, "denied") {
		t.Errorf("a refused escalation: %+v", out)
	}
	answer = true
	r, out := b.run(t, edit)
	if out.IsError || r.ExitCode != 0 || r.Sandbox != "workspace" {
		t.Fatalf("approved escalation: %+v", out)
	}
	if data, _ := os.ReadFile(filepath.Join(b.ws, "notes.md")); string(data) != "edited" {
		t.Errorf("the approved edit did not land: %q", data)
	}
	if len(asked) != 2 {
		t.Fatalf("asked %d times, want once per escalated call", len(asked))
	}
	// The approval binds to the sandbox's definition, not its name alone.
	if !strings.Contains(asked[1].EscalationPolicy, b.ws) {
		t.Errorf("the request's sandbox policy %q does not hold the sandbox's writable path %s", asked[1].EscalationPolicy, b.ws)
	}
	q := tool.Question(asked[1])
	for _, want := range []string{"python", "notes.md", "edit the notes", `"workspace"`, "Can change " + b.ws} {
		if !strings.Contains(q, want) {
			t.Errorf("the question does not show %q: %s", want, q)
		}
	}
	r, _ = b.run(t, map[string]any{"language": "python", "code": `
try:
    open("notes.md", "w").write("again"); print("WROTE")
except OSError: print("refused")`})
	if !strings.Contains(r.Stdout, "refused") || len(asked) != 2 {
		t.Errorf("the next call without a sandbox: %q (asked %d)", r.Stdout, len(asked))
	}
}

// auto and read_only cannot escalate; neither can an allow list.
func TestRunCodeAutoCannotEscalate(t *testing.T) {
	for _, m := range []permission.Mode{permission.Auto, permission.ReadOnly} {
		b := newCodeBed(t, permission.Config{Mode: m}, true)
		_, out := b.run(t, map[string]any{"language": "shell", "code": "touch x", "sandbox": "workspace", "reason": "r"})
		if !out.IsError || !strings.Contains(out.Text, "--mode ask") || b.runs.Load() != 0 {
			t.Errorf("%s: %+v (runs %d)", m, out, b.runs.Load())
		}
	}
}

// In approve mode the approval covers exactly one call: changing its
// language, code, files, timeout or sandbox makes a new pending request
// and nothing runs; the approved call runs once; the same call again
// waits for a new decision.
func TestRunCodeApprovalBindsToOneCall(t *testing.T) {
	store, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	must(t, err)
	b := newCodeBed(t, permission.Config{Mode: permission.Approve, Store: store}, true)
	ask := func(args map[string]any) string {
		t.Helper()
		raw, _ := json.Marshal(args)
		_, err := b.ts.Call(bg, "run_code", raw)
		var ar *permission.ApprovalRequiredError
		if !errors.As(err, &ar) {
			t.Fatalf("%v: want approval required, got %v", args, err)
		}
		return ar.ID
	}
	base := map[string]any{"language": "shell", "code": `echo ok > "$PWD/landed"`, "files": []string{"data.csv"}, "timeout": 30, "sandbox": "workspace", "reason": "r"}
	id := ask(base)
	// What the person deciding sees (hutch approvals list): the sandbox
	// with its summary, the reason, the code.
	pending, err := store.List(bg, permission.StatusPending)
	must(t, err)
	if len(pending) != 1 || !strings.Contains(pending[0].Detail, `sandbox "workspace" (`) || !strings.Contains(pending[0].Detail, "Can change "+b.ws) ||
		!strings.Contains(pending[0].Detail, `because "r"`) || !strings.Contains(pending[0].Detail, "landed") {
		t.Errorf("the pending request does not show what it asks: %+v", pending)
	}
	_, err = store.Decide(bg, id, true)
	must(t, err)
	for k, v := range map[string]any{"language": "python", "code": `echo other > "$PWD/landed"`, "files": []string{}, "timeout": 31, "sandbox": "online"} {
		changed := map[string]any{}
		for kk, vv := range base {
			changed[kk] = vv
		}
		changed[k] = v
		if k == "language" {
			changed["code"] = `open("landed","w").write("py")`
		}
		if other := ask(changed); other == id {
			t.Errorf("changing %s reused approval %s", k, id)
		}
	}
	if b.runs.Load() != 0 {
		t.Fatalf("%d runs before the approved call", b.runs.Load())
	}
	if _, out := b.run(t, base); out.IsError {
		t.Fatalf("the approved call: %+v", out)
	}
	if data, _ := os.ReadFile(filepath.Join(b.ws, "landed")); string(data) != "ok\n" || b.runs.Load() != 1 {
		t.Errorf("landed %q after %d runs", data, b.runs.Load())
	}
	if again := ask(base); again == id {
		t.Errorf("approval %s was used twice", id)
	}
}

// The isolated tier's escapes, tried through run_code in the default
// sandbox: none gets out of it.
func TestRunCodeEscapesFail(t *testing.T) {
	t.Setenv("HUTCH_TEST_SECRET", "s3cr3t-in-the-parent")
	b := newCodeBed(t, permission.Config{Mode: permission.Auto}, false)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	must(t, os.WriteFile(secret, []byte("TOPSECRET"), 0o644))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HOSTSERVICE"))
			c.Close()
		}
	}()
	sock := filepath.Join(b.ws, "s.sock")
	ul, err := net.Listen("unix", sock)
	must(t, err)
	defer ul.Close()
	go func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HOSTSERVICE"))
			c.Close()
		}
	}()
	py := func(body string) map[string]any { return map[string]any{"language": "python", "code": body} }
	sh := func(body string) map[string]any { return map[string]any{"language": "shell", "code": body} }
	connect := func(family, addr string) string {
		return fmt.Sprintf(`
import socket
try:
    s = socket.socket(socket.%s, socket.SOCK_STREAM); s.settimeout(2); s.connect(%s); print(s.recv(20).decode())
except OSError as e:
    print("refused", e)`, family, addr)
	}
	for _, c := range []struct {
		name string
		args map[string]any
		leak string // must not be in the output
	}{
		{"host file outside the policy", sh("cat " + secret + " 2>&1; true"), "TOPSECRET"},
		{"host file by .. from the run dir", sh(`cat "$RUN_DIR/../../$(basename ` + outside + `)/secret" 2>&1; true`), "TOPSECRET"},
		{"parent's environment", sh("env; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'; true"), "s3cr3t-in-the-parent"},
		{"host service by IP", py(connect("AF_INET", fmt.Sprintf(`("127.0.0.1", %d)`, port))), "HOSTSERVICE"},
		{"host service by name", py(connect("AF_INET", fmt.Sprintf(`("localhost", %d)`, port))), "HOSTSERVICE"},
		{"host service over IPv6", py(connect("AF_INET6", fmt.Sprintf(`("::1", %d)`, port))), "HOSTSERVICE"},
		{"host unix socket", py(connect("AF_UNIX", strconv.Quote(sock))), "HOSTSERVICE"},
		{"write the project", sh("echo x > " + filepath.Join(b.ws, "w") + " 2>&1; echo x > /etc/hutch-w 2>&1; true"), "never"},
		{"write the project through a link", sh(`ln -s ` + filepath.Join(b.ws, "data.csv") + ` "$RUN_DIR/l"; echo LINKED >> "$RUN_DIR/l" 2>&1; true`), "never"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, out := b.run(t, c.args)
			if out.IsError {
				t.Fatalf("run: %+v", out)
			}
			if strings.Contains(r.Stdout+r.Stderr, c.leak) {
				t.Errorf("escaped: %q %q", r.Stdout, r.Stderr)
			}
			if strings.TrimSpace(r.Stdout+r.Stderr) == "" && c.leak != "never" {
				t.Errorf("the attempt printed nothing: did it run? %+v", r)
			}
		})
	}
	for _, p := range []string{filepath.Join(b.ws, "w"), "/etc/hutch-w"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(b.ws, "data.csv")); strings.Contains(string(data), "LINKED") {
		t.Error("the project was written through a link in the run dir")
	}

	// Bombs and floods end with the call, and nothing outlives it.
	for _, c := range []struct {
		name string
		args map[string]any
		ok   func(tool.CodeResult) bool
	}{
		{"fork bomb", map[string]any{"language": "shell", "code": "b() { b | b & }; b; sleep 5", "timeout": 3},
			func(r tool.CodeResult) bool { return r.TimedOut || r.Limit == "pids" }},
		{"memory bomb", py("x = bytearray(2 << 30); print('ALLOCATED')"),
			func(r tool.CodeResult) bool { return r.ExitCode != 0 && !strings.Contains(r.Stdout, "ALLOCATED") }},
		{"output flood", map[string]any{"language": "shell", "code": "yes flood", "timeout": 2},
			func(r tool.CodeResult) bool { return r.TimedOut && len(r.Stdout) <= tool.MaxShellChars*4 }},
		{"child outliving the timeout", map[string]any{"language": "shell", "code": "setsid sleep 987.654 & sleep 60", "timeout": 1},
			func(r tool.CodeResult) bool { return r.TimedOut }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, out := b.run(t, c.args)
			if out.IsError || !c.ok(r) {
				t.Errorf("%s: %+v", c.name, out.Text[:min(len(out.Text), 400)])
			}
		})
	}
	if pid := testenv.FindProcess("987.654"); pid != 0 {
		t.Errorf("a child outlived its run_code call: pid %d", pid)
	}
}

// A call whose only writable path is its own run directory keeps no
// protected paths there (the directory is hutch's scratch, removed after
// the call, and protecting it would take every call through a supervised
// session); a writable mount keeps them, in the mount and in the run
// directory alike.
func TestRunCodeProtectsOnlyWhatOutlivesTheCall(t *testing.T) {
	b := newCodeBed(t, permission.Config{Mode: permission.Auto}, false)
	var last atomic.Pointer[policy.Policy]
	run := b.opts.Run
	b.opts.Run = func(ctx context.Context, p policy.Policy, cmd sandbox.Command) (sandbox.Result, error) {
		last.Store(&p)
		return run(ctx, p, cmd)
	}
	plant := `cd "$RUN_DIR"; for p in .bashrc .vscode/settings.json .git/hooks/pre-commit; do
  mkdir -p "$(dirname "$p")" 2>/dev/null; echo x > "$p" 2>/dev/null && echo "made $p"; done
[ -d out ] && { echo x > out/.bashrc 2>/dev/null && echo "made out/.bashrc"; }; true`
	b.ts = toolsetWith(t, tool.Options{Sandbox: b.ts.Sandbox(), Code: &b.opts}, permission.Config{Mode: permission.Auto})
	r, out := b.run(t, map[string]any{"language": "shell", "code": plant})
	if out.IsError || strings.Count(r.Stdout, "made ") != 3 {
		t.Errorf("the run directory alone: %q %+v", r.Stdout, out)
	}
	if p := last.Load(); p == nil || len(p.Protected()) != 0 {
		t.Errorf("the run directory alone is protected: %v", p)
	}
	rw := t.TempDir()
	b.opts.Mounts = map[string]tool.Mount{"out": {Path: rw, Writable: true}}
	b.ts = toolsetWith(t, tool.Options{Sandbox: b.ts.Sandbox(), Code: &b.opts}, permission.Config{Mode: permission.Auto})
	r, out = b.run(t, map[string]any{"language": "shell", "code": plant})
	if out.IsError || strings.Contains(r.Stdout, "made out/.bashrc") {
		t.Errorf("a writable mount: %q %+v", r.Stdout, out)
	}
	if _, err := os.Stat(filepath.Join(rw, ".bashrc")); err == nil {
		t.Error("a protected path was made in a writable mount")
	}
	if p := last.Load(); p == nil || len(p.Protected()) == 0 {
		t.Errorf("a writable mount is not protected: %v", p)
	}
}

// Mounts appear under $RUN_DIR: a read-only one can be read and not
// changed, a writable one changed; what is in them is never returned as
// written (the walk does not follow their links); a name that is not one
// plain path component is refused.
func TestRunCodeMounts(t *testing.T) {
	b := newCodeBed(t, permission.Config{Mode: permission.Auto}, false)
	ro, rw := t.TempDir(), t.TempDir()
	must(t, os.WriteFile(filepath.Join(ro, "t.txt"), []byte("template"), 0o644))
	b.opts.Mounts = map[string]tool.Mount{"templates": {Path: ro}, "out": {Path: rw, Writable: true}}
	b.ts = toolsetWith(t, tool.Options{Sandbox: b.ts.Sandbox(), Code: &b.opts}, permission.Config{Mode: permission.Auto})
	r, out := b.run(t, map[string]any{"language": "shell", "code": `cd "$RUN_DIR"; cat templates/t.txt; echo
echo x > templates/new 2>/dev/null && echo RO-WRITTEN; echo made > out/made.txt; true`})
	if out.IsError || r.Stdout != "template\n" {
		t.Fatalf("mounts: %+v", out)
	}
	if _, err := os.Stat(filepath.Join(ro, "new")); err == nil {
		t.Error("a read-only mount was written")
	}
	if data, _ := os.ReadFile(filepath.Join(rw, "made.txt")); string(data) != "made\n" {
		t.Errorf("the writable mount: %q", data)
	}
	if len(out.Files) != 0 {
		t.Errorf("files in mounts came back as written: %+v", out.Files)
	}
	for _, name := range []string{".hidden", "a/b", "..", ""} {
		o := b.opts
		o.Mounts = map[string]tool.Mount{name: {Path: ro}}
		if _, err := tool.New(tool.Options{Sandbox: b.ts.Sandbox(), Gate: newGate(t, permission.Config{Mode: permission.Auto}), Code: &o}); !errors.Is(err, tool.ErrConfig) {
			t.Errorf("mount name %q: %v, want ErrConfig", name, err)
		}
	}
}
