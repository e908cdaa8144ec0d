package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/patch"
	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

// MaxPatchFiles is the most files one apply_patch call changes.
const MaxPatchFiles = 1000

// MaxPatchBytes bounds the contents one apply_patch call holds in
// memory: every file's text before and after the patch, added up.
const MaxPatchBytes = 2 * sandbox.MaxFileSize

type patchArgs struct {
	Patch string `json:"patch"`
}

// PatchResult is apply_patch's structured result.
type PatchResult struct {
	OK bool `json:"ok"`
	// Files are the files the patch changed, in patch order.
	Files []PatchedFile `json:"files"`
	// Summary is one line: how many files, by operation, and lines.
	Summary string `json:"summary"`
}

// PatchedFile is one file an apply_patch call changed.
type PatchedFile struct {
	// Path is the file's path after the patch (for delete, before it).
	Path string `json:"path"`
	// Op is add, modify, delete or rename.
	Op string `json:"op"`
	// From is a renamed file's old path.
	From string `json:"from,omitempty"`
	// Added and Removed count the lines the file's hunks add and remove.
	Added   int `json:"added"`
	Removed int `json:"removed"`
}

// A patchPlan is what a patch does to each file, worked out in memory.
type patchPlan struct {
	files []plannedFile
}

// plannedFile is one file's part of a plan: its content before (for
// modify, delete and rename) and after (for add, modify and rename).
type plannedFile struct {
	f        *patch.File
	old, new []byte
	changed  bool     // new differs from old (always for add)
	mkdirs   []string // missing parents of the new path, outermost first
}

func applyPatch(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a patchArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if a.Patch == "" {
		return failf("apply_patch needs a patch: a unified diff (--- a/path, +++ b/path, then @@ hunks), as git diff prints it"), nil
	}
	files, err := patch.Parse([]byte(a.Patch))
	if err != nil {
		return failf("apply_patch: %v", err), nil
	}
	if len(files) > MaxPatchFiles {
		return failf("apply_patch: the patch changes %d files, over the limit of %d: split it into smaller patches", len(files), MaxPatchFiles), nil
	}
	sb := ts.opts.Sandbox
	for _, f := range files {
		for _, p := range []string{f.OldPath, f.NewPath} {
			if p == "" {
				continue
			}
			if out, bad := badPath("apply_patch", p); bad {
				return out, nil
			}
		}
		if (f.Op == patch.Delete || f.Op == patch.Rename) && !sb.Supports(sandbox.FeatureManage) {
			return failf("apply_patch: the patch %s (%s), which this sandbox cannot do: give the change as write_file calls", opVerb(f.Op), f.OldPath), nil
		}
	}
	// Everything that can be checked is, before the gate: a patch that
	// cannot apply never uses up a person's answer or approval.
	p, refuse := ts.planPatch(ctx, files, true)
	if refuse != nil {
		return *refuse, nil
	}
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Write, Tool: "apply_patch", Detail: patchDetail(files), Paths: ts.rulePaths(patchPaths(files)...)}, a); !ok {
		return out, err
	}
	if ts.personDecides() {
		// The files may have changed while a person decided: plan
		// again on what they hold now (hunks still match exactly, so
		// a change they touch fails).
		if p, refuse = ts.planPatch(ctx, files, false); refuse != nil {
			return *refuse, nil
		}
	}
	if err := ts.carryOut(ctx, p); err != nil {
		return failf("apply_patch: %v", err), nil
	}
	return structured(p.result()), nil
}

// patchDetail names every path a patch touches, for the gate, the audit
// log and a person asked: "a.go, b.go (new), c.go -> d.go, e.go (deleted)".
func patchDetail(files []*patch.File) string {
	parts := make([]string, len(files))
	for i, f := range files {
		switch f.Op {
		case patch.Add:
			parts[i] = f.NewPath + " (new)"
		case patch.Delete:
			parts[i] = f.OldPath + " (deleted)"
		case patch.Rename:
			parts[i] = f.OldPath + " -> " + f.NewPath
		default:
			parts[i] = f.NewPath
		}
	}
	return strings.Join(parts, ", ")
}

// patchPaths are every path a patch names: each file's old and new path.
func patchPaths(files []*patch.File) []string {
	var out []string
	for _, f := range files {
		for _, p := range []string{f.OldPath, f.NewPath} {
			if p != "" && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// planPatch reads every file the patch changes and applies its hunks in
// memory: the plan, or why the patch cannot apply (then nothing is
// written). With guard, every existing file it changes must pass the
// read-before-write guard.
func (ts *Toolset) planPatch(ctx context.Context, files []*patch.File, guard bool) (patchPlan, *Output) {
	refuse := func(format string, args ...any) (patchPlan, *Output) {
		out := failf("apply_patch: "+format, args...)
		return patchPlan{}, &out
	}
	sb := ts.opts.Sandbox
	var plan patchPlan
	var held int64
	resolved := map[string]string{} // a resolved existing file: the patch path that named it
	newPaths := map[string]bool{}   // the cleaned paths the patch creates
	madeDirs := map[string]bool{}   // the directories the plan makes so far
	for _, f := range files {
		if f.Op == patch.Add || f.Op == patch.Rename {
			newPaths[path.Clean(f.NewPath)] = true
		}
	}
	for _, f := range files {
		pf := plannedFile{f: f}
		if f.Op != patch.Add {
			fi, err := sb.Stat(ctx, f.OldPath)
			switch {
			case errors.Is(err, sandbox.ErrNotFound):
				return refuse("%s does not exist, but the patch %s: check the path with glob, or give it as a new file (--- /dev/null)", f.OldPath, opVerb(f.Op))
			case err != nil:
				return refuse("%s", describeErr(asOp(string(f.Op), err)))
			case fi.Kind != sandbox.KindFile:
				return refuse("%s is not a file: a patch changes files only", f.OldPath)
			}
			// One file by two names (a link) is patched once: the
			// second write would undo the first's change. The inode
			// tells where the tier knows it, the resolved path else.
			key := "path:" + fi.Path
			if fi.Inode != 0 {
				key = fmt.Sprintf("inode:%d", fi.Inode)
			}
			if other, dup := resolved[key]; dup {
				return refuse("%s and %s are the same file (through a link): patch it once, by one name", other, f.OldPath)
			}
			resolved[key] = f.OldPath
			if guard {
				if _, out := ts.checkOverwrite(ctx, f.OldPath); out != nil {
					out.Text = "apply_patch: " + out.Text
					return patchPlan{}, out
				}
			}
			if held += fi.Size; held > MaxPatchBytes {
				return refuse("the files the patch changes hold over %d bytes: split it into smaller patches", MaxPatchBytes)
			}
			if pf.old, err = sb.Read(ctx, f.OldPath); err != nil {
				return refuse("%s", describeErr(err))
			}
		}
		if f.Op == patch.Add || f.Op == patch.Rename {
			if _, err := sb.Stat(ctx, f.NewPath); err == nil {
				return refuse("%s already exists, but the patch %s: read it and patch it as a change, or choose another name", f.NewPath, opVerb(f.Op))
			} else if !errors.Is(err, sandbox.ErrNotFound) {
				return refuse("%s", describeErr(asOp(string(f.Op), err)))
			}
			dirs, out := ts.missingParents(ctx, f.NewPath, newPaths, madeDirs)
			if out != nil {
				return patchPlan{}, out
			}
			pf.mkdirs = dirs
		}
		text, err := patch.Apply(f, pf.old)
		if err != nil {
			return refuse("%v", err)
		}
		if held += int64(len(text)); held > MaxPatchBytes {
			return refuse("the files the patch changes would hold over %d bytes: split it into smaller patches", MaxPatchBytes)
		}
		pf.new = text
		pf.changed = f.Op == patch.Add || string(text) != string(pf.old)
		plan.files = append(plan.files, pf)
	}
	return plan, nil
}

// missingParents lists the directories above name that do not exist
// and that an earlier file of the plan does not make (made), outermost
// first, and adds them to made; a parent that is a file, or one the patch
// itself creates as a file, is refused.
func (ts *Toolset) missingParents(ctx context.Context, name string, newPaths, made map[string]bool) ([]string, *Output) {
	var missing []string
	for dir := path.Dir(path.Clean(name)); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if made[dir] {
			break // it and its parents are made for an earlier file
		}
		if newPaths[dir] {
			out := failf("apply_patch: %s is below %s, which the patch creates as a file", name, dir)
			return nil, &out
		}
		fi, err := ts.opts.Sandbox.Stat(ctx, dir)
		if errors.Is(err, sandbox.ErrNotFound) {
			missing = append(missing, dir)
			continue
		}
		if err != nil {
			out := failf("apply_patch: %s", describeErr(asOp("mkdir", err)))
			return nil, &out
		}
		if fi.Kind != sandbox.KindDir {
			out := failf("apply_patch: %s is below %s, which is not a directory", name, dir)
			return nil, &out
		}
		break
	}
	for i, j := 0, len(missing)-1; i < j; i, j = i+1, j-1 {
		missing[i], missing[j] = missing[j], missing[i]
	}
	for _, d := range missing {
		made[d] = true
	}
	return missing, nil
}

func opVerb(op patch.Op) string {
	switch op {
	case patch.Add:
		return "adds it"
	case patch.Delete:
		return "deletes it"
	case patch.Rename:
		return "renames it"
	}
	return "changes it"
}

// undoTimeout bounds putting files back after a failed patch; it runs
// even when the call's context has ended.
const undoTimeout = 30 * time.Second

// carryOut writes a plan, all or nothing: when a step fails, every step
// before it is undone (contents written back, deleted files written
// again, renames moved back, directories it made removed) and the error
// says what failed and whether everything was put back.
func (ts *Toolset) carryOut(ctx context.Context, p patchPlan) error {
	sb := ts.opts.Sandbox
	var undo []func(context.Context) error
	var done []string // paths written, for the guard's memory
	fail := func(err error) error {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
		defer cancel()
		var left []string
		for i := len(undo) - 1; i >= 0; i-- {
			if uerr := undo[i](uctx); uerr != nil {
				left = append(left, describeErr(uerr))
			}
		}
		// What was put back is not remembered for the guard: the
		// session reads it again before writing it.
		if len(left) > 0 {
			return fmt.Errorf("%s; putting back what was already changed failed too, check these by hand: %s", describeErr(err), strings.Join(left, "; "))
		}
		return fmt.Errorf("%s; nothing was changed (what was already written was put back)", describeErr(err))
	}
	for _, pf := range p.files {
		f := pf.f
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		for _, dir := range pf.mkdirs {
			if err := sb.Mkdir(ctx, dir); err != nil {
				return fail(err)
			}
			undo = append(undo, func(c context.Context) error { return sb.Remove(c, dir, false) })
		}
		switch f.Op {
		case patch.Add:
			if err := sb.Write(ctx, f.NewPath, pf.new); err != nil {
				return fail(err)
			}
			undo = append(undo, func(c context.Context) error { return sb.Remove(c, f.NewPath, false) })
			done = append(done, f.NewPath)
		case patch.Modify:
			if !pf.changed {
				continue
			}
			if err := sb.Write(ctx, f.NewPath, pf.new); err != nil {
				return fail(err)
			}
			undo = append(undo, func(c context.Context) error { return sb.Write(c, f.NewPath, pf.old) })
			done = append(done, f.NewPath)
		case patch.Delete:
			if err := sb.Remove(ctx, f.OldPath, false); err != nil {
				return fail(err)
			}
			undo = append(undo, func(c context.Context) error { return sb.Write(c, f.OldPath, pf.old) })
		case patch.Rename:
			if err := sb.Rename(ctx, f.OldPath, f.NewPath); err != nil {
				return fail(err)
			}
			undo = append(undo, func(c context.Context) error { return sb.Rename(c, f.NewPath, f.OldPath) })
			if pf.changed {
				if err := sb.Write(ctx, f.NewPath, pf.new); err != nil {
					return fail(err)
				}
				undo = append(undo, func(c context.Context) error { return sb.Write(c, f.NewPath, pf.old) })
			}
			done = append(done, f.NewPath)
		}
	}
	for _, d := range done {
		ts.afterWrite(ctx, d)
	}
	return nil
}

// result is the answer to a patch that applied.
func (p patchPlan) result() PatchResult {
	r := PatchResult{OK: true, Files: make([]PatchedFile, 0, len(p.files))}
	count := map[patch.Op]int{}
	added, removed := 0, 0
	for _, pf := range p.files {
		f := pf.f
		a, d := f.Stats()
		pf := PatchedFile{Path: f.Path(), Op: string(f.Op), Added: a, Removed: d}
		if f.Op == patch.Rename {
			pf.From = f.OldPath
		}
		r.Files = append(r.Files, pf)
		count[f.Op]++
		added += a
		removed += d
	}
	var ops []string
	for _, o := range []struct {
		op   patch.Op
		word string
	}{{patch.Modify, "modified"}, {patch.Add, "added"}, {patch.Delete, "deleted"}, {patch.Rename, "renamed"}} {
		if n := count[o.op]; n > 0 {
			ops = append(ops, fmt.Sprintf("%d %s", n, o.word))
		}
	}
	noun := "files"
	if len(p.files) == 1 {
		noun = "file"
	}
	r.Summary = fmt.Sprintf("%d %s (%s), +%d -%d lines", len(p.files), noun, strings.Join(ops, ", "), added, removed)
	return r
}
