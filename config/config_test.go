package config_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/internal/cfgerr"
	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
	"github.com/hutchsandbox/hutch/sandbox/container"
	"github.com/hutchsandbox/hutch/tool"
)

var bg = context.Background()

// open is New for settings that must be accepted; the result is closed
// when the test ends.
func open(t *testing.T, s config.Settings) *config.Built {
	t.Helper()
	b, err := config.New(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestLoadReadsTheYAMLKeys(t *testing.T) {
	p := filepath.Join(t.TempDir(), "good.yaml")
	body := "tier: local\nroot: /tmp\nmode: auto\nallow: [write]\nfetch_allow: [example.com]\nsearch_url: http://s\n" +
		"store: a.db\ndecision_ttl: 1h\naudit: a.jsonl\nrules: r.yaml\nhttp: :1\nhttp_token_file: t\nhttp_no_auth: true\npolicy: p.yaml\nimage: img\nruntime: podman\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := config.Load(p)
	want := config.Settings{Tier: "local", Root: "/tmp", Mode: "auto", Allow: []string{"write"}, FetchAllow: []string{"example.com"},
		SearchURL: "http://s", Store: "a.db", DecisionTTL: "1h", Audit: "a.jsonl", Rules: "r.yaml", HTTP: ":1", HTTPTokenFile: "t", HTTPNoAuth: true,
		PolicyFile: "p.yaml", Image: "img", Runtime: "podman", Dir: filepath.Dir(p), File: p}
	if err != nil || !reflect.DeepEqual(s, want) {
		t.Errorf("Load = %+v, %v; want %+v", s, err, want)
	}
}

// A settings file is read strictly: a misspelt key is an error naming
// the file, not a setting silently left at its default.
func TestLoadRefusesMalformedFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"unknown key": "tier: local\nshel: yes\n",
		"two docs":    "tier: local\n---\ntier: virtual\n",
		"wrong type":  "allow: write\n",
		"not yaml":    "{{{",
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := config.Load(p)
		if !errors.Is(err, config.ErrConfig) || !strings.Contains(fmt.Sprint(err), p) || strings.Contains(fmt.Sprint(err), "\n") {
			t.Errorf("%s: %v; want one line matching config.ErrConfig naming %s", name, err, p)
		}
	}
	if _, err := config.Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, config.ErrConfig) || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

// Every wrong setting is refused with one line that names it, matching
// the sentinel of the package that found it (and so cfgerr.ErrAny).
func TestNewRefusesBadSettings(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "a.db")
	pol := policy.Default()
	cases := []struct {
		name string
		s    config.Settings
		kind error
		want string
	}{
		{"bad mode", config.Settings{Mode: "yolo"}, permission.ErrConfig, "unknown permission mode"},
		{"bad allow", config.Settings{Allow: []string{"teleport"}}, permission.ErrConfig, "unknown capability"},
		{"approve without store", config.Settings{Mode: "approve"}, permission.ErrConfig, "--store"},
		{"decision ttl without store", config.Settings{DecisionTTL: "1h"}, config.ErrConfig, "applies to an approval store"},
		{"decision ttl not a duration", config.Settings{Store: store, DecisionTTL: "soon"}, config.ErrConfig, "not a duration"},
		{"negative decision ttl", config.Settings{Store: store, DecisionTTL: "-1h"}, permission.ErrConfig, "is negative"},
		{"bad tier", config.Settings{Tier: "cloud"}, sandbox.ErrConfig, `unknown tier "cloud"`},
		{"bad search url", config.Settings{SearchURL: "ftp://x"}, config.ErrConfig, "SearXNG"},
		{"bad fetch host", config.Settings{FetchAllow: []string{"http://x/y"}}, tool.ErrConfig, "http://x/y"},
		{"policy file for the virtual tier", config.Settings{PolicyFile: "p.yaml"}, config.ErrConfig, "applies to the isolated or container tier, not virtual"},
		{"policy flags for the local tier", config.Settings{Tier: "local", Root: dir, Isolation: &pol}, config.ErrConfig, "not local"},
		{"image for the local tier", config.Settings{Tier: "local", Root: dir, Image: "x"}, config.ErrConfig, "apply to the container tier, not local"},
		{"container flags for the isolated tier", config.Settings{Tier: "isolated", Container: &container.Options{}}, config.ErrConfig, "not isolated"},
		{"container without image", config.Settings{Tier: "container"}, sandbox.ErrConfig, "needs an image"},
		{"local without root", config.Settings{Tier: "local"}, config.ErrConfig, "needs --root DIR"},
		{"local rooted at /", config.Settings{Tier: "local", Root: "/"}, config.ErrConfig, "refusing --root /"},
		{"missing policy file", config.Settings{Tier: "isolated", PolicyFile: filepath.Join(dir, "nope.yaml")}, cfgerr.ErrAny, "nope.yaml"},
		{"missing rules file", config.Settings{Rules: filepath.Join(dir, "rules.yaml")}, permission.ErrConfig, "rules file"},
		{"audit log in a missing directory", config.Settings{Audit: filepath.Join(dir, "no", "audit.jsonl")}, config.ErrConfig, "audit log"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := config.New(bg, c.s)
			if err == nil {
				b.Close()
				t.Fatal("accepted")
			}
			if !errors.Is(err, c.kind) || !errors.Is(err, cfgerr.ErrAny) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%v; want one line with %q matching %v", err, c.want, c.kind)
			}
		})
	}
}

// The store's path is made absolute: the approving command a front end
// prints must work from any directory.
func TestRelativeStoreIsMadeAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	b := open(t, config.Settings{Mode: "approve", Store: "rel.db"})
	if !filepath.IsAbs(b.StorePath) || filepath.Base(b.StorePath) != "rel.db" {
		t.Errorf("StorePath %q: the approving command must work from any directory", b.StorePath)
	}
}

// The local tier needs an explicit root: without one, "hutch mcp --tier
// local" would root the sandbox at the working directory MCP clients
// choose (Claude Desktop starts servers in "/"). Origin: security review.
func TestLocalTierNeedsRoot(t *testing.T) {
	t.Chdir("/")
	b, err := config.New(bg, config.Settings{Tier: "local", Mode: "read_only"})
	if err == nil {
		defer b.Close()
		t.Fatalf("local tier opened without --root; its root is %q", b.Tools.Sandbox.Root())
	}
}

// New builds what the settings name, and only that: fetch and search
// only when configured, the tier asked for, the mode asked for.
func TestNewBuildsWhatIsAsked(t *testing.T) {
	dir := t.TempDir()
	b := open(t, config.Settings{})
	if _, inMemory := b.Tools.Sandbox.(sandbox.InMemory); !inMemory || b.Tools.Gate.Mode() != permission.ReadOnly ||
		b.Tools.Fetcher != nil || b.Tools.Search != nil || b.StorePath != "" || len(b.Notes) != 0 {
		t.Errorf("zero settings built %+v; want a virtual sandbox in read_only mode and nothing else", b)
	}
	b = open(t, config.Settings{Tier: "local", Root: dir, Mode: "auto", FetchAllow: []string{"example.com"}, SearchURL: "http://127.0.0.1:9"})
	if b.Tools.Sandbox.Root() != dir || b.Tools.Gate.Mode() != permission.Auto || b.Tools.Fetcher == nil || b.Tools.Search == nil {
		t.Errorf("local auto with fetch and search built %+v", b)
	}
}

// In ask mode the gate asks the Asker given; in other modes the Asker is
// never called.
func TestAskerDecidesInAskModeOnly(t *testing.T) {
	for _, c := range []struct {
		mode    string
		asked   bool
		allowed bool
	}{{"ask", true, true}, {"read_only", false, false}, {"auto", false, true}} {
		asked := false
		b := open(t, config.Settings{Mode: c.mode, Asker: func(context.Context, permission.Request) (bool, error) {
			asked = true
			return true, nil
		}})
		d, err := b.Tools.Gate.Check(bg, permission.Request{Capability: permission.Write, Detail: "a.txt"})
		if err != nil || asked != c.asked || d.Allowed != c.allowed {
			t.Errorf("mode %s: asked %v, allowed %v (%v); want asked %v, allowed %v", c.mode, asked, d.Allowed, err, c.asked, c.allowed)
		}
	}
}

// A rules file decides before the mode, and an ask rule asks the
// settings' Asker in any mode.
func TestRulesFileDecidesBeforeTheMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("rules:\n  - allow: write a.txt\n  - ask: write b.txt\n  - deny: write c.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"read_only", "auto"} {
		asked := 0
		b := open(t, config.Settings{Mode: mode, Rules: path, Asker: func(context.Context, permission.Request) (bool, error) {
			asked++
			return true, nil
		}})
		for p, want := range map[string]bool{"a.txt": true, "b.txt": true, "c.txt": false} {
			d, err := b.Tools.Gate.Check(bg, permission.Request{Capability: permission.Write, Detail: p, Paths: []string{p}})
			if err != nil || d.Allowed != want || d.Rule == "" {
				t.Errorf("%s %s: %+v %v, want allowed %v by a rule", mode, p, d, err, want)
			}
		}
		if asked != 1 {
			t.Errorf("%s: asked %d times, want once (b.txt)", mode, asked)
		}
	}
}

// The audit log New opens receives the gate's decisions, and Close
// releases it.
func TestAuditLogRecordsDecisions(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	b, err := config.New(bg, config.Settings{Mode: "auto", Audit: audit})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Tools.Gate.Check(bg, permission.Request{Capability: permission.Write, Detail: "a.txt"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(audit); err != nil || !strings.Contains(string(data), "a.txt") {
		t.Errorf("audit log holds %q (%v); want the decision on a.txt", data, err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// openFiles counts this process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(fds)
}

// A New that fails at a later step closes what the earlier ones opened
// (the audit log, the sandbox): nothing stays open.
func TestFailedNewLeaksNothing(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	audit := filepath.Join(state, "audit.jsonl")
	// Warm up: the runtime's poller and the like open once, on first use.
	open(t, config.Settings{Tier: "local", Root: dir, Audit: audit}).Close()
	for name, s := range map[string]config.Settings{
		"the gate fails after the audit log":   {Tier: "local", Root: dir, Audit: audit, Mode: "approve"},
		"the tier fails after the audit log":   {Tier: "container", Audit: audit},
		"fetch fails after the sandbox":        {Tier: "local", Root: dir, Audit: audit, FetchAllow: []string{"http://x/y"}},
		"search fails after the sandbox":       {Tier: "local", Root: dir, Audit: audit, SearchURL: "ftp://x"},
		"the store's TTL fails after its open": {Tier: "local", Root: dir, Store: filepath.Join(state, "a.db"), DecisionTTL: "-1h"},
	} {
		before := openFiles(t)
		if b, err := config.New(bg, s); err == nil {
			b.Close()
			t.Errorf("%s: accepted", name)
			continue
		}
		if after := openFiles(t); after != before {
			t.Errorf("%s: %d files open before New, %d after it failed", name, before, after)
		}
	}
}

// The approval store, the audit log and the rules file must lie outside
// every path the agent's tools or sandboxes may change, or the agent
// could approve its own requests (and name the person who did), erase
// its traces or widen its rules; a settings file there gets a note. Found
// by a red-team pass: edit_file on the store in the local tier's root,
// and run_code's default sandbox writing the project, approved calls.
func TestGoverningFilesOutsideWritablePaths(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	os.Symlink(root, filepath.Join(state, "link-to-root"))
	for _, c := range []struct {
		name string
		s    config.Settings
		want string // "" when New must accept it
	}{
		{"store in the local root", config.Settings{Tier: "local", Root: root, Mode: "approve", Store: filepath.Join(root, "a.db")}, "approval store"},
		{"store deeper in the local root", config.Settings{Tier: "local", Root: root, Mode: "approve", Store: filepath.Join(root, ".hutch", "a.db")}, "approval store"},
		{"store through a link into the root", config.Settings{Tier: "local", Root: root, Mode: "approve", Store: filepath.Join(state, "link-to-root", "a.db")}, "approval store"},
		{"audit in the local root", config.Settings{Tier: "local", Root: root, Audit: filepath.Join(root, "audit.jsonl")}, "audit log"},
		{"rules in the local root", config.Settings{Tier: "local", Root: root, Rules: filepath.Join(root, "rules.yaml")}, "rules file"},
		{"store in an isolated root", config.Settings{Tier: "isolated", Root: root, Mode: "approve", Store: filepath.Join(root, "a.db")}, "approval store"},
		{"store beside the root", config.Settings{Tier: "local", Root: root, Mode: "approve", Store: filepath.Join(state, "a.db")}, ""},
		{"store in a read-only virtual tier", config.Settings{Mode: "approve", Store: filepath.Join(state, "b.db")}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.want == "rules file" {
				os.WriteFile(c.s.Rules, []byte("rules: []\n"), 0o644)
			}
			b, err := config.New(bg, c.s)
			if err == nil {
				b.Close()
			}
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (!errors.Is(err, config.ErrConfig) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "outside")):
				t.Fatalf("New = %v, want an ErrConfig naming the %s and the fix", err, c.want)
			}
		})
	}
	// A settings file in the project its sandbox writes: a note.
	p := filepath.Join(root, "hutch.yaml")
	os.WriteFile(p, []byte("tier: local\nroot: .\n"), 0o644)
	s, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	s.Root = root
	b := open(t, s)
	defer b.Close()
	if !slices.ContainsFunc(b.Notes, func(n string) bool { return strings.Contains(n, "settings file") }) {
		t.Errorf("notes %q, want one about the settings file", b.Notes)
	}
}
