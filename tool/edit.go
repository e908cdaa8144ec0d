package tool

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

type editArgs struct {
	Path       string  `json:"path"`
	OldString  *string `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll bool    `json:"replace_all,omitempty"`
}

func editFile(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a editArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	switch {
	case a.Path == "" || a.OldString == nil || a.NewString == nil:
		return failf("edit_file needs path, old_string and new_string"), nil
	case *a.OldString == "":
		return failf("old_string is empty: give the exact text to replace (use write_file to create a file)"), nil
	case *a.OldString == *a.NewString:
		return failf("old_string and new_string are the same: nothing to change"), nil
	}
	if out, bad := badPath("edit_file", a.Path); bad {
		return out, nil
	}
	sb := ts.opts.Sandbox
	if _, err := sb.Stat(ctx, a.Path); err != nil {
		return failf("%s", describeErr(asOp("edit", err))), nil
	}
	if _, refuse := ts.checkOverwrite(ctx, a.Path); refuse != nil {
		return *refuse, nil
	}
	// An edit that cannot apply is refused before the gate, so it never
	// uses up a person's answer or approval; where a person may have
	// decided, the file is read again after (it may have changed since).
	text, n, refuse := planEdit(ctx, sb, a)
	if refuse != nil {
		return *refuse, nil
	}
	if out, ok, err := ts.gate(ctx, permission.Write, "edit_file", a.Path, a); !ok {
		return out, err
	}
	if ts.personDecides() {
		if text, n, refuse = planEdit(ctx, sb, a); refuse != nil {
			return *refuse, nil
		}
	}
	text = strings.Replace(text, *a.OldString, *a.NewString, n)
	if err := sb.Write(ctx, a.Path, []byte(text)); err != nil {
		return failf("%s", describeErr(err)), nil
	}
	ts.afterWrite(ctx, a.Path)
	return structured(EditResult{OK: true, Path: a.Path, Replacements: n}), nil
}

// planEdit reads the file an edit applies to and checks the edit: the
// text, how many replacements, or why it cannot apply.
func planEdit(ctx context.Context, sb sandbox.Sandbox, a editArgs) (string, int, *Output) {
	refuse := func(format string, args ...any) (string, int, *Output) {
		out := failf(format, args...)
		return "", 0, &out
	}
	data, err := sb.Read(ctx, a.Path)
	if err != nil {
		return refuse("%s", describeErr(err))
	}
	text := string(data)
	n := strings.Count(text, *a.OldString)
	switch {
	case n == 0:
		return refuse("old_string not found in %s: it must match the file exactly, including spaces and line breaks", a.Path)
	case n > 1 && !a.ReplaceAll:
		return refuse("old_string appears %d times in %s: include more surrounding text to make it unique, or set replace_all", n, a.Path)
	}
	if !a.ReplaceAll {
		n = 1
	}
	// Size the result before building it: a short file and a long
	// new_string must not allocate terabytes only to be refused.
	if size := int64(len(text)) + int64(n)*(int64(len(*a.NewString))-int64(len(*a.OldString))); size > sandbox.MaxFileSize {
		return refuse("the edited %s would be %d bytes, over the %d byte limit", a.Path, size, sandbox.MaxFileSize)
	}
	return text, n, nil
}
