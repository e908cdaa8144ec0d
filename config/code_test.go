package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/server"
	"github.com/hutchsandbox/hutch/tool"
)

// needIsolated skips a test that builds run_code sandboxes on a host
// without the isolated tier.
func needIsolated(t *testing.T) {
	t.Helper()
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "the isolated tier: %v", err)
	}
}

// settingsFile writes body as dir/hutch.yaml and loads it.
func settingsFile(t *testing.T, dir, body string) (config.Settings, error) {
	t.Helper()
	p := filepath.Join(dir, "hutch.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return config.Load(p)
}

// oneLine reports whether err's message is a single line.
func oneLine(err error) bool { return !strings.Contains(err.Error(), "\n") }

// Every start-up check of the code settings is a one-line error matching
// ErrConfig (or policy.ErrConfig) that names the problem.
func TestCodeSettingsStartUpChecks(t *testing.T) {
	needIsolated(t)
	for name, body := range map[string]string{
		"bad sandbox name":          "code: {sandbox: Project}\nsandboxes: {Project: {read: [.]}}\n",
		"unknown extends name":      "code: {sandbox: a}\nsandboxes: {a: {extends: nosuch}}\n",
		"extends cycle":             "code: {sandbox: a}\nsandboxes: {a: {extends: b}, b: {extends: c}, c: {extends: a}}\n",
		"self extends":              "code: {sandbox: a}\nsandboxes: {a: {extends: a}}\n",
		"default names no sandbox":  "code: {sandbox: nosuch}\nsandboxes: {a: {read: [.]}}\n",
		"escalation names none":     "code: {sandbox: a, escalate_to: [nosuch]}\nsandboxes: {a: {read: [.]}}\n",
		"escalation twice":          "code: {sandbox: a, escalate_to: [b, b]}\nsandboxes: {a: {read: [.]}, b: {read: [.]}}\n",
		"escalation is the default": "code: {sandbox: a, escalate_to: [a]}\nsandboxes: {a: {read: [.]}}\n",
		"code without sandbox":      "code: {escalate_to: [a]}\nsandboxes: {a: {read: [.]}}\n",
		"sandboxes without code":    "sandboxes: {a: {read: [.]}}\n",
		"policy does not normalize": "code: {sandbox: a}\nsandboxes: {a: {network: {allow: []}}}\n",
		"dir not readable":          "code: {sandbox: a}\nsandboxes: {a: {dir: /srv/elsewhere}}\n",
		"missing policy file":       "code: {sandbox: a}\nsandboxes: {a: ./missing.yaml}\n",
		"virtual tier":              "tier: virtual\ncode: {sandbox: a}\nsandboxes: {a: {read: [.]}}\n",
		"local tier":                "tier: local\nroot: /tmp\ncode: {sandbox: a}\nsandboxes: {a: {read: [.]}}\n",
		"mount without path":        "code: {sandbox: a, mounts: {m: {rw: true}}}\nsandboxes: {a: {read: [.]}}\n",
	} {
		t.Run(name, func(t *testing.T) {
			s, err := settingsFile(t, t.TempDir(), body)
			if err != nil {
				t.Fatal(err)
			}
			b, err := config.New(bg, s)
			if err == nil {
				b.Close()
				t.Fatal("New accepted the settings")
			}
			if !errors.Is(err, config.ErrConfig) && !errors.Is(err, policy.ErrConfig) || !oneLine(err) {
				t.Errorf("New = %q; want one line matching ErrConfig", err)
			}
		})
	}
}

// The messages name the problem: which name, and what to do.
func TestCodeSettingsErrorsNameTheProblem(t *testing.T) {
	needIsolated(t)
	for body, want := range map[string]string{
		"code: {sandbox: a}\nsandboxes: {a: {extends: b}, b: {extends: a}}\n":           "cycle (a -> b -> a)",
		"code: {sandbox: a}\nsandboxes: {a: {extends: nosuch}}\n":                       `extends "nosuch", which is neither a sandbox nor a policy file`,
		"code: {sandbox: a, escalate_to: [a]}\nsandboxes: {a: {read: [.]}}\n":           `escalate_to names "a", the default sandbox`,
		"code: {sandbox: x}\nsandboxes: {a: {read: [.]}}\n":                             `sandbox "x" names no sandbox`,
		"tier: virtual\ncode: {sandbox: a}\nsandboxes: {a: {read: [.]}}\n":              "the virtual tier cannot run code",
		"tier: local\nroot: /tmp\ncode: {sandbox: a}\nsandboxes: {a: {read: [.]}}\n":    "the local tier has no policy to enforce",
		"code: {sandbox: Bad}\nsandboxes: {Bad: {read: [.]}}\n":                         `sandbox name "Bad"`,
		"code: {sandbox: a}\nsandboxes: {a: {wirte: [.]}}\n":                            `line 2: unknown key "wirte"`,
		"code: {sandbox: a, escalate_to: [b, b]}\nsandboxes: {a: {}, b: {read: [.]}}\n": `"b" twice`,
		"code: {sandbox: a, escalate_to: [b]}\nsandboxes: {a: {}, b: ~}\n":              `sandbox "b" is empty`,
		"code: {sandbox: a}\nsandboxes:\n  a:\n":                                        `sandbox "a" is empty`,
	} {
		s, err := settingsFile(t, t.TempDir(), body)
		if err == nil {
			var b *config.Built
			if b, err = config.New(bg, s); err == nil {
				b.Close()
			}
		}
		if err == nil || !strings.Contains(err.Error(), want) || !oneLine(err) {
			t.Errorf("%q: %v; want one line with %q", body, err, want)
		}
	}
}

// Relative paths of inline sandboxes, of policy files they name and of
// mounts are relative to the settings file's directory, not the current
// one; the tier becomes isolated.
func TestCodeRelativePathsAreTheSettingsFiles(t *testing.T) {
	needIsolated(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub", "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	writePolicy(t, filepath.Join(dir, "sub", "wide.yaml"), "write: [src]\n")
	s, err := settingsFile(t, dir, "code:\n  sandbox: a\n  escalate_to: [b]\n  mounts: {t: sub, o: {path: out, rw: true}}\n"+
		"sandboxes:\n  a: {read: [sub], dir: sub}\n  b: sub/wide.yaml\n")
	if err != nil {
		t.Fatal(err)
	}
	b := open(t, s)
	c := b.Tools.Code
	if c == nil {
		t.Fatal("no code options")
	}
	sub := filepath.Join(dir, "sub")
	if !slices.Contains(c.Default.Read, sub) || c.Default.Dir != sub {
		t.Errorf("default read %v dir %q; want %s", c.Default.Read, c.Default.Dir, sub)
	}
	if w := c.Escalations["b"].Write; !slices.Equal(w, []string{filepath.Join(sub, "src")}) {
		t.Errorf("b writes %v; want %s/src (relative to the policy file)", w, sub)
	}
	if m := c.Mounts; m["t"].Path != sub || m["t"].Writable || m["o"].Path != filepath.Join(dir, "out") || !m["o"].Writable {
		t.Errorf("mounts %+v", m)
	}
	if !slices.ContainsFunc(c.Languages, func(l tool.Language) bool { return l.Name == "shell" }) {
		t.Errorf("languages %+v; want shell among them", c.Languages)
	}
	if b.Tools.Sandbox == nil {
		t.Error("no sandbox")
	}
}

// extends names another sandbox (which wins over a file of that name) or
// a policy file relative to the settings file.
func TestCodeExtendsByNameAndByFile(t *testing.T) {
	needIsolated(t)
	dir := t.TempDir()
	writePolicy(t, filepath.Join(dir, "base.yaml"), "read: [/srv]\n")
	writePolicy(t, filepath.Join(dir, "a"), "read: [/opt]\n") // a file named like the sandbox: the sandbox wins
	s, err := settingsFile(t, dir, "code: {sandbox: a, escalate_to: [b, c]}\n"+
		"sandboxes:\n  a: {read: [/var]}\n  b: {extends: a, write: [.]}\n  c: {extends: base.yaml, write: [.]}\n")
	if err != nil {
		t.Fatal(err)
	}
	c := open(t, s).Tools.Code
	b := c.Escalations["b"]
	if !slices.Contains(b.Read, "/var") || slices.Contains(b.Read, "/opt") || !slices.Equal(b.Write, []string{dir}) {
		t.Errorf("b = read %v write %v; want a's /var (not the file a's /opt) and %s", b.Read, b.Write, dir)
	}
	if cc := c.Escalations["c"]; !slices.Contains(cc.Read, "/srv") || !slices.Contains(cc.Read, "/usr") {
		t.Errorf("c reads %v; want base.yaml's /srv over the default's", cc.Read)
	}
	if got := slices.Sorted(maps.Keys(c.Escalations)); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("escalations %v", got)
	}
}

// The example modes in docs/code-modes load and build on this host, with
// the default and escalation sandboxes they say.
func TestCodeModeExamplesBuild(t *testing.T) {
	needIsolated(t)
	for file, want := range map[string][]string{
		"ask.yaml":              {"project", "online", "workspace"},
		"workspace.yaml":        {"workspace", "online"},
		"skip-permissions.yaml": {"wide"},
	} {
		path := filepath.Join("..", "docs", "code-modes", file)
		s, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if s.Code.Sandbox != want[0] || s.Mode != "ask" {
			t.Errorf("%s: default %q mode %q; want %q, ask", file, s.Code.Sandbox, s.Mode, want[0])
		}
		b := open(t, s)
		if got := slices.Sorted(maps.Keys(b.Tools.Code.Escalations)); !slices.Equal(got, want[1:]) && !(len(got) == 0 && len(want) == 1) {
			t.Errorf("%s: escalations %v; want %v", file, got, want[1:])
		}
		abs, _ := filepath.Abs(filepath.Dir(path))
		if d := b.Tools.Code.Default; !d.CanRead(abs) && !slices.Contains(d.Read, abs) {
			t.Errorf("%s: the default sandbox cannot read the settings file's directory %s: %v", file, abs, d.Read)
		}
		for _, n := range b.Notes {
			t.Logf("%s: note: %s", file, n)
		}
	}
}

func writePolicy(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// On the container tier each run_code call runs in a fresh container
// mapped from its sandbox's policy: the project is read-only there, the
// run directory writable, and the files written come back.
func TestCodeOnTheContainerTier(t *testing.T) {
	image := os.Getenv("HUTCH_TEST_IMAGE")
	if image == "" {
		image = "hutch-test-busybox:latest"
	}
	if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", image).CombinedOutput(); err != nil {
		testenv.Missing(t, "docker with the image %s (scripts/docker-up.sh): %v %s", image, err, strings.TrimSpace(string(out)))
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "data.txt"), []byte("from the project\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// online has a host allow-list, which a container cannot enforce: it
	// is left out, with a note, never run with a wider or narrower network.
	body := fmt.Sprintf("tier: container\nimage: %s\nmode: ask\ncode: {sandbox: project, escalate_to: [online]}\n"+
		"sandboxes: {project: {read: [%q], dir: %q}, online: {extends: project, network: {allow: [example.com]}}}\n", image, ws, ws)
	s, err := settingsFile(t, t.TempDir(), body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := config.New(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(b.Tools.Code.Escalations) != 0 || !slices.ContainsFunc(b.Notes, func(n string) bool { return strings.Contains(n, `"online" is left out`) }) {
		t.Errorf("an escalation the container cannot run: %d escalations, notes %q", len(b.Tools.Code.Escalations), b.Notes)
	}
	// The same sandbox as the default is an error.
	s, err = settingsFile(t, t.TempDir(), strings.Replace(body, "code: {sandbox: project, escalate_to: [online]}", "code: {sandbox: online}", 1))
	if err != nil {
		t.Fatal(err)
	}
	if b2, err := config.New(bg, s); err == nil || !strings.Contains(err.Error(), "allow-lists are enforced by the isolated tier only") {
		if b2 != nil {
			b2.Close()
		}
		t.Errorf("a default sandbox the container cannot run: %v", err)
	}
	ts, err := tool.New(b.Tools)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ts.Call(bg, "run_code", json.RawMessage(`{"language": "shell", "code": "cat data.txt; echo made > \"$RUN_DIR/out.txt\"; touch data.txt 2>/dev/null && echo CHANGED; true"}`))
	if err != nil {
		t.Fatal(err)
	}
	var r tool.CodeResult
	if out.IsError || json.Unmarshal([]byte(out.Text), &r) != nil {
		t.Fatalf("run_code on the container tier: %+v", out)
	}
	if r.Stdout != "from the project\n" || len(out.Files) != 1 || string(out.Files[0].Data) != "made\n" {
		t.Errorf("stdout %q, files %+v", r.Stdout, out.Files)
	}
}

// Declared packages are installed when the settings are built (and by
// InstallCodePackages, which finds them in the cache then), and every run
// imports them; relative paths are the settings file's. On the container
// tier they are a configuration error.
func TestCodePackagesInstalledAtStartUp(t *testing.T) {
	needIsolated(t)
	dir := t.TempDir()
	wheels := testenv.Wheel(t, "hutchcfgdemo", "WORD = 'installed'\n")
	if err := os.Rename(wheels, filepath.Join(dir, "wheels")); err != nil {
		t.Fatal(err)
	}
	body := "mode: auto\ncode: {sandbox: a, packages: {python: [hutchcfgdemo], pip_index: wheels, cache: cache}}\nsandboxes: {a: {}}\n"
	s, err := settingsFile(t, dir, body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := config.New(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	dirs, err := config.InstallCodePackages(bg, s)
	if err != nil || len(dirs) != 1 || !strings.HasPrefix(dirs[0], filepath.Join(dir, "cache")) {
		t.Fatalf("InstallCodePackages: %v %v", dirs, err)
	}
	ts, err := tool.New(b.Tools)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ts.Call(bg, "run_code", json.RawMessage(`{"language": "python", "code": "import hutchcfgdemo; print(hutchcfgdemo.WORD)"}`))
	if err != nil || out.IsError || !strings.Contains(out.Text, `"stdout":"installed\n"`) {
		t.Errorf("importing a declared package: %+v %v", out, err)
	}
	s, err = settingsFile(t, t.TempDir(), "tier: container\nimage: x\ncode: {sandbox: a, packages: {python: [x]}}\nsandboxes: {a: {}}\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.InstallCodePackages(bg, s); !errors.Is(err, config.ErrConfig) || !strings.Contains(err.Error(), "isolated tier only") {
		t.Errorf("packages on the container tier: %v", err)
	}
}

// run_code on the remote tier: each call is a session of its own on a
// real hutch serve (the isolated tier, on loopback), narrowed by its
// sandbox; the run directory goes there and its new files come back; a
// sandbox wider than the server is refused with the server's reason; a
// sandbox naming paths (which would be this machine's) is a start-up
// error.
func TestCodeOnTheRemoteTier(t *testing.T) {
	needIsolated(t)
	served := t.TempDir()
	srvSettings := config.Settings{Tier: "isolated", Isolation: ptr(policy.Default().Extend(policy.Policy{Write: []string{served}}))}
	open, err := config.ServeOpener(srvSettings, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	token := strings.Repeat("t", 40)
	ln, err := server.ListenAddr("127.0.0.1:0", server.Config{Open: open, Token: token}, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(bg)
	defer stop()
	go func() { _ = server.Serve(ctx, ln, server.Config{Open: open, Token: token}) }()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("tier: remote\nserver: http://%s\nserver_token_file: %s\nmode: ask\n", ln.Addr(), filepath.Join(dir, "token"))
	s, err := settingsFile(t, dir, head+"code: {sandbox: box, escalate_to: [online]}\nsandboxes: {box: {}, online: {network: all}}\n")
	if err != nil {
		t.Fatal(err)
	}
	s.Asker = func(context.Context, permission.Request) (bool, error) { return true, nil }
	b, err := config.New(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ts, err := tool.New(b.Tools)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ts.Call(bg, "run_code", json.RawMessage(`{"language": "shell", "code": "echo ran; echo made > \"$RUN_DIR/out.txt\""}`))
	if err != nil {
		t.Fatal(err)
	}
	var r tool.CodeResult
	if out.IsError || json.Unmarshal([]byte(out.Text), &r) != nil || r.Stdout != "ran\n" || len(out.Files) != 1 || string(out.Files[0].Data) != "made\n" {
		t.Fatalf("run_code on the remote tier: %+v", out)
	}
	if ents, err := os.ReadDir(served); err != nil || len(ents) != 0 {
		t.Errorf("the run's copy is left on the server: %v %v", ents, err)
	}
	out, err = ts.Call(bg, "run_code", json.RawMessage(`{"language": "shell", "code": "true", "sandbox": "online", "reason": "to fetch"}`))
	if err != nil || !out.IsError || !strings.Contains(out.Text, "network all") {
		t.Errorf("an escalation wider than the server: %+v, %v", out, err)
	}
	s, err = settingsFile(t, t.TempDir(), head+"code: {sandbox: box}\nsandboxes: {box: {read: [/srv]}}\n")
	if err != nil {
		t.Fatal(err)
	}
	if b2, err := config.New(bg, s); err == nil || !strings.Contains(err.Error(), "the paths are the server's") || !oneLine(err) {
		if b2 != nil {
			b2.Close()
		}
		t.Errorf("a sandbox with paths: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }
