package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hutchsandbox/hutch/internal/textdiff"
	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

// MaxEdits is the most edits one edit_file call takes.
const MaxEdits = 100

// MaxDiffBytes bounds the diff an edit_file answer carries; a longer one
// is cut with a line saying how much was left out.
const MaxDiffBytes = 64 << 10

// anEdit is one replacement of edit_file.
type anEdit struct {
	OldString  *string `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll bool    `json:"replace_all,omitempty"`
}

type editArgs struct {
	Path       string   `json:"path"`
	OldString  *string  `json:"old_string,omitempty"`
	NewString  *string  `json:"new_string,omitempty"`
	ReplaceAll bool     `json:"replace_all,omitempty"`
	Edits      []anEdit `json:"edits,omitempty"`
	DryRun     bool     `json:"dry_run,omitempty"`
}

// list is the call's edits in order, whichever way they were given, or
// why they cannot be taken.
func (a editArgs) list() ([]anEdit, error) {
	single := a.OldString != nil || a.NewString != nil || a.ReplaceAll
	switch {
	case a.Edits != nil && single:
		return nil, fmt.Errorf("give either old_string and new_string or edits, not both")
	case a.Edits == nil && !single:
		return nil, fmt.Errorf("edit_file needs path and old_string and new_string, or path and edits")
	case a.Edits != nil && len(a.Edits) == 0:
		return nil, fmt.Errorf("edits is empty: give at least one {old_string, new_string}")
	case len(a.Edits) > MaxEdits:
		return nil, fmt.Errorf("%d edits in one call, over the limit of %d: split them over several calls", len(a.Edits), MaxEdits)
	}
	edits := a.Edits
	if edits == nil {
		edits = []anEdit{{a.OldString, a.NewString, a.ReplaceAll}}
	}
	for i, e := range edits {
		var problem string
		switch {
		case e.OldString == nil || e.NewString == nil:
			problem = "needs old_string and new_string"
		case *e.OldString == "":
			problem = "old_string is empty: give the exact text to replace (use write_file to create a file)"
		case *e.OldString == *e.NewString:
			problem = "old_string and new_string are the same: nothing to change"
		default:
			continue
		}
		return nil, fmt.Errorf("%s%s", editLabel(len(a.Edits), i), problem)
	}
	return edits, nil
}

// editLabel names edit i (from 0) in a message when the call gave edits:
// "edit 2: ".
func editLabel(n, i int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("edit %d: ", i+1)
}

func editFile(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a editArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if a.Path == "" {
		return failf("edit_file needs a path"), nil
	}
	edits, err := a.list()
	if err != nil {
		return failf("%v", err), nil
	}
	if out, bad := badPath("edit_file", a.Path); bad {
		return out, nil
	}
	sb := ts.opts.Sandbox
	if _, err := sb.Stat(ctx, a.Path); err != nil {
		return failf("%s", describeErr(asOp("edit", err))), nil
	}
	if a.DryRun {
		// A dry run writes nothing: it is a read of the file (what the
		// diff shows of it), gated and audited as one.
		p, refuse := planEdit(ctx, sb, a.Path, edits, len(a.Edits))
		if refuse != nil {
			return *refuse, nil
		}
		if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Read, Tool: "edit_file", Detail: a.Path, Paths: ts.rulePaths(a.Path)}, a); !ok {
			return out, err
		}
		return structured(p.result(a.Path, true)), nil
	}
	if _, refuse := ts.checkOverwrite(ctx, a.Path); refuse != nil {
		return *refuse, nil
	}
	// Edits that cannot apply are refused before the gate, so they never
	// use up a person's answer or approval; where a person may have
	// decided, the file is read again after (it may have changed since).
	p, refuse := planEdit(ctx, sb, a.Path, edits, len(a.Edits))
	if refuse != nil {
		return *refuse, nil
	}
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Write, Tool: "edit_file", Detail: a.Path, Paths: ts.rulePaths(a.Path)}, a); !ok {
		return out, err
	}
	if ts.personDecides() {
		if p, refuse = planEdit(ctx, sb, a.Path, edits, len(a.Edits)); refuse != nil {
			return *refuse, nil
		}
	}
	if err := sb.Write(ctx, a.Path, []byte(p.text)); err != nil {
		return failf("%s", describeErr(err)), nil
	}
	ts.afterWrite(ctx, a.Path)
	return structured(p.result(a.Path, false)), nil
}

// An editPlan is a file's text before and after a call's edits.
type editPlan struct {
	old, text    string
	replacements int
}

// result is the answer to the call: what changed, as a bounded diff.
func (p editPlan) result(path string, dry bool) EditResult {
	d := textdiff.Unified(p.old, p.text, textdiff.Options{OldName: "a/" + path, NewName: "b/" + path, MaxBytes: MaxDiffBytes})
	return EditResult{OK: true, Path: path, Replacements: p.replacements, DryRun: dry,
		Diff: d.Text, LinesAdded: d.Added, LinesDeleted: d.Deleted, DiffCut: d.Cut}
}

// planEdit reads the file and applies the edits in order, each to the
// text the ones before it left, in memory: the plan, or why the edits
// cannot apply (then none is). given is how many edits the call listed
// in edits (0 for the single form), to name the one that fails.
func planEdit(ctx context.Context, sb sandbox.Sandbox, path string, edits []anEdit, given int) (editPlan, *Output) {
	refuse := func(format string, args ...any) (editPlan, *Output) {
		out := failf(format, args...)
		return editPlan{}, &out
	}
	data, err := sb.Read(ctx, path)
	if err != nil {
		return refuse("%s", describeErr(err))
	}
	text := string(data) // one copy: the edits make their own
	p := editPlan{old: text, text: text}
	for i, e := range edits {
		label, after := editLabel(given, i), ""
		if i > 0 {
			after = " (after the edits before it)"
		}
		n := strings.Count(p.text, *e.OldString)
		switch {
		case n == 0:
			return refuse("%sold_string not found in %s%s: it must match the file exactly, including spaces and line breaks", label, path, after)
		case n > 1 && !e.ReplaceAll:
			return refuse("%sold_string appears %d times in %s%s: include more surrounding text to make it unique, or set replace_all", label, n, path, after)
		}
		if !e.ReplaceAll {
			n = 1
		}
		// Size the result before building it: a short file and a long
		// new_string must not allocate terabytes only to be refused.
		if size := int64(len(p.text)) + int64(n)*(int64(len(*e.NewString))-int64(len(*e.OldString))); size > sandbox.MaxFileSize {
			return refuse("%sthe edited %s would be %d bytes, over the %d byte limit", label, path, size, sandbox.MaxFileSize)
		}
		p.text = strings.Replace(p.text, *e.OldString, *e.NewString, n)
		p.replacements += n
	}
	if p.text == p.old {
		return refuse("the edits leave %s as it was: nothing to change", path)
	}
	return p, nil
}
