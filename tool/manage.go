package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Bounds of the list tool.
const (
	// MaxListEntries is the most entries one list answer shows.
	MaxListEntries = 1000
	// MaxListDepth is the deepest a list descends.
	MaxListDepth = 5
)

type listArgs struct {
	Path  string `json:"path"`
	Depth int    `json:"depth,omitempty"`
}

// ListEntry is one entry of a list answer.
type ListEntry struct {
	Path string `json:"path"`
	// Kind is file, dir or other (devices, sockets, pipes, and links
	// that dangle or lead out of the sandbox).
	Kind string `json:"kind"`
	Size int64  `json:"size"`
	// Link marks a symbolic link; Kind and Size are then its target's.
	Link bool `json:"link,omitempty"`
}

// ListResult is the list tool's structured result.
type ListResult struct {
	Entries []ListEntry `json:"entries"`
	// More counts the entries left out (past MaxListEntries, or in
	// directories that could not be listed).
	More int    `json:"more,omitempty"`
	Note string `json:"note,omitempty"`
}

func listDir(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a listArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if a.Path == "" {
		a.Path = "."
	}
	if out, bad := badPath("list", a.Path); bad {
		return out, nil
	}
	if a.Depth == 0 {
		a.Depth = 1
	}
	if a.Depth < 1 || a.Depth > MaxListDepth {
		return failf("depth must be between 1 and %d", MaxListDepth), nil
	}
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Read, Tool: "list", Detail: a.Path, Paths: ts.rulePaths(a.Path)}, a); !ok {
		return out, err
	}
	sb := ts.opts.Sandbox
	res := ListResult{Entries: []ListEntry{}}
	// Breadth first, so a bound cuts the deepest entries first.
	type dir struct {
		path  string
		depth int
	}
	queue := []dir{{a.Path, 1}}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		ents, err := sb.List(ctx, d.path)
		if err != nil {
			if ctx.Err() != nil {
				return Output{}, ctx.Err()
			}
			if d.depth == 1 {
				return failf("%s", describeErr(err)), nil
			}
			res.More++ // a subdirectory that went away or cannot be listed
			continue
		}
		for _, e := range ents {
			if len(res.Entries) == MaxListEntries {
				res.More++
				continue
			}
			res.Entries = append(res.Entries, ListEntry{Path: e.Path, Kind: string(e.Kind), Size: e.Size, Link: e.Link})
			if e.Kind == sandbox.KindDir && !e.Link && d.depth < a.Depth {
				queue = append(queue, dir{e.Path, d.depth + 1})
			}
		}
	}
	if res.More > 0 {
		res.Note = fmt.Sprintf("%d more entries not shown: list a subdirectory, or less deep", res.More)
	}
	return structured(res), nil
}

type moveArgs struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// MoveResult is the move tool's structured result.
type MoveResult struct {
	OK   bool   `json:"ok"`
	From string `json:"from"`
	To   string `json:"to"`
}

func moveFile(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a moveArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if a.From == "" || a.To == "" {
		return failf("move needs from and to"), nil
	}
	for _, p := range []string{a.From, a.To} {
		if out, bad := badPath("move", p); bad {
			return out, nil
		}
	}
	sb := ts.opts.Sandbox
	fi, err := sb.Stat(ctx, a.From)
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return failf("%s", describeErr(asOp("move", err))), nil
	}
	// A file it replaces is guarded as a write_file over it would be.
	if _, refuse := ts.checkOverwrite(ctx, a.To); refuse != nil {
		return *refuse, nil
	}
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Write, Tool: "move", Detail: a.From + " -> " + a.To,
		Paths: ts.rulePaths(a.From, a.To), Recursive: err == nil && fi.Kind == sandbox.KindDir}, a); !ok {
		return out, err
	}
	if err := sb.Rename(ctx, a.From, a.To); err != nil {
		return failf("%s", describeErr(err)), nil
	}
	ts.afterWrite(ctx, a.To)
	return structured(MoveResult{OK: true, From: a.From, To: a.To}), nil
}

type deleteArgs struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
}

// PathResult is the structured result of delete and mkdir.
type PathResult struct {
	OK   bool   `json:"ok"`
	Path string `json:"path"`
}

func deletePath(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a deleteArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if a.Path == "" {
		return failf("delete needs a path"), nil
	}
	if out, bad := badPath("delete", a.Path); bad {
		return out, nil
	}
	if clean := path.Clean(a.Path); clean == "." || clean == "/" || clean == path.Clean(ts.opts.Sandbox.Root()) {
		return failf("delete: the sandbox root itself cannot be deleted: name what is inside it"), nil
	}
	detail := a.Path
	if a.Recursive {
		detail += " (recursive)"
	}
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Write, Tool: "delete", Detail: detail, Paths: ts.rulePaths(a.Path), Recursive: a.Recursive}, a); !ok {
		return out, err
	}
	if err := ts.opts.Sandbox.Remove(ctx, a.Path, a.Recursive); err != nil {
		return failf("%s", describeErr(err)), nil
	}
	return structured(PathResult{OK: true, Path: a.Path}), nil
}

type mkdirArgs struct {
	Path string `json:"path"`
}

func makeDir(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a mkdirArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if a.Path == "" {
		return failf("mkdir needs a path"), nil
	}
	if out, bad := badPath("mkdir", a.Path); bad {
		return out, nil
	}
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Write, Tool: "mkdir", Detail: a.Path, Paths: ts.rulePaths(a.Path)}, a); !ok {
		return out, err
	}
	if err := ts.opts.Sandbox.Mkdir(ctx, a.Path); err != nil {
		return failf("%s", describeErr(err)), nil
	}
	return structured(PathResult{OK: true, Path: a.Path}), nil
}
