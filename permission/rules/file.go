package rules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/policy"
)

// MaxFile is the largest rules file Load reads, in bytes.
const MaxFile = 1 << 20

// Load reads the rules file at path (Parse) and checks its rules (New).
// Every error — a missing or unreadable file, a YAML error, a bad rule —
// matches permission.ErrConfig and is one line naming the file and line.
func Load(path string) (*Set, error) {
	f, _, err := policy.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("%w: rules file: %v", permission.ErrConfig, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: rules file %s: %v", permission.ErrConfig, path, err)
	}
	if len(data) > MaxFile {
		return nil, fmt.Errorf("%w: rules file %s is larger than %d bytes: split it or remove rules", permission.ErrConfig, path, MaxFile)
	}
	rs, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	return New(rs)
}

// Parse reads a rules file's text: a YAML mapping whose one key, rules,
// holds a list of rules, each a mapping with exactly one of allow, ask or
// deny (whose value is the kind and the pattern: "shell npm test *") and
// an optional reason:
//
//	rules:
//	  - allow: shell npm test *
//	  - deny: read .env
//	    reason: secrets
//
// file names the text in origins and errors. Unknown keys, a value that
// is not text, and a second YAML document are errors; each rule's
// Origin is file and the rule's line. Parse checks the file's shape, not
// the patterns: New does (Load does both). Errors match
// permission.ErrConfig.
func Parse(file string, data []byte) ([]Rule, error) {
	fail := func(line int, format string, args ...any) error {
		o := Origin{File: file, Line: line}
		return fmt.Errorf("%w: %s: %s", permission.ErrConfig, o, fmt.Sprintf(format, args...))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fail(0, "%s", strings.Join(strings.Fields(err.Error()), " "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fail(extra.Line, "more than one YAML document: keep one per file")
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fail(root.Line, "a rules file is a mapping with the key rules (rules: [- allow: shell git status])")
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "rules" {
			return nil, fail(k.Line, "unknown key %q: a rules file has one key, rules", k.Value)
		}
		list = v
	}
	if list == nil || list.Tag == "!!null" {
		return nil, nil
	}
	if list.Kind != yaml.SequenceNode {
		return nil, fail(list.Line, "rules is a list: write each rule on a line starting with \"- \"")
	}
	var out []Rule
	for _, item := range list.Content {
		r, err := parseItem(item, fail)
		if err != nil {
			return nil, err
		}
		r.Origin = Origin{File: file, Line: item.Line}
		out = append(out, r)
	}
	return out, nil
}

// parseItem reads one rule of a rules file.
func parseItem(item *yaml.Node, fail func(int, string, ...any) error) (Rule, error) {
	var r Rule
	if item.Kind != yaml.MappingNode {
		return r, fail(item.Line, "a rule is a mapping such as \"- deny: shell rm -rf *\" (with an optional reason: ...)")
	}
	for i := 0; i+1 < len(item.Content); i += 2 {
		k, v := item.Content[i], item.Content[i+1]
		if v.Kind != yaml.ScalarNode || (v.Tag != "!!str" && v.Tag != "!!int" && v.Tag != "!!float" && v.Tag != "!!bool") {
			return r, fail(v.Line, "%s takes text, as in %s: shell git status (quote it if it starts with * or holds \": \" or \" #\")", k.Value, k.Value)
		}
		switch d := Decision(k.Value); {
		case k.Value == "reason":
			r.Reason = v.Value
		case slices.Contains(Decisions, d):
			if r.Decision != "" {
				return r, fail(k.Line, "a rule has one decision, not %s and %s: write two rules", r.Decision, d)
			}
			r.Decision = d
			kind, pattern, _ := strings.Cut(strings.TrimSpace(v.Value), " ")
			r.Kind, r.Pattern = Kind(kind), strings.TrimSpace(pattern)
			if r.Kind == "edit" {
				r.Kind = KindWrite
			}
		default:
			return r, fail(k.Line, "unknown key %q in a rule: a rule has one of allow, ask or deny, and may have a reason", k.Value)
		}
	}
	if r.Decision == "" {
		return r, fail(item.Line, "a rule needs allow, ask or deny, as in \"- deny: shell rm -rf *\"")
	}
	return r, nil
}

// Marshal writes rules as a rules file that Load reads back as the same
// rules (in order, Origins aside): each rule's origin, when it has one,
// becomes a comment on its line. Rules New refuses are an error
// (matching permission.ErrConfig), so Marshal never writes a file that
// cannot be loaded.
func Marshal(rules []Rule) ([]byte, error) {
	if _, err := New(rules); err != nil {
		return nil, err
	}
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	list := &yaml.Node{Kind: yaml.SequenceNode}
	for _, r := range rules {
		kind := r.Kind
		if kind == "edit" {
			kind = KindWrite
		}
		text := string(kind)
		if r.Pattern != "" {
			text += " " + r.Pattern
		}
		item := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{str(string(r.Decision)), str(text)}}
		if o := r.Origin.String(); o != "" {
			item.Content[1].LineComment = "from " + o
		}
		if r.Reason != "" {
			item.Content = append(item.Content, str("reason"), str(r.Reason))
		}
		list.Content = append(list.Content, item)
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{str("rules"), list}}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root},
		HeadComment: "hutch permission rules (docs/permissions.md): the strictest matching rule wins, deny over ask over allow"}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encoding rules: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding rules: %w", err)
	}
	return b.Bytes(), nil
}

// Write writes rules (Marshal) to path, replacing it whole or not at all
// (WriteFile), mode 0644.
func Write(path string, rules []Rule) error {
	data, err := Marshal(rules)
	if err != nil {
		return err
	}
	if err := WriteFile(path, data, nil); err != nil {
		return fmt.Errorf("writing rules to %s: %w", path, err)
	}
	return nil
}

// WriteFile writes data to path whole or not at all: into a temporary
// file in path's directory (mode 0644, synced), which check, when not
// nil, reads first, then renamed over path. After a failure the
// temporary file is gone and path is as it was.
func WriteFile(path string, data []byte, check func(tmp string) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && check != nil {
		err = check(tmp.Name())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
