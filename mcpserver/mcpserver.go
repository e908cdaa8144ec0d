// Package mcpserver serves hutch's tools to any agent over the Model Context
// Protocol, on stdio or the streamable HTTP transport, using the official Go
// SDK.
//
// The server only serves: it builds no sandbox, gate or store. A front end
// builds them (package config does, from flags or a settings file) and
// hands them over in Config. Each MCP session gets its own tool.Toolset
// (so the read-before-write guard is per session) over the one sandbox and
// permission gate given in Config. Tools are listed by the offering rules of package tool; a tool
// the agent could never use is not listed. Results carry text content and,
// for tools with an output schema, structuredContent; refused and failed
// calls set isError (and carry no structuredContent). A call whose request
// has a progress token gets progress notifications while it runs (see
// progress.go); a cancelled call gets no response (see wire.go). In ask mode the gate asks the human through MCP elicitation
// (see Asker); in approve mode an undecided call gets an error result
// naming the pending request and the command that approves it.
package mcpserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/tool"
)

// Config is what every session of the server shares. The server does not
// close what it holds: its builder does, once the server has stopped.
type Config struct {
	// Tools is the template for each session's toolset (Sandbox, Gate,
	// Fetcher, Search, WriteGuard). Sandbox and Gate are required.
	Tools tool.Options
	// StorePath is the approval store's file, quoted in the command an
	// approve-mode error tells the human to run.
	StorePath string
	// Version is reported to clients.
	Version string

	stop      *stopper // set by ServeStdio and ServeHTTP: calls end when they stop
	sessionID string   // set by Handler: the id of the one HTTP session this server is for
}

// stopper ends the tool calls of a server that stops, and waits for them:
// each call's context ends with ctx, and wait returns once every call has
// returned (so the commands it ran have ended).
type stopper struct {
	ctx context.Context
	mu  sync.Mutex // held by wait: no start adds to wg while it waits
	wg  sync.WaitGroup
}

// start ties a call's context to s; done must follow. It reports false,
// and starts nothing, once s's context has ended.
func (s *stopper) start(ctx context.Context) (_ context.Context, done func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return ctx, nil, false
	}
	s.wg.Add(1)
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(s.ctx, func() { cancel(context.Cause(s.ctx)) })
	return ctx, func() { unhook(); cancel(nil); s.wg.Done() }, true
}

// wait returns once every call started has returned; call it after s's
// context has ended.
func (s *stopper) wait() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wg.Wait()
}

// New returns an MCP server with hutch's tools, for one session (stdio) or
// as the template of every session (HTTP builds one per session).
//
// It declares exactly what it serves: tools, whose list never changes in a
// session (no listChanged). The SDK would answer prompts, resources,
// logging and completion requests whatever is declared (empty lists, a
// level it never uses); hutch has none of them, so those methods get
// "method not found" like any other it does not serve.
//
// The background processes its shell starts live as long as the process
// does: a front end that ends sessions while it runs on uses ServeStdio
// or Handler, which end them with the session.
func New(cfg Config) (*mcp.Server, error) {
	srv, _, err := newServer(cfg)
	return srv, err
}

// newServer is New, with the session's toolset, which its caller closes
// when the session ends (so the background processes end with it).
func newServer(cfg Config) (*mcp.Server, *tool.Toolset, error) {
	ts, err := tool.New(cfg.Tools)
	if err != nil {
		return nil, nil, err
	}
	version := cfg.Version
	if version == "" {
		version = "devel"
	}
	tools := ts.Tools()
	opts := &mcp.ServerOptions{
		Instructions: instructions(cfg.Tools, tools),
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	}
	if id := cfg.sessionID; id != "" {
		opts.GetSessionID = func() string { return id }
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "hutch", Version: version}, opts)
	srv.AddReceivingMiddleware(undeclared)
	calls := make(chan struct{}, MaxCallsInFlight)
	for _, t := range tools {
		srv.AddTool(mcpTool(t), handler(ts, t, cfg.StorePath, calls, cfg.stop))
	}
	return srv, ts, nil
}

// mcpTool is t as MCP lists it: its title, its hints as annotations (each
// set explicitly: MCP's defaults for absent hints are the cautious ones,
// destructive and open-world), and its output schema when it answers in
// structure.
func mcpTool(t tool.Tool) *mcp.Tool {
	mt := &mcp.Tool{
		Name:        t.Name,
		Title:       t.Title,
		Description: t.Description,
		InputSchema: t.InputSchema,
		Annotations: &mcp.ToolAnnotations{
			Title:           t.Title,
			ReadOnlyHint:    t.Hints.ReadOnly,
			DestructiveHint: ptr(t.Hints.Destructive),
			IdempotentHint:  t.Hints.Idempotent,
			OpenWorldHint:   ptr(t.Hints.OpenWorld),
		},
	}
	if t.OutputSchema != nil {
		mt.OutputSchema = t.OutputSchema
	}
	return mt
}

func ptr[T any](v T) *T { return &v }

// undeclared answers the methods of features hutch does not declare with
// "method not found", and gives every error of the others a JSON-RPC code.
func undeclared(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if feature, ok := undeclaredMethods[method]; ok {
			e := methodNotFound(method)
			e.Message += fmt.Sprintf(" (hutch serves tools only; it declares no %s)", feature)
			return nil, e
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return nil, wireError(err)
		}
		return res, nil
	}
}

// MaxCallsInFlight bounds the tool calls one session runs at once (the
// SDK starts each on its own): each holds memory (a command's output, a
// file), so a client cannot multiply that without end. Further calls wait
// their turn, or their cancellation.
const MaxCallsInFlight = 16

// instructions tells the model where its tools act, what each offered
// family of tools can do, and what the permission mode lets them do. It is
// made from the tools offered, not from the mode: a sentence of the
// sandbox's own about its shell is left out when no tool runs commands.
func instructions(o tool.Options, tools []tool.Tool) string {
	byCap := map[permission.Capability][]string{}
	for _, t := range tools {
		byCap[t.Capability] = append(byCap[t.Capability], t.Name)
	}
	var parts []string
	if s := o.Sandbox.Instructions(); s != "" {
		if len(byCap[permission.Shell]) == 0 {
			s = withoutShell(s)
		}
		parts = append(parts, s)
	} else {
		parts = append(parts, "Your files live in an in-memory sandbox; nothing on the host is reachable.")
	}
	list := func(names []string) string { return strings.Join(names, ", ") }
	var offered []string
	for _, f := range toolFamilies {
		var names []string
		for _, c := range f.caps {
			names = append(names, byCap[c]...)
			delete(byCap, c)
		}
		if len(names) > 0 {
			offered = append(offered, f.what+" ("+list(names)+")")
		}
	}
	var rest []string
	for _, t := range tools {
		if _, ok := byCap[t.Capability]; ok {
			rest = append(rest, t.Name)
		}
	}
	if len(rest) > 0 {
		offered = append(offered, "other tools ("+list(rest)+")")
	}
	parts = append(parts, "Your tools: "+strings.Join(offered, "; ")+".")
	switch o.Gate.Mode() {
	case permission.ReadOnly:
		parts = append(parts, "Permission mode read_only: the tools listed act without asking; tools that change files or run commands are offered only where explicitly granted.")
	case permission.Auto:
		parts = append(parts, "Permission mode auto: every offered tool may act without asking.")
	case permission.Ask:
		parts = append(parts, "Permission mode ask: a person is asked before privileged actions; a refusal comes back as an error result.")
	case permission.Approve:
		parts = append(parts, "Permission mode approve: privileged actions wait for a person's approval; when a result says approval is required, tell the user and retry the identical call after it is approved.")
	}
	return strings.Join(parts, "\n")
}

// toolFamilies says what each family of tools can do, in the order the
// instructions list them; a family is the tools that need one capability
// (or a few alike).
var toolFamilies = []struct {
	caps []permission.Capability
	what string
}{
	{[]permission.Capability{permission.Read, permission.Glob}, "read and find files"},
	{[]permission.Capability{permission.Write}, "create and change files"},
	{[]permission.Capability{permission.Shell}, "run shell commands in the sandbox"},
	{[]permission.Capability{permission.Code}, "run code in a fresh sandbox of its own per call"},
	{[]permission.Capability{permission.Fetch}, "fetch URLs from the allowed hosts"},
	{[]permission.Capability{permission.Search}, "search the web"},
}

// withoutShell drops the sentences and clauses of a sandbox's
// instructions that speak of its shell, for a session offering none.
func withoutShell(s string) string {
	var kept []string
	for _, sentence := range strings.SplitAfter(s, ". ") {
		var clauses []string
		for _, c := range strings.Split(strings.TrimSpace(sentence), "; ") {
			if !strings.Contains(strings.ToLower(c), "shell") {
				clauses = append(clauses, c)
			}
		}
		if len(clauses) > 0 {
			c := strings.Join(clauses, "; ")
			if !strings.HasSuffix(c, ".") {
				c += "."
			}
			kept = append(kept, c)
		}
	}
	return strings.Join(kept, " ")
}

func handler(ts *tool.Toolset, t tool.Tool, storePath string, calls chan struct{}, stop *stopper) mcp.ToolHandler {
	name, structured := t.Name, t.OutputSchema != nil
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		if stop != nil {
			var done func()
			var ok bool
			if ctx, done, ok = stop.start(ctx); !ok {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server is stopping"}
			}
			defer done()
		}
		select {
		case calls <- struct{}{}:
			defer func() { <-calls }()
		case <-ctx.Done():
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the call ended before it started: " + context.Cause(ctx).Error()}
		}
		// A bug in a tool must cost one call, never the server: the SDK
		// does not recover handler panics.
		defer func() {
			if p := recover(); p != nil {
				res, err = textResult(fmt.Sprintf("internal error in %s: %v (please report it)", name, p), true), nil
			}
		}()
		ctx = context.WithValue(ctx, sessionKey{}, req.Session)
		if token := req.Params.GetProgressToken(); token != nil {
			p := startProgress(ctx, req.Session, token)
			defer p.stop()
			ctx = tool.WithProgress(ctx, p.report)
		}
		if len(req.Params.InputResponses) > 0 {
			ans, err := readAnswer(req.Params.RequestState, req.Params.InputResponses[askInputID])
			if err != nil {
				return textResult("could not use the user's answer: "+err.Error()+"; call the tool again", true), nil
			}
			ctx = context.WithValue(ctx, answerKey{}, ans)
		}
		out, cerr := ts.Call(ctx, name, req.Params.Arguments)
		var ar *permission.ApprovalRequiredError
		var need *askNeeded
		switch {
		case errors.As(cerr, &need):
			return askResult(need.req)
		case errors.As(cerr, &ar):
			return textResult(approvalText(ar, storePath), true), nil
		case cerr != nil:
			// Only an ended context: a cancelled call (whose response the
			// transport drops) or a stopping server.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the call was stopped: " + cerr.Error()}
		}
		res = textResult(out.Text, out.IsError)
		if structured && !out.IsError && out.Data != nil {
			res.StructuredContent = out.Data
		}
		for _, f := range out.Files {
			res.Content = append(res.Content, fileContent(f))
		}
		return res, nil
	}
}

// fileContent is a file run_code returns, as a model best sees it: text
// as text, a PNG, JPEG, GIF or WebP image as an image, anything else as an
// embedded resource with its bytes.
func fileContent(f tool.CodeFile) mcp.Content {
	mt, _, _ := strings.Cut(f.MediaType, ";")
	switch {
	case mt == "image/png" || mt == "image/jpeg" || mt == "image/gif" || mt == "image/webp":
		return &mcp.ImageContent{Data: f.Data, MIMEType: mt}
	case utf8.Valid(f.Data) && (strings.HasPrefix(mt, "text/") || mt == "application/json" || mt == "application/xml" || mt == "image/svg+xml"):
		return &mcp.TextContent{Text: fmt.Sprintf("file %s (%s, %d bytes):\n%s", f.Name, mt, f.Size, f.Data)}
	}
	return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "hutch-run:///" + f.Name, MIMEType: mt, Blob: f.Data}}
}

func approvalText(ar *permission.ApprovalRequiredError, storePath string) string {
	cmd := "hutch approvals approve " + ar.ID
	if storePath != "" {
		cmd += " --store " + shellQuote(storePath)
	}
	return fmt.Sprintf("approval required: %s (%s) is pending as request %s. A person approves it with: %s — then repeat this exact call.",
		ar.Request.Capability, permission.Shorten(ar.Request.Detail, permission.MaxAuditText), ar.ID, cmd)
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func textResult(text string, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isError}
}

type (
	sessionKey struct{}
	answerKey  struct{}
)

// askInputID names the one input request hutch makes: may this call go on?
const askInputID = "permission"

// askNeeded is how Asker suspends a call: the tool handler turns it into an
// input-required result (SEP-2322 multi-round-trip), which the SDK either
// passes to the client (new protocol versions) or fulfils with a legacy
// elicitation/create request (older ones) before calling the handler again
// with the answer.
type askNeeded struct{ req permission.Request }

func (e *askNeeded) Error() string        { return "waiting for the user's answer" }
func (e *askNeeded) Is(target error) bool { return target == permission.ErrAskDeferred }

// answer is the user's reply, bound to one request by its key.
type answer struct {
	key    string
	accept bool
}

// Asker is the permission.Asker for ask mode over MCP. It asks the human
// through the client's elicitation (a form with no fields: accept allows,
// decline or cancel denies). The answer is bound to the exact request — a
// retry that changed the arguments is refused. When the client did not
// declare elicitation, or the call did not come through MCP, it denies and
// says why. A front end gives it to the gate it builds (config.Settings
// Asker).
func Asker(ctx context.Context, req permission.Request) (bool, error) {
	if a, ok := ctx.Value(answerKey{}).(answer); ok {
		key, err := permission.RequestKey(req)
		if err != nil || key != a.key {
			return false, errors.New("the user's answer was for a different call")
		}
		return a.accept, nil
	}
	ss, _ := ctx.Value(sessionKey{}).(*mcp.ServerSession)
	if ss == nil {
		return false, errors.New("no MCP session to ask through")
	}
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false, errors.New("the MCP client cannot ask the user (it did not declare elicitation); use another mode or a client that supports elicitation")
	}
	if e := p.Capabilities.Elicitation; e.Form == nil && e.URL != nil {
		// The SDK's own rule: "url" alone means no forms, and hutch asks
		// with a form.
		return false, errors.New("the MCP client cannot ask the user with a form (it declared URL elicitation only); use another mode or a client that supports form elicitation")
	}
	if p.ProtocolVersion < multiRoundTripVersion {
		// A client before multi-round-trip tool calls is asked here, not
		// by the SDK's stand-in for it: the wait is bounded (a client that
		// went away while asked holds no call, and no session, past
		// questionTTL), and a failed question is a denial the audit log
		// records, not a protocol error.
		ctx, cancel := context.WithTimeout(ctx, questionTTL)
		defer cancel()
		res, err := ss.Elicit(ctx, question(req))
		if err != nil {
			return false, fmt.Errorf("the MCP client did not answer: %w", err)
		}
		return res.Action == "accept", nil
	}
	return false, &askNeeded{req: req}
}

// multiRoundTripVersion is the first MCP version whose clients answer a
// tool's input requests themselves.
const multiRoundTripVersion = "2026-07-28"

// question is the form that asks the human about req: no fields; accept
// allows, decline or cancel denies.
func question(req permission.Request) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Mode:            "form",
		Message:         "hutch: " + tool.Question(req),
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}},
	}
}

func askResult(req permission.Request) (*mcp.CallToolResult, error) {
	key, err := permission.RequestKey(req)
	if err != nil {
		return textResult("cannot ask about this call: "+err.Error(), true), nil
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{askInputID: question(req)},
		RequestState:  signState(key),
	}, nil
}

// stateKey signs request states so a client cannot mint an answer for a
// call it was never asked about. It lives as long as the process; it is
// drawn on first use, not at program start.
var stateKey = sync.OnceValue(func() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
})

// issued holds the outstanding questions, so an answer is used once.
// Questions never answered expire after questionTTL.
var issued = struct {
	sync.Mutex
	m map[string]time.Time
}{m: map[string]time.Time{}}

// maxQuestions bounds the outstanding questions: a client that calls a
// privileged tool without end and never answers cannot grow the server's
// memory. Past it, the oldest question is forgotten (its answer, should
// one come, is then refused as unknown).
const maxQuestions = 1024

// questionTTL is how long a question waits for its answer (a variable for
// tests).
var questionTTL = 30 * time.Minute

func remember(body string) {
	issued.Lock()
	defer issued.Unlock()
	now := time.Now()
	if len(issued.m) >= maxQuestions {
		oldest, at := "", now
		for k, t := range issued.m {
			if now.Sub(t) > questionTTL {
				delete(issued.m, k)
			} else if t.Before(at) {
				oldest, at = k, t
			}
		}
		if len(issued.m) >= maxQuestions {
			delete(issued.m, oldest)
		}
	}
	issued.m[body] = now
}

func take(body string) bool {
	issued.Lock()
	defer issued.Unlock()
	t, ok := issued.m[body]
	delete(issued.m, body)
	return ok && time.Since(t) <= questionTTL
}

// signState is "requestkey:nonce.hmac"; the nonce is remembered until an
// answer uses it.
func signState(key string) string {
	var n [12]byte
	_, _ = rand.Read(n[:])
	body := key + ":" + hex.EncodeToString(n[:])
	remember(body)
	return body + "." + mac(body)
}

func mac(body string) string {
	m := hmac.New(sha256.New, stateKey())
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

func readAnswer(state string, resp mcp.InputResponse) (answer, error) {
	body, sig, ok := strings.Cut(state, ".")
	if !ok || !hmac.Equal([]byte(mac(body)), []byte(sig)) {
		return answer{}, errors.New("the request state is missing or was not issued by this server")
	}
	if !take(body) {
		return answer{}, errors.New("this answer was already used or expired")
	}
	key, _, _ := strings.Cut(body, ":")
	er, ok := resp.(*mcp.ElicitResult)
	if !ok || er == nil {
		return answer{}, errors.New("no answer to the permission question")
	}
	return answer{key: key, accept: er.Action == "accept"}, nil
}

// ServeStdio serves one session on standard input and output until the
// client disconnects or ctx ends (Serve on StdioTransport).
func ServeStdio(ctx context.Context, cfg Config) error {
	return Serve(ctx, cfg, StdioTransport())
}

// Serve serves one session on t until the client disconnects or ctx
// ends. When ctx ends, the running tool calls are cancelled (their
// commands killed) and Serve returns once they have returned, with ctx's
// error.
func Serve(ctx context.Context, cfg Config, t mcp.Transport) error {
	cfg.stop = &stopper{ctx: ctx}
	srv, ts, err := newServer(cfg)
	if err != nil {
		return err
	}
	defer ts.Close() // the session's background processes end with it
	err = srv.Run(ctx, t)
	if ctx.Err() != nil {
		cfg.stop.wait()
	}
	return err
}
