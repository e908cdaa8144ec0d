package mcpserver_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/mcpserver"
	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox/isolated"
	"github.com/hutchsandbox/hutch/sandbox/local"
	"github.com/hutchsandbox/hutch/tool"
)

// connectCode serves run_code (default: read the project; escalation
// "workspace": write it) in ask mode over the in-memory transport.
func connectCode(t *testing.T, copts *mcp.ClientOptions) (*mcp.ClientSession, string) {
	t.Helper()
	if err := isolated.Supported(); err != nil {
		testenv.Missing(t, "the isolated tier: %v", err)
	}
	ws := t.TempDir()
	project := policy.Default().Extend(policy.Policy{Read: []string{ws}, Dir: ws})
	code := tool.CodeOptions{Default: project, Run: isolated.Run,
		Escalations: map[string]policy.Policy{"workspace": project.Extend(policy.Policy{Write: []string{ws}})}}
	langs, err := tool.ProbeLanguages(bg, code)
	if err != nil {
		t.Fatal(err)
	}
	code.Languages = langs
	sb, err := local.New(bg, local.Options{Dir: ws})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	gate, err := permission.New(permission.Config{Mode: permission.Ask, Asker: mcpserver.Asker})
	if err != nil {
		t.Fatal(err)
	}
	return connectConfig(t, mcpserver.Config{Tools: tool.Options{Sandbox: sb, Gate: gate, Code: &code}}, copts), ws
}

func runCode(t *testing.T, cs *mcp.ClientSession, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(bg, &mcp.CallToolParams{Name: "run_code", Arguments: args})
	if err != nil {
		t.Fatalf("run_code: protocol error %v", err)
	}
	return res
}

// An escalation over MCP asks the person through elicitation, showing the
// sandbox's summary, the reason and the code; accepted, the call runs in
// the wider sandbox, and the next call is back in the default.
func TestRunCodeEscalationAsksThroughElicitation(t *testing.T) {
	var asked []string
	cs, ws := connectCode(t, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, r.Params.Message)
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	write := `echo edited > notes.md && echo WROTE || echo REFUSED`
	res := runCode(t, cs, map[string]any{"language": "shell", "code": write, "sandbox": "workspace", "reason": "update the notes"})
	if res.IsError {
		t.Fatalf("escalated call: %+v", res.Content[0])
	}
	if len(asked) != 1 {
		t.Fatalf("asked %d times", len(asked))
	}
	for _, want := range []string{`"workspace"`, "Can change " + ws, "update the notes", "notes.md"} {
		if !strings.Contains(asked[0], want) {
			t.Errorf("the question does not show %q: %s", want, asked[0])
		}
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "notes.md")); string(data) != "edited\n" {
		t.Errorf("the approved edit did not land: %q", data)
	}
	res = runCode(t, cs, map[string]any{"language": "shell", "code": write})
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "REFUSED") || len(asked) != 1 {
		t.Errorf("the next call without a sandbox: %s (asked %d)", text, len(asked))
	}
}

// A client that cannot elicit gets the escalation refused, with why.
func TestRunCodeEscalationWithoutElicitationIsRefused(t *testing.T) {
	cs, ws := connectCode(t, nil)
	res := runCode(t, cs, map[string]any{"language": "shell", "code": "touch x", "sandbox": "workspace", "reason": "r"})
	text := res.Content[0].(*mcp.TextContent).Text
	if !res.IsError || !strings.Contains(text, "cannot ask the user") {
		t.Errorf("got %v %q", res.IsError, text)
	}
	if _, err := os.Stat(filepath.Join(ws, "x")); err == nil {
		t.Error("the escalated code ran without a decision")
	}
}

// Files the code writes come back as a model best sees them: a PNG as
// image content, text as text, other bytes as an embedded resource.
func TestRunCodeFilesComeBackAsContent(t *testing.T) {
	cs, _ := connectCode(t, nil)
	res := runCode(t, cs, map[string]any{"language": "shell", "code": `cd "$RUN_DIR"
printf '\211PNG\r\n\032\n\000\000\000\rIHDR' > plot.png
echo 'a,b' > table.csv
printf '\000\001\002\003' > blob.bin`})
	if res.IsError {
		t.Fatalf("run: %+v", res.Content[0])
	}
	var img, text, blob bool
	for _, c := range res.Content[1:] {
		switch c := c.(type) {
		case *mcp.ImageContent:
			img = c.MIMEType == "image/png" && strings.HasPrefix(string(c.Data), "\x89PNG")
		case *mcp.TextContent:
			text = strings.Contains(c.Text, "table.csv") && strings.Contains(c.Text, "a,b")
		case *mcp.EmbeddedResource:
			blob = strings.HasSuffix(c.Resource.URI, "blob.bin") && string(c.Resource.Blob) == "\x00\x01\x02\x03"
		}
	}
	if !img || !text || !blob || len(res.Content) != 4 {
		t.Errorf("image %v, text %v, blob %v in %d content items", img, text, blob, len(res.Content))
	}
}
