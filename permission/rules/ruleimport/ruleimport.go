// Package ruleimport turns other tools' permission rules into hutch's: a
// rules file (package rules) and, where the source says something about
// the sandbox, a policy file (package policy). It reads
//
//   - Codex: Starlark .rules files (prefix_rule, network_rule) and
//     config.toml (sandbox_mode, [sandbox_workspace_write],
//     approval_policy);
//   - Claude Code: settings files (permissions: allow, ask, deny,
//     defaultMode, additionalDirectories), merged in Claude Code's order
//     of precedence;
//   - sandbox-runtime (srt): its settings file (filesystem, network);
//   - Gemini CLI: policy TOML files ([[rule]]).
//
// An import never widens silently: each source item either maps (a Note
// in Result.Mapped) or is reported with why it does not (Result.Reported),
// and a mapping whose meaning differs from the source's is reported too.
// docs/permissions.md ("Importing rules") lists what maps and what does
// not, source by source.
package ruleimport

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/permission/rules"
	"github.com/hutchsandbox/hutch/policy"
)

// Source names a tool whose rules Import reads.
type Source string

// The sources.
const (
	Codex  Source = "codex"
	Claude Source = "claude"
	SRT    Source = "srt"
	Gemini Source = "gemini"
)

// Sources lists every source.
var Sources = []Source{Codex, Claude, SRT, Gemini}

// MaxFile is the largest source file Import reads, in bytes.
const MaxFile = 1 << 20

// ErrImport matches every error Import returns: a file that cannot be
// read or parsed, a source setting hutch refuses to map (Codex's
// danger-full-access without Options.FullAccess), or ErrExamples.
var ErrImport = errors.New("cannot import rules")

// ErrExamples matches the error Import returns when a Codex rule's match
// or not_match example disagrees with the imported hutch rules (unless
// Options.Force).
var ErrExamples = fmt.Errorf("%w: a rule's examples do not hold for the imported rules", ErrImport)

// Options tune an import.
type Options struct {
	// Root is the sandbox root, an absolute directory: path rules are
	// written relative to it and policy paths resolved against it. ""
	// is the current directory, except for Claude Code, where it is the
	// project a project settings file belongs to (the parent of its
	// .claude directory), else the current directory.
	Root string
	// Home is the user's home directory (~); "" is os.UserHomeDir.
	Home string
	// FullAccess maps Codex's sandbox_mode danger-full-access to hutch's
	// widest policy; without it that setting is refused.
	FullAccess bool
	// Force keeps an import whose Codex examples fail (they are still
	// reported).
	Force bool
}

// Note is one line of an import's account: where in the source (a
// "file:line", a "file", or "") and what happened.
type Note struct {
	Where string
	Text  string
}

// String is "where: text", or the text alone.
func (n Note) String() string {
	if n.Where == "" {
		return n.Text
	}
	return n.Where + ": " + n.Text
}

// Result is what an import made.
type Result struct {
	// Rules are hutch's rules, each with the Origin it came from.
	Rules []rules.Rule
	// Policy is the sandbox policy the source implies, or nil when the
	// source says nothing about the sandbox. Its paths are absolute.
	Policy *policy.Policy
	// Mapped says what mapped, one note a source item.
	Mapped []Note
	// Reported says what did not map, or maps with another meaning,
	// one note an item.
	Reported []Note
	// Mode is the permission mode the source suggests ("" for none),
	// and ModeWhy why.
	Mode    permission.Mode
	ModeWhy string
	// Failed lists the Codex examples that do not hold for the imported
	// rules (also in Reported).
	Failed []Note
}

// Summary is the import's last line: "N rules and P policy settings
// mapped, M reported".
func (r *Result) Summary() string {
	return fmt.Sprintf("%d rules and %d policy settings mapped, %d reported", len(r.Rules), r.policySettings(), len(r.Reported))
}

// policySettings counts the entries of the policy.
func (r *Result) policySettings() int {
	p := r.Policy
	if p == nil {
		return 0
	}
	n := len(p.Read) + len(p.Write) + len(p.Deny) + len(p.Protect) + len(p.Hosts) + len(p.DenyHosts)
	if p.Network != "" {
		n++
	}
	return n
}

// Print writes the account of r to w: each mapped item, each reported
// one, the mode suggestion, and the summary.
func (r *Result) Print(w io.Writer) {
	for _, n := range r.Mapped {
		fmt.Fprintf(w, "mapped: %s\n", n)
	}
	for _, n := range r.Reported {
		fmt.Fprintf(w, "not mapped: %s\n", n)
	}
	if r.Mode != "" {
		fmt.Fprintf(w, "mode: run hutch with --mode %s (%s)\n", r.Mode, r.ModeWhy)
	}
	fmt.Fprintln(w, r.Summary())
}

// importer collects an import's result.
type importer struct {
	opts Options
	res  Result
}

func (im *importer) mapped(where, format string, args ...any) {
	im.res.Mapped = append(im.res.Mapped, Note{where, fmt.Sprintf(format, args...)})
}

func (im *importer) report(where, format string, args ...any) {
	im.res.Reported = append(im.res.Reported, Note{where, fmt.Sprintf(format, args...)})
}

// add adds rule r if New accepts it, noting it as mapped from what;
// otherwise it reports why not. It returns whether r was added.
func (im *importer) add(r rules.Rule, what string) bool {
	if msg := ruleProblem(r); msg != "" {
		im.report(r.Origin.String(), "%s: hutch cannot write it as a rule: %s", what, msg)
		return false
	}
	im.res.Rules = append(im.res.Rules, r)
	im.mapped(r.Origin.String(), "%s -> %s", what, r)
	return true
}

// ruleProblem is why rules.New refuses r, without the error's prefix; ""
// when it accepts r.
func ruleProblem(r rules.Rule) string {
	r.Origin = rules.Origin{}
	_, err := rules.New([]rules.Rule{r})
	if err == nil {
		return ""
	}
	msg := oneLine(err)
	prefix := permission.ErrConfig.Error() + ": rule " + strconv.Quote(r.String()) + ": "
	return strings.TrimPrefix(msg, prefix)
}

// policy returns the result's policy, making it on first use.
func (im *importer) policy() *policy.Policy {
	if im.res.Policy == nil {
		im.res.Policy = &policy.Policy{}
	}
	return im.res.Policy
}

// oneLine is err's text on one line ("" for nil).
func oneLine(err error) string {
	if err == nil {
		return ""
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Import reads files in the format of src and maps them to hutch's rules
// and policy. Errors match ErrImport and name the file (and line where
// known). When Codex examples fail and opts.Force is false, Import returns
// both the result (to show the account) and an error matching
// ErrExamples.
func Import(src Source, files []string, opts Options) (*Result, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no files: name the %s files to import", ErrImport, src)
	}
	var err error
	if opts.Home == "" {
		if opts.Home, err = os.UserHomeDir(); err != nil {
			opts.Home = "/nonexistent-home"
		}
	}
	if opts.Root == "" && src == Claude {
		opts.Root = claudeProject(files, opts.Home)
	}
	if opts.Root == "" {
		if opts.Root, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("%w: the current directory: %w", ErrImport, err)
		}
	}
	if !filepath.IsAbs(opts.Root) {
		if opts.Root, err = filepath.Abs(opts.Root); err != nil {
			return nil, fmt.Errorf("%w: root: %w", ErrImport, err)
		}
	}
	opts.Root = filepath.Clean(opts.Root)
	im := &importer{opts: opts}
	switch src {
	case Codex:
		err = im.codex(files)
	case Claude:
		err = im.claude(files)
	case SRT:
		err = im.srt(files)
	case Gemini:
		err = im.gemini(files)
	default:
		return nil, fmt.Errorf("%w: unknown source %q: choose codex, claude, srt or gemini", ErrImport, src)
	}
	if err != nil {
		return nil, err
	}
	if _, err := rules.New(im.res.Rules); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrImport, err) // add checked each rule; this cannot fail
	}
	if len(im.res.Failed) > 0 && !opts.Force {
		more := ""
		if n := len(im.res.Failed) - 1; n > 0 {
			more = fmt.Sprintf(" (and %d more)", n)
		}
		return &im.res, fmt.Errorf("%w: %s%s; fix the rule or its examples, or pass --force to import it anyway", ErrExamples, im.res.Failed[0], more)
	}
	return &im.res, nil
}

// readFile reads a source file (at most MaxFile bytes, a regular file).
func readFile(path string) ([]byte, error) {
	f, _, err := policy.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrImport, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrImport, path, err)
	}
	if len(data) > MaxFile {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes: split it", ErrImport, path, MaxFile)
	}
	return data, nil
}

// lineOf is the 1-based line of byte offset off in data.
func lineOf(data []byte, off int) int {
	off = min(max(off, 0), len(data))
	return 1 + strings.Count(string(data[:off]), "\n")
}

// where is "file:line", or "file" for line 0.
func where(file string, line int) string {
	return rules.Origin{File: file, Line: line}.String()
}

// ErrExists matches the error WriteRules and WritePolicy return for an
// existing output without force.
var ErrExists = errors.New("output exists")

// refuseExisting fails when path exists and force is false.
func refuseExisting(path string, force bool) error {
	if force {
		return nil
	}
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%w: %s exists: pass --force to replace it, or name another file", ErrExists, path)
	}
	return nil
}

// WriteRules writes rs as a hutch rules file at path (rules.Write) and
// loads it back (rules.Load) to prove it round-trips. An existing path is
// refused unless force.
func WriteRules(path string, rs []rules.Rule, force bool) error {
	if err := refuseExisting(path, force); err != nil {
		return err
	}
	if err := rules.Write(path, rs); err != nil {
		return err
	}
	set, err := rules.Load(path)
	if err != nil {
		return fmt.Errorf("the rules written to %s do not load back: %w", path, err)
	}
	if got := set.Rules(); len(got) != len(rs) {
		return fmt.Errorf("the rules written to %s load back as %d rules, not %d", path, len(got), len(rs))
	}
	return nil
}

// MarshalPolicy writes p's read, write, deny, protect and network
// settings in hutch's policy-file grammar (docs/isolated.md); the rest of
// p is not written (a policy file widens policy.Default, which sets
// them).
func MarshalPolicy(p policy.Policy) ([]byte, error) {
	type network struct {
		Allow []string `yaml:"allow,omitempty,flow"`
		Deny  []string `yaml:"deny,omitempty,flow"`
	}
	type form struct {
		Read    []string `yaml:"read,omitempty"`
		Write   []string `yaml:"write,omitempty"`
		Deny    []string `yaml:"deny,omitempty"`
		Protect []string `yaml:"protect,omitempty"`
		Network any      `yaml:"network,omitempty"`
	}
	f := form{Read: p.Read, Write: p.Write, Deny: p.Deny, Protect: p.Protect}
	switch {
	case p.Network == policy.NetworkAllow || (p.Network == "" && len(p.Hosts) > 0):
		f.Network = network{Allow: p.Hosts, Deny: p.DenyHosts}
	case p.Network != "":
		f.Network = string(p.Network)
	}
	out, err := yaml.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encoding the policy: %w", err)
	}
	head := "# hutch sandbox policy (docs/isolated.md), written by hutch rules import\n"
	return append([]byte(head), out...), nil
}

// WritePolicy writes p (MarshalPolicy) at path, whole or not at all, after
// checking that policy.Load reads it. An existing path is refused unless
// force.
func WritePolicy(path string, p policy.Policy, force bool) error {
	if err := refuseExisting(path, force); err != nil {
		return err
	}
	data, err := MarshalPolicy(p)
	if err != nil {
		return err
	}
	check := func(tmp string) error {
		if _, err := policy.Load(tmp); err != nil {
			return fmt.Errorf("the policy does not load back: %w", err)
		}
		return nil
	}
	if err := rules.WriteFile(path, data, check); err != nil {
		return fmt.Errorf("writing the policy to %s: %w", path, err)
	}
	return nil
}

// addUnique appends s to *list unless it is there.
func addUnique(list *[]string, s string) {
	if !slices.Contains(*list, s) {
		*list = append(*list, s)
	}
}

// expandHome resolves a leading ~ or ~/ against home.
func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}

// within reports whether path is dir or below it (both clean, absolute).
func within(path, dir string) bool {
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// hasGlob reports whether s holds a glob character.
func hasGlob(s string) bool { return strings.ContainsAny(s, "*?[") }
