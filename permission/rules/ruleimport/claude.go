package ruleimport

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/permission/rules"
)

// claudeScope is a settings file's place in Claude Code's order of
// precedence, told by the file's path (docs/permissions.md).
type claudeScope int

// The scopes, lowest first.
const (
	scopeUser    claudeScope = iota + 1 // ~/.claude/settings.json
	scopeProject                        // <project>/.claude/settings.json
	scopeLocal                          // <project>/.claude/settings.local.json
	scopeCLI                            // any other name: claude --settings FILE
	scopeManaged                        // managed-settings.json
)

func (s claudeScope) String() string {
	return [...]string{"", "user", "project", "local", "command line", "managed"}[s]
}

// scopeOf tells a settings file's scope by its path.
func scopeOf(path, home string) claudeScope {
	abs, _ := filepath.Abs(path)
	dir := filepath.Dir(abs)
	switch base := filepath.Base(abs); {
	case base == "managed-settings.json":
		return scopeManaged
	case base == "settings.local.json" && filepath.Base(dir) == ".claude":
		return scopeLocal
	case base == "settings.json" && filepath.Base(dir) == ".claude":
		if dir == filepath.Join(home, ".claude") {
			return scopeUser
		}
		return scopeProject
	}
	return scopeCLI
}

// claudeProject is the project the first project or local settings file
// among files belongs to (the parent of its .claude directory), or "".
func claudeProject(files []string, home string) string {
	for _, f := range files {
		if s := scopeOf(f, home); s == scopeProject || s == scopeLocal {
			abs, err := filepath.Abs(f)
			if err == nil {
				return filepath.Dir(filepath.Dir(abs))
			}
		}
	}
	return ""
}

// settingsBase is what a Claude Code path rule's leading "/" means for
// the settings file at path: the parent of its .claude directory, else
// the file's own directory.
func settingsBase(path string) string {
	abs, _ := filepath.Abs(path)
	dir := filepath.Dir(abs)
	if filepath.Base(dir) == ".claude" {
		return filepath.Dir(dir)
	}
	return dir
}

// claudeFile is one parsed settings file.
type claudeFile struct {
	path  string
	scope claudeScope
	root  *jnode
}

// claude imports Claude Code settings files: their rules in every scope
// (Claude Code combines the lists of every file), defaultMode from the
// highest scope that sets it.
func (im *importer) claude(files []string) error {
	var parsed []claudeFile
	for _, f := range files {
		n, err := readJSONObject(f, "a settings file")
		if err != nil {
			return err
		}
		parsed = append(parsed, claudeFile{path: f, scope: scopeOf(f, im.opts.Home), root: n})
	}
	slices.SortStableFunc(parsed, func(a, b claudeFile) int { return cmp.Compare(b.scope, a.scope) })
	modeSet := ""
	for _, cf := range parsed {
		for i, k := range cf.root.keys {
			v := cf.root.vals[i]
			switch k {
			case "$schema":
			case "permissions":
				if err := im.claudePermissions(cf, v, &modeSet); err != nil {
					return err
				}
			default:
				im.report(where(cf.path, v.line), "%s: not a permission setting; not imported", k)
			}
		}
	}
	return nil
}

// claudePermissions maps one file's permissions object.
func (im *importer) claudePermissions(cf claudeFile, perms *jnode, modeSet *string) error {
	if perms.kind != 'o' {
		return fmt.Errorf("%w: %s: permissions is %s: write an object with allow, ask and deny lists", ErrImport, where(cf.path, perms.line), perms.kindName())
	}
	for i, k := range perms.keys {
		v := perms.vals[i]
		w := where(cf.path, v.line)
		switch k {
		case "allow", "ask", "deny":
			entries, err := v.strings()
			if err != nil {
				return fmt.Errorf("%w: %s: permissions.%s %s", ErrImport, w, k, oneLine(err))
			}
			for _, e := range entries {
				im.claudeEntry(rules.Decision(k), e.str, cf.path, e.line)
			}
		case "defaultMode":
			if v.kind != 's' {
				return fmt.Errorf("%w: %s: defaultMode is %s: write default, acceptEdits, plan, dontAsk or bypassPermissions", ErrImport, w, v.kindName())
			}
			if *modeSet != "" {
				im.report(w, "defaultMode %s: overridden by %s, which Claude Code ranks higher", v.str, *modeSet)
				continue
			}
			*modeSet = fmt.Sprintf("%s (%s settings)", w, cf.scope)
			im.claudeMode(w, v.str)
		case "additionalDirectories":
			dirs, err := v.strings()
			if err != nil {
				return fmt.Errorf("%w: %s: additionalDirectories %s", ErrImport, w, oneLine(err))
			}
			for _, d := range dirs {
				im.claudeDirectory(where(cf.path, d.line), d.str)
			}
		default:
			im.report(w, "permissions.%s: no hutch equivalent; not imported", k)
		}
	}
	return nil
}

// claudeMode turns defaultMode into a mode suggestion.
func (im *importer) claudeMode(w, mode string) {
	switch mode {
	case "default":
		im.res.Mode, im.res.ModeWhy = permission.Ask, w+": defaultMode default asks before what no rule allows"
	case "plan":
		im.res.Mode, im.res.ModeWhy = permission.ReadOnly, w+": defaultMode plan reads and changes nothing"
	case "dontAsk":
		im.res.Mode, im.res.ModeWhy = permission.ReadOnly, w+": defaultMode dontAsk refuses what no rule allows (hutch's read_only still reads)"
	case "bypassPermissions", "auto":
		im.res.Mode, im.res.ModeWhy = permission.Auto, w+": defaultMode "+mode+" asks nothing"
		im.report(w, "defaultMode %s: hutch's auto mode allows every call; the sandbox policy is then all that bounds commands: give one (--policy)", mode)
	case "acceptEdits":
		im.report(w, "defaultMode acceptEdits: hutch has no mode that allows edits and asks for commands; use --mode ask with allow: write rules for what may change")
	default:
		im.report(w, "defaultMode %q: unknown to Claude Code and hutch; no mode suggested", mode)
	}
}

// claudeDirectory maps an additionalDirectories entry into the policy's
// writable paths.
func (im *importer) claudeDirectory(w, dir string) {
	abs := expandHome(dir, im.opts.Home)
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(im.opts.Root, abs)
	}
	abs = filepath.Clean(abs)
	p := im.policy()
	addUnique(&p.Write, im.opts.Root)
	addUnique(&p.Write, abs)
	im.mapped(w, "additionalDirectories %s -> policy write %s (with the root)", dir, abs)
	im.report(w, "additionalDirectories %s: hutch's file tools stay below the root; commands may write it (policy write)", dir)
}

// ErrEntry matches the errors ParseClaudeEntry returns.
var ErrEntry = errors.New("not a Claude Code permission rule")

// ParseClaudeEntry splits a Claude Code permission rule, "Tool" or
// "Tool(specifier)", into its tool and specifier (hasSpec tells "Bash"
// from "Bash()"). The tool is letters, digits, _ and -; the specifier is
// everything between the first "(" and the final ")".
func ParseClaudeEntry(s string) (tool, spec string, hasSpec bool, err error) {
	i := strings.IndexByte(s, '(')
	tool = s
	if i >= 0 {
		if !strings.HasSuffix(s, ")") || len(s) < i+2 {
			return "", "", false, fmt.Errorf("%w: %q opens a ( that does not close at its end: write Tool or Tool(specifier)", ErrEntry, s)
		}
		tool, spec, hasSpec = s[:i], s[i+1:len(s)-1], true
	}
	if tool == "" || strings.Trim(tool, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
		return "", "", false, fmt.Errorf("%w: %q: a tool name is letters, digits, _ and - (Bash, Read, mcp__server__tool)", ErrEntry, s)
	}
	return tool, spec, hasSpec, nil
}

// claudeEntry maps one allow, ask or deny entry.
func (im *importer) claudeEntry(d rules.Decision, entry, file string, line int) {
	o := rules.Origin{File: file, Line: line}
	w := o.String()
	what := fmt.Sprintf("%s %s", d, entry)
	tool, spec, hasSpec, err := ParseClaudeEntry(entry)
	if err != nil {
		im.report(w, "%s: %s", what, oneLine(err))
		return
	}
	rule := func(k rules.Kind, pattern string) rules.Rule {
		return rules.Rule{Decision: d, Kind: k, Pattern: pattern, Origin: o}
	}
	if !hasSpec || spec == "*" {
		switch tool {
		case "Bash":
			im.add(rule(rules.KindShell, "*"), what)
		case "Read":
			im.add(rule(rules.KindRead, "*"), what)
		case "Edit", "Write", "MultiEdit", "NotebookEdit":
			im.add(rule(rules.KindWrite, "*"), what)
		case "WebFetch":
			im.add(rule(rules.KindFetch, "*"), what)
		case "WebSearch":
			im.add(rule(rules.KindSearch, ""), what)
		case "Glob", "Grep", "LS":
			name := map[string]string{"Glob": "glob", "Grep": "grep", "LS": "list"}[tool]
			im.add(rule(rules.KindTool, name), what)
		default:
			im.claudeOther(w, what, tool)
		}
		return
	}
	switch tool {
	case "Bash":
		pattern, note, err := claudeShell(spec)
		if err != nil {
			im.report(w, "%s: %s", what, err)
			return
		}
		if im.add(rule(rules.KindShell, pattern), what) && note != "" {
			im.report(w, "%s: %s", what, note)
		}
	case "Read", "Edit", "Write", "MultiEdit", "NotebookEdit":
		kind := rules.KindWrite
		if tool == "Read" {
			kind = rules.KindRead
		}
		pattern, err := claudePath(spec, settingsBase(file), im.opts.Root, im.opts.Home)
		if err != nil {
			im.report(w, "%s: %s", what, err)
			return
		}
		im.add(rule(kind, pattern), what)
	case "WebFetch":
		host, ok := strings.CutPrefix(spec, "domain:")
		if !ok {
			im.report(w, "%s: hutch's fetch rules match hosts; write WebFetch(domain:example.com)", what)
			return
		}
		im.add(rule(rules.KindFetch, strings.TrimSpace(host)), what)
	default:
		if strings.HasPrefix(tool, "mcp__") {
			im.claudeOther(w, what, tool)
			return
		}
		im.report(w, "%s: %s(...) has no hutch equivalent; not imported", what, tool)
	}
}

// claudeOther reports a tool hutch has no rule for.
func (im *importer) claudeOther(w, what, tool string) {
	if strings.HasPrefix(tool, "mcp__") {
		im.report(w, "%s: skipped: an MCP server's tool is that server's to gate; hutch's rules cover hutch's own tools", what)
		return
	}
	im.report(w, "%s: Claude Code's %s tool has no hutch equivalent; not imported", what, tool)
}

// claudeShell maps a Bash(...) specifier to a hutch shell pattern: a
// final ":*" or " *" is any further words; a final "*" after a word is
// read as " *" (and noted: Claude Code would match a longer word too);
// a "*" anywhere else cannot be written.
func claudeShell(spec string) (pattern, note string, err error) {
	words := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	star := strings.Count(spec, "*")
	switch {
	case strings.TrimSpace(spec) == "" || strings.TrimSpace(spec) == "*" || strings.TrimSpace(spec) == ":*":
		return "*", "", nil
	case strings.HasSuffix(spec, ":*") && star == 1:
		return words(spec[:len(spec)-2]) + " *", "", nil
	case strings.HasSuffix(spec, " *") && star == 1:
		return words(spec[:len(spec)-2]) + " *", "", nil
	case strings.HasSuffix(spec, "*") && star == 1:
		w := words(spec[:len(spec)-1])
		return w + " *", fmt.Sprintf("Claude Code matches any command starting with the text %q, a longer first word too (%s*); hutch compares whole words: imported as %q", w, w, w+" *"), nil
	case star > 0:
		return "", "", errors.New("a * before the end of the command has no hutch equivalent: hutch's shell rules are word prefixes with a final *")
	}
	return words(spec), "", nil
}

// claudePath maps a Read(...) or Edit(...) specifier — gitignore-style,
// with Claude Code's anchors: //abs (absolute), ~/x (home), /x (the
// settings file's project, base), ./x or x (the current directory, taken
// as root) — to a pattern relative to the sandbox root. A pattern whose
// fixed part lies outside root is an error.
func claudePath(spec, base, root, home string) (string, error) {
	spec = strings.TrimSpace(spec)
	switch spec {
	case "", "*", "**", ".", "./", "/**", "./**", "**/*":
		return "*", nil
	}
	dir, rest, anchored := root, spec, true
	switch {
	case strings.HasPrefix(spec, "//"):
		dir, rest = "/", spec[2:]
	case spec == "~" || strings.HasPrefix(spec, "~/"):
		dir, rest = home, strings.TrimPrefix(strings.TrimPrefix(spec, "~"), "/")
	case strings.HasPrefix(spec, "/"):
		dir, rest = base, spec[1:]
	case strings.HasPrefix(spec, "./"):
		rest = spec[2:]
	default:
		anchored = strings.Contains(strings.TrimSuffix(spec, "/"), "/")
	}
	trailing := strings.HasSuffix(rest, "/")
	rest = strings.Trim(rest, "/")
	var segs []string
	if rest != "" {
		segs = strings.Split(rest, "/")
	}
	fixed := 0
	if anchored {
		for fixed < len(segs) && !hasGlob(segs[fixed]) && !strings.Contains(segs[fixed], `\`) {
			fixed++
		}
	}
	prefix := filepath.Join(append([]string{dir}, segs[:fixed]...)...)
	rel, err := filepath.Rel(root, prefix)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is outside the sandbox root %s: hutch's file tools never reach it (commands reach it only if the policy lists it)", prefix, root)
	}
	var parts []string
	if rel != "." {
		parts = append(parts, filepath.ToSlash(rel))
	}
	parts = append(parts, segs[fixed:]...)
	if len(parts) == 0 || (len(parts) == 1 && parts[0] == "**") {
		return "*", nil
	}
	p := strings.Join(parts, "/")
	if anchored {
		p = "/" + p
	}
	if trailing {
		p += "/"
	}
	return p, nil
}
