package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/mcpserver"
	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

var bg = context.Background()

// connect serves settings over the SDK's in-memory transport and returns a
// connected client session.
func connect(t *testing.T, s mcpserver.Settings, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cfg, closeAll, err := mcpserver.Open(bg, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeAll)
	srv, err := mcpserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(bg, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, copts)
	cs, err := client.Connect(bg, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(bg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, tl := range res.Tools {
		n = append(n, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil {
			t.Errorf("%s lacks a description or schema", tl.Name)
		}
	}
	return n
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content items", name, len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content is %T", name, res.Content[0])
	}
	return res, tc.Text
}

func TestListingAndInstructions(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		s     mcpserver.Settings
		tools []string
		instr string
	}{
		{mcpserver.Settings{}, []string{"glob", "read_file"}, "in-memory"},
		{mcpserver.Settings{Mode: "auto"}, []string{"edit_file", "glob", "read_file", "write_file"}, "in-memory"},
		{mcpserver.Settings{Tier: "local", Root: dir}, []string{"glob", "read_file"}, "host machine"},
		{mcpserver.Settings{Tier: "local", Root: dir, Mode: "auto"}, []string{"edit_file", "glob", "read_file", "shell", "write_file"}, dir},
		{mcpserver.Settings{Tier: "local", Root: dir, Allow: []string{"shell"}}, []string{"glob", "read_file", "shell"}, "read_only"},
		{mcpserver.Settings{Tier: "local", Root: dir, Mode: "auto", FetchAllow: []string{"example.com"}, SearchURL: "http://127.0.0.1:9"},
			[]string{"edit_file", "fetch", "glob", "read_file", "shell", "web_search", "write_file"}, "auto"},
	}
	for _, c := range cases {
		cs := connect(t, c.s, nil)
		got := toolNames(t, cs)
		slices.Sort(got)
		if !slices.Equal(got, c.tools) {
			t.Errorf("%+v: tools %v, want %v", c.s, got, c.tools)
		}
		if in := cs.InitializeResult().Instructions; !strings.Contains(in, c.instr) {
			t.Errorf("%+v: instructions %q lack %q", c.s, in, c.instr)
		}
	}
}

func TestToolCalls(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("alpha\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, mcpserver.Settings{Tier: "local", Root: dir, Mode: "auto"}, nil)

	res, text := callTool(t, cs, "read_file", map[string]any{"path": "a.txt"})
	if res.IsError || text != "alpha\n" || res.StructuredContent != nil {
		t.Errorf("read_file: %v %q %v", res.IsError, text, res.StructuredContent)
	}
	res, text = callTool(t, cs, "write_file", map[string]any{"path": "a.txt", "content": "beta\n"})
	if res.IsError {
		t.Fatalf("write_file: %s", text)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(sc), `"ok":true`) {
		t.Errorf("structuredContent %s", sc)
	}
	res, text = callTool(t, cs, "shell", map[string]any{"command": "cat a.txt; exit 2"})
	var sh struct {
		ExitCode int    `json:"exit_code"`
		Stdout   string `json:"stdout"`
	}
	sc, _ = json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(sc, &sh); err != nil || res.IsError || sh.ExitCode != 2 || sh.Stdout != "beta\n" {
		t.Errorf("shell: %s / %s", sc, text)
	}
	res, text = callTool(t, cs, "read_file", map[string]any{"path": "../../etc/passwd"})
	if !res.IsError || !strings.Contains(text, "escapes the sandbox root") {
		t.Errorf("escape: %v %q", res.IsError, text)
	}
	res, text = callTool(t, cs, "glob", map[string]any{"pattern": "*.txt"})
	if res.IsError || !strings.Contains(text, `"files":["a.txt"]`) {
		t.Errorf("glob: %q", text)
	}
	// Unknown tools are a protocol-level error from the SDK, not a crash.
	if _, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "rm_rf", Arguments: map[string]any{}}); err == nil {
		t.Error("calling an unlisted tool succeeded")
	}
}

func TestAskThroughElicitation(t *testing.T) {
	for _, c := range []struct {
		action  string
		allowed bool
	}{{"accept", true}, {"decline", false}, {"cancel", false}} {
		t.Run(c.action, func(t *testing.T) {
			dir := t.TempDir()
			var asked string
			cs := connect(t, mcpserver.Settings{Tier: "local", Root: dir, Mode: "ask"}, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked = r.Params.Message
					return &mcp.ElicitResult{Action: c.action}, nil
				},
			})
			res, text := callTool(t, cs, "write_file", map[string]any{"path": "w.txt", "content": "x"})
			_, statErr := os.Stat(filepath.Join(dir, "w.txt"))
			if !strings.Contains(asked, "write") || !strings.Contains(asked, "w.txt") {
				t.Errorf("the question %q does not say what is asked", asked)
			}
			if c.allowed && (res.IsError || statErr != nil) {
				t.Errorf("accepted write failed: %s", text)
			}
			if !c.allowed && (!res.IsError || !strings.Contains(text, "denied by user") || statErr == nil) {
				t.Errorf("%s: want a denial and no file, got %v %q (file: %v)", c.action, res.IsError, text, statErr)
			}
		})
	}
	t.Run("client cannot elicit", func(t *testing.T) {
		dir := t.TempDir()
		cs := connect(t, mcpserver.Settings{Tier: "local", Root: dir, Mode: "ask"}, nil)
		res, text := callTool(t, cs, "shell", map[string]any{"command": "touch x"})
		if !res.IsError || !strings.Contains(text, "cannot ask the user") {
			t.Errorf("got %v %q", res.IsError, text)
		}
		if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
			t.Error("command ran without asking")
		}
	})
}

var idRE = regexp.MustCompile(`pending as request ([0-9a-f]+)\. A person approves it with: hutch approvals approve ([0-9a-f]+) --store (\S+)`)

func TestApproveAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(t.TempDir(), "approvals.db")
	s := mcpserver.Settings{Tier: "local", Root: dir, Mode: "approve", Store: store}
	args := map[string]any{"path": "deploy.txt", "content": "v2"}

	cs := connect(t, s, nil)
	res, text := callTool(t, cs, "write_file", args)
	m := idRE.FindStringSubmatch(text)
	if !res.IsError || m == nil || m[1] != m[2] || m[3] != store {
		t.Fatalf("approval-required result: %v %q", res.IsError, text)
	}
	// The server restarts; a human approves from another process.
	_ = cs.Close()
	st, err := permission.OpenStore(store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Decide(bg, m[1], true); err != nil {
		t.Fatal(err)
	}
	cs2 := connect(t, s, nil)
	res, text = callTool(t, cs2, "write_file", args)
	if res.IsError {
		t.Fatalf("approved call after restart: %s", text)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "deploy.txt")); string(b) != "v2" {
		t.Fatalf("file holds %q", b)
	}
	// Once only: the same call needs a new approval.
	res, text = callTool(t, cs2, "write_file", args)
	if !res.IsError || !idRE.MatchString(text) || strings.Contains(text, m[1]) {
		t.Fatalf("second identical call: %v %q", res.IsError, text)
	}
}

func TestSettings(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("tier: local\nroot: /tmp\nmode: auto\nallow: [write]\nfetch_allow: [example.com]\n"), 0o644)
	s, err := mcpserver.LoadSettings(good)
	if err != nil || s.Tier != "local" || s.Mode != "auto" || len(s.Allow) != 1 || s.FetchAllow[0] != "example.com" {
		t.Errorf("LoadSettings = %+v, %v", s, err)
	}
	for name, body := range map[string]string{
		"unknown key": "tier: local\nshel: yes\n",
		"two docs":    "tier: local\n---\ntier: virtual\n",
		"wrong type":  "allow: write\n",
		"not yaml":    "{{{",
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := mcpserver.LoadSettings(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, s := range map[string]mcpserver.Settings{
		"bad mode":              {Mode: "yolo"},
		"bad allow":             {Allow: []string{"teleport"}},
		"approve without store": {Mode: "approve"},
		"bad tier":              {Tier: "cloud"},
		"bad search url":        {SearchURL: "ftp://x"},
		"bad fetch host":        {FetchAllow: []string{"http://x/y"}},
	} {
		if _, closeAll, err := mcpserver.Open(bg, s); err == nil {
			closeAll()
			t.Errorf("%s: accepted", name)
		} else if !isConfig(err) {
			t.Errorf("%s: %v is not a configuration error", name, err)
		}
	}
}

func TestRelativeStoreIsMadeAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	cfg, closeAll, err := mcpserver.Open(bg, mcpserver.Settings{Mode: "approve", Store: "rel.db"})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	if !filepath.IsAbs(cfg.StorePath) || filepath.Base(cfg.StorePath) != "rel.db" {
		t.Errorf("StorePath %q: the approving command must work from any directory", cfg.StorePath)
	}
}

func isConfig(err error) bool { return errors.Is(err, sandbox.ErrConfig) }

// A client driving the multi-round-trip by hand cannot forge an answer, nor
// reuse one for different arguments.
func TestAskAnswerIsBound(t *testing.T) {
	dir := t.TempDir()
	cs := connect(t, mcpserver.Settings{Tier: "local", Root: dir, Mode: "ask"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	accept := mcp.InputResponseMap{"permission": &mcp.ElicitResult{Action: "accept"}}
	asked := map[string]any{"command": "touch asked"}
	res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "shell", Arguments: asked})
	if err != nil || !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("first round: %+v %v", res, err)
	}
	for name, p := range map[string]*mcp.CallToolParams{
		"forged state":    {Name: "shell", Arguments: asked, InputResponses: accept, RequestState: "deadbeef.00"},
		"no state":        {Name: "shell", Arguments: asked, InputResponses: accept},
		"other arguments": {Name: "shell", Arguments: map[string]any{"command": "touch other"}, InputResponses: accept, RequestState: res.RequestState},
	} {
		r, err := cs.CallTool(bg, p)
		if err != nil || !r.IsError {
			t.Errorf("%s: want an error result, got %+v %v", name, r, err)
		}
	}
	for _, f := range []string{"asked", "other"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s ran without a valid answer", f)
		}
	}
	// The mismatched attempt used up that question; ask again.
	res, err = cs.CallTool(bg, &mcp.CallToolParams{Name: "shell", Arguments: asked})
	if err != nil || !res.NeedsInput() {
		t.Fatalf("second question: %+v %v", res, err)
	}
	r, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "shell", Arguments: asked, InputResponses: accept, RequestState: res.RequestState})
	if err != nil || r.IsError {
		t.Fatalf("answered call: %+v %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "asked")); err != nil {
		t.Error("the accepted command did not run")
	}
	// An answer is used once.
	os.Remove(filepath.Join(dir, "asked"))
	r, err = cs.CallTool(bg, &mcp.CallToolParams{Name: "shell", Arguments: asked, InputResponses: accept, RequestState: res.RequestState})
	if err != nil || !r.IsError {
		t.Fatalf("replayed answer: %+v %v", r, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "asked")); err == nil {
		t.Error("a replayed answer ran the command again")
	}
}

// The isolated tier over MCP: the tools act inside the kernel boundary.
func TestIsolatedTier(t *testing.T) {
	dir := t.TempDir()
	cs := connect(t, mcpserver.Settings{Tier: "isolated", Root: dir, Mode: "auto"}, nil)
	got := toolNames(t, cs)
	slices.Sort(got)
	if !slices.Equal(got, []string{"edit_file", "glob", "read_file", "shell", "write_file"}) {
		t.Errorf("tools %v", got)
	}
	if in := cs.InitializeResult().Instructions; !strings.Contains(in, "isolated sandbox") || !strings.Contains(in, "Can change "+dir) {
		t.Errorf("instructions %q", in)
	}
	res, text := callTool(t, cs, "write_file", map[string]any{"path": "a.txt", "content": "inside"})
	if res.IsError {
		t.Fatalf("write_file: %s", text)
	}
	res, text = callTool(t, cs, "shell", map[string]any{"command": "cat a.txt; cat /etc/hostname 2>/dev/null; hostname; ls /root 2>&1"})
	if res.IsError || !strings.Contains(text, "inside") || !strings.Contains(text, "hutch") || !strings.Contains(text, "No such file") {
		t.Errorf("shell: %s", text)
	}
	res, text = callTool(t, cs, "write_file", map[string]any{"path": "/usr/x", "content": "x"})
	if !res.IsError {
		t.Errorf("write outside the policy: %s", text)
	}
}

// decision_ttl reaches the store: an approval given, then left longer
// than the TTL, covers nothing; the call asks anew (a real MCP client).
func TestDecisionTTLSetting(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(t.TempDir(), "approvals.db")
	s := mcpserver.Settings{Tier: "local", Root: dir, Mode: "approve", Store: store, DecisionTTL: "100ms"}
	args := map[string]any{"path": "deploy.txt", "content": "v2"}
	cs := connect(t, s, nil)
	_, text := callTool(t, cs, "write_file", args)
	m := idRE.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("approval-required result: %q", text)
	}
	st, err := permission.OpenStore(store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Decide(bg, m[1], true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	res, text := callTool(t, cs, "write_file", args)
	if !res.IsError || !idRE.MatchString(text) || strings.Contains(text, m[1]) {
		t.Errorf("a call 300 ms after an approval with a 100 ms TTL: %v %q; want a new request", res.IsError, text)
	}
	if _, err := os.Stat(filepath.Join(dir, "deploy.txt")); err == nil {
		t.Error("the expired approval let the write through")
	}
}
