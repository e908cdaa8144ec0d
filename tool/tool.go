package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Output is what a tool call returns to the model.
type Output struct {
	// Text is what the model reads.
	Text string
	// Data is the structured result (JSON-encodable); nil for plain text
	// results and for errors.
	Data any
	// IsError marks a failed or refused call.
	IsError bool
	// Files are the files a run_code call wrote, with their bytes, for a
	// front end to show (images as images); Text lists them without.
	Files []CodeFile
}

func failf(format string, args ...any) Output {
	return Output{Text: fmt.Sprintf(format, args...), IsError: true}
}

// structured returns an Output whose text is the JSON of data, so a client
// that ignores structured content still sees everything.
func structured(data any) Output {
	b, err := json.Marshal(data)
	if err != nil {
		return failf("encoding result: %v", err)
	}
	return Output{Text: string(b), Data: data}
}

// Tool describes one tool for a front end (an MCP server, an agent loop).
type Tool struct {
	Name string
	// Title is a short human-readable name ("Read file").
	Title       string
	Description string
	// InputSchema is the JSON Schema of the arguments object.
	InputSchema json.RawMessage
	// OutputSchema is the JSON Schema of Output.Data when the tool
	// returns structured results (every successful call then has Data
	// matching it); nil for tools that answer in text.
	OutputSchema json.RawMessage
	// Hints describe how the tool acts on its world, for a client
	// deciding how to present or confirm a call. They are hints: hutch's
	// own gate decides what a call may do.
	Hints Hints
	// Capability is what the gate checks before the tool acts.
	Capability permission.Capability

	call func(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error)
}

// Hints are what a client may assume about a tool (MCP's tool
// annotations).
type Hints struct {
	// ReadOnly: the tool changes nothing.
	ReadOnly bool
	// Destructive: the tool may delete or overwrite (meaningful when not
	// ReadOnly).
	Destructive bool
	// Idempotent: calling it again with the same arguments changes
	// nothing more.
	Idempotent bool
	// OpenWorld: the tool may reach beyond the sandbox's files (the
	// network, a shell's processes).
	OpenWorld bool
}

// Options configure a Toolset.
type Options struct {
	// Sandbox is where tools act. Required.
	Sandbox sandbox.Sandbox
	// Gate decides what tools may do. Required.
	Gate *permission.Gate
	// Fetcher enables the fetch tool; nil leaves it out.
	Fetcher *Fetcher
	// Search enables the web_search tool; nil leaves it out.
	Search SearchBackend
	// Code enables the run_code tool; nil leaves it out.
	Code *CodeOptions
	// WriteGuard controls the read-before-write guard of write_file,
	// edit_file and apply_patch. GuardAuto (the default) turns it on for every real
	// filesystem — where editors, builds and other agents change files —
	// and off for in-memory sandboxes (sandbox.InMemory).
	WriteGuard Guard
}

// Guard is a setting for the read-before-write guard.
type Guard int

// Guard settings.
const (
	GuardAuto Guard = iota
	GuardOn
	GuardOff
)

// Toolset is the tools of one agent session: one sandbox, one gate, and
// the session's read-before-write memory. It is safe for concurrent use.
type Toolset struct {
	opts    Options
	guard   bool
	seen    readTracker
	offered []Tool // decided once: the gate and the sandbox do not change
	scope   string // which sandbox approvals bind to
	code    *code  // run_code, when configured
	procs   processes
}

// New returns the toolset for a session. Errors match ErrConfig.
func New(opts Options) (*Toolset, error) {
	if opts.Sandbox == nil || opts.Gate == nil {
		return nil, fmt.Errorf("%w: a toolset needs a sandbox and a permission gate", ErrConfig)
	}
	_, volatile := opts.Sandbox.(sandbox.InMemory)
	guard := opts.WriteGuard == GuardOn || (opts.WriteGuard == GuardAuto && !volatile)
	ts := &Toolset{opts: opts, guard: guard, scope: Scope(opts.Sandbox)}
	var err error
	if ts.code, err = newCode(opts.Code); err != nil {
		return nil, err
	}
	ts.offered = ts.offer()
	return ts, nil
}

// Scope names the sandbox for approvals: its own Scope when it has one
// (sandbox.Scoper), else its tier and root, so an approval given for one
// workspace never lets a call through in another that shares the approval
// store; an in-memory sandbox is its own scope.
func Scope(sb sandbox.Sandbox) string {
	if s, ok := sb.(sandbox.Scoper); ok {
		return fmt.Sprintf("%T:%s", sb, s.Scope())
	}
	if _, ok := sb.(sandbox.InMemory); ok {
		return fmt.Sprintf("%T@%p", sb, sb)
	}
	return fmt.Sprintf("%T:%s", sb, sb.Root())
}

// Sandbox is the toolset's sandbox.
func (ts *Toolset) Sandbox() sandbox.Sandbox { return ts.opts.Sandbox }

// Tools lists the tools this session offers: read_file and glob always;
// list where the sandbox can list (sandbox.FeatureManage) and read can
// pass; write_file, edit_file and apply_patch unless write can never pass the gate,
// and move, delete and mkdir then too where the sandbox can manage; shell when
// the sandbox has one and shell can pass; run_code with CodeOptions (its
// default sandbox runs in every mode); fetch with a Fetcher and
// web_search with a backend, each unless its capability can never pass. A
// tool the agent could never use is not offered at all.
func (ts *Toolset) Tools() []Tool { return slices.Clone(ts.offered) }

func (ts *Toolset) offer() []Tool {
	g := ts.opts.Gate
	var out []Tool
	manage := ts.opts.Sandbox.Supports(sandbox.FeatureManage)
	for _, t := range catalog() {
		switch t.Name {
		case "write_file", "edit_file", "apply_patch":
			if g.NeverAllows(permission.Write) {
				continue
			}
		case "list":
			if !manage || g.NeverAllows(permission.Read) {
				continue
			}
		case "grep":
			if _, ok := ts.opts.Sandbox.(sandbox.Searcher); !ok || !manage || g.NeverAllows(permission.Read) {
				continue
			}
		case "move", "delete", "mkdir":
			if !manage || g.NeverAllows(permission.Write) {
				continue
			}
		case "shell", "process_output", "process_input", "process_kill", "process_list":
			if !ts.opts.Sandbox.Supports(sandbox.FeatureShell) || g.NeverAllows(permission.Shell) {
				continue
			}
		case "fetch":
			if ts.opts.Fetcher == nil || g.NeverAllows(permission.Fetch) {
				continue
			}
		case "web_search":
			if ts.opts.Search == nil || g.NeverAllows(permission.Search) {
				continue
			}
		}
		out = append(out, t)
	}
	if ts.code != nil {
		out = append(out, ts.code.tool())
	}
	return out
}

// Call runs the named tool with JSON arguments. The error is non-nil only
// when the call waits for approval (permission.ErrApprovalRequired) or ctx
// ended; everything else is an Output.
func (ts *Toolset) Call(ctx context.Context, name string, args json.RawMessage) (Output, error) {
	for _, t := range ts.offered {
		if t.Name == name {
			return t.call(ctx, ts, args)
		}
	}
	names := []string{}
	for _, t := range ts.offered {
		names = append(names, t.Name)
	}
	return failf("unknown tool %q: this session offers %s", name, strings.Join(names, ", ")), nil
}

// gate asks the permission gate. A denial becomes the Output to return
// (ok false); approval-required and context errors are returned as err.
//
// args is the tool's decoded arguments: the request carries them
// re-encoded, so what a person approves (and what an approval binds to) is
// exactly what the tool will do — never the raw JSON, where duplicate or
// differently-cased keys could read one way to the approver and another to
// the decoder.
//
// req is the request without Args and Scope, which gate adds: the
// capability, the tool, the detail a person reads, and what rules match
// (Paths from rulePaths, Command, Host).
func (ts *Toolset) gate(ctx context.Context, req permission.Request, args any) (Output, bool, error) {
	// Only a person (ask) or an approval (approve) looks at the
	// arguments: encode them only then.
	var raw json.RawMessage
	if ts.personDecides() {
		var err error
		if raw, err = json.Marshal(args); err != nil {
			return failf("encoding arguments: %v", err), false, nil
		}
	}
	// A full approval store is a denial that says so (the gate fails
	// closed on every store error), not an error of its own.
	req.Args, req.Scope = raw, ts.scope
	d, err := ts.opts.Gate.Check(ctx, req)
	if err != nil {
		return Output{}, false, err
	}
	if !d.Allowed {
		return failf("%s", d.Reason), false, nil
	}
	return Output{}, true, nil
}

// rulePaths are paths as rules match them (permission.Request.Paths):
// root-relative and clean (sandbox.Clean); one that cannot be cleaned is
// passed as it is, and no rule allows it.
func (ts *Toolset) rulePaths(paths ...string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if c, err := sandbox.Clean(ts.opts.Sandbox.Root(), p); err == nil {
			p = c
		}
		out[i] = p
	}
	return out
}

// badPath refuses, without a word of it echoed, a path (or pattern) no
// tier takes: the file tools call it before anything else, so it reaches
// neither a sandbox's error, the audit log nor a person (a 15 MiB path
// made 15 MiB audit lines and answers).
func badPath(tool, p string) (Output, bool) {
	switch {
	case len(p) > sandbox.MaxPathLen:
		return failf("%s: the path is %d bytes, longer than the %d any sandbox takes", tool, len(p), sandbox.MaxPathLen), true
	case strings.IndexByte(p, 0) >= 0:
		return failf("%s: the path contains a NUL byte, which no file name can hold", tool), true
	}
	return Output{}, false
}

// personDecides reports whether the gate may leave a call to a person
// (ask or approve mode, or an ask rule), who looks at its arguments and
// takes time.
func (ts *Toolset) personDecides() bool { return ts.opts.Gate.PersonMayDecide() }

// decode reads arguments strictly: unknown fields and trailing data are
// errors a model can fix.
func decode(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad arguments: %v", err)
	}
	if dec.More() {
		return errors.New("bad arguments: more than one JSON value")
	}
	return nil
}

// describeErr turns a sandbox error into a message for the model.
func describeErr(err error) string {
	var hint string
	switch {
	case errors.Is(err, sandbox.ErrEscape):
		hint = " (paths must stay inside the sandbox root)"
	case errors.Is(err, sandbox.ErrNotFound):
		hint = " (check the path with glob)"
	case errors.Is(err, sandbox.ErrIsDir):
		hint = " (use glob to list a directory)"
	}
	return err.Error() + hint
}

// schema builds a JSON Schema object from property definitions.
func schema(required []string, props map[string]map[string]any) json.RawMessage {
	if required == nil {
		required = []string{}
	}
	sort.Strings(required)
	b, _ := json.Marshal(map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	})
	return b
}

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
func integer(desc string, minimum int) map[string]any {
	return map[string]any{"type": "integer", "description": desc, "minimum": minimum}
}

// outputSchemaOneOf is the JSON Schema of a result that is either an A
// or a B (an object either way).
func outputSchemaOneOf[A, B any]() json.RawMessage {
	a, errA := jsonschema.For[A](nil)
	b, errB := jsonschema.For[B](nil)
	if errA != nil || errB != nil {
		return nil
	}
	out, err := json.Marshal(&jsonschema.Schema{Type: "object", AnyOf: []*jsonschema.Schema{a, b}})
	if err != nil {
		return nil
	}
	return out
}

// outputSchema is the JSON Schema of T, a tool's structured result. The
// result types are plain structs, so inferring cannot fail; if it ever
// did, the tool would declare no output schema rather than a wrong one.
func outputSchema[T any]() json.RawMessage {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	return b
}
