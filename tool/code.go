package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// CodeOptions turn on the run_code tool: code a model wrote runs in a
// fresh sandbox per call, built from a declared policy.
//
// Default is the sandbox every call runs in unless it names another; it
// runs without asking anybody, in every permission mode (declaring it is
// what allows it). Escalations are the wider sandboxes a call may name,
// with a reason; such a call runs only after a person approves that one
// call (see permission.Gate.Confirm). Policies are as written, not yet
// normalized: a policy without a Dir starts the code in its run directory.
type CodeOptions struct {
	// Default is the policy of a call that names no sandbox. Required:
	// start from policy.Default().
	Default policy.Policy
	// Escalations maps names (lower-case words, see ValidSandboxName) to
	// the policies a call may ask for. Empty: the model cannot ask, and
	// the tool's schema has no sandbox or reason.
	Escalations map[string]policy.Policy
	// Run runs one command under a policy in a fresh sandbox and tears it
	// down (isolated.Run has this shape). Required.
	Run CodeRunner
	// Languages are what the default sandbox can run, from ProbeLanguages.
	// Required: a language not listed is not offered.
	Languages []Language
	// Mounts are host folders every run sees under $RUN_DIR/<name>,
	// read-only unless Writable. Names are single path components.
	Mounts map[string]Mount
	// RunDirs is where run directories are made ("" is os.TempDir()).
	RunDirs string
	// Packages are installed package sets (InstallPackages) every run
	// reads, found through PYTHONPATH and NODE_PATH.
	Packages *InstalledPackages
}

// CodeRunner runs cmd once in a fresh sandbox built from pol (which it
// normalizes), and tears the sandbox down, killing everything the command
// started. cmd.Dir and cmd.Timeout, when set, override the policy's; cmd.Env
// adds to its environment.
type CodeRunner func(ctx context.Context, pol policy.Policy, cmd sandbox.Command) (sandbox.Result, error)

// Mount is a host folder shown to every run.
type Mount struct {
	Path     string
	Writable bool
}

// Language is one language run_code offers.
type Language struct {
	// Name is what a call gives: shell, python, javascript or ruby.
	Name string `json:"name"`
	// Program is the interpreter, looked up in the sandbox's PATH.
	Program string `json:"program"`
	// Version is the interpreter's own first line of --version.
	Version string `json:"version"`
}

// languages are those run_code knows, in the order offered: name,
// interpreter, file extension.
var languages = []struct{ name, program, ext string }{
	{"shell", "sh", "sh"},
	{"python", "python3", "py"},
	{"javascript", "node", "js"},
	{"ruby", "ruby", "rb"},
}

// Limits of run_code.
const (
	// MaxCodeFiles is how many written files one call returns; the rest
	// are counted.
	MaxCodeFiles = 20
	// MaxCodeFileBytes bounds one returned file; a bigger one is counted
	// with the rest.
	MaxCodeFileBytes = 10 << 20
	// MaxCodeTotalBytes bounds the returned files together.
	MaxCodeTotalBytes = 32 << 20
	// MaxCodeInputBytes bounds the files a call copies in, together.
	MaxCodeInputBytes = 32 << 20
)

// extension is the file extension of a language run_code knows; "" for
// one it does not.
func extension(name string) string {
	for _, l := range languages {
		if l.name == name {
			return l.ext
		}
	}
	return ""
}

// nameRE is the form of a named sandbox's name (compiled on first use,
// not at every start of the binary).
var nameRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
})

// ValidSandboxName reports whether name can name a sandbox: a lower-case
// word (letters, digits, single underscores; it starts with a letter), at
// most 32 bytes. The error matches ErrConfig and says so.
func ValidSandboxName(name string) error {
	if len(name) > 32 || !nameRE().MatchString(name) {
		return fmt.Errorf("%w: sandbox name %q: use a lower-case word (a-z, 0-9, _), starting with a letter, at most 32 bytes", ErrConfig, name)
	}
	return nil
}

// ProbeLanguages asks the default sandbox which interpreters it has, and
// their versions, by running one shell command under o.Default through
// o.Run. shell is always among them when the sandbox runs at all.
func ProbeLanguages(ctx context.Context, o CodeOptions) ([]Language, error) {
	if o.Run == nil {
		return nil, fmt.Errorf("%w: run_code needs a runner (CodeOptions.Run)", ErrConfig)
	}
	var script strings.Builder
	for _, l := range languages[1:] {
		fmt.Fprintf(&script, "if command -v %[1]s >/dev/null 2>&1; then printf '%[1]s\\t%%s\\n' \"$(%[1]s --version 2>&1 | head -n 1)\"; fi\n", l.program)
	}
	script.WriteString("printf 'sh\\t%s\\n' \"$(readlink -f \"$(command -v sh)\" 2>/dev/null)\"\n")
	res, err := o.Run(ctx, o.Default, sandbox.Command{Shell: script.String(), Timeout: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("probing the default sandbox's interpreters: %w", err)
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("probing the default sandbox's interpreters: exit %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	found := map[string]string{}
	for line := range strings.SplitSeq(string(res.Stdout), "\n") {
		if prog, version, ok := strings.Cut(line, "\t"); ok {
			found[prog] = strings.TrimSpace(version)
		}
	}
	var out []Language
	for _, l := range languages {
		if v, ok := found[l.program]; ok {
			out = append(out, Language{Name: l.name, Program: l.program, Version: v})
		}
	}
	return out, nil
}

// code is a toolset's run_code, checked once by New.
type code struct {
	opts     CodeOptions
	def      policy.Policy // normalized, for checks and the summary
	escalate map[string]policy.Policy
	names    []string // sorted escalation names
}

func newCode(o *CodeOptions) (*code, error) {
	if o == nil {
		return nil, nil
	}
	if o.Run == nil {
		return nil, fmt.Errorf("%w: run_code needs a runner (CodeOptions.Run)", ErrConfig)
	}
	if len(o.Languages) == 0 {
		return nil, fmt.Errorf("%w: run_code has no languages: probe them with ProbeLanguages", ErrConfig)
	}
	for _, l := range o.Languages {
		if extension(l.Name) == "" {
			return nil, fmt.Errorf("%w: run_code cannot run %q: it runs shell, python, javascript and ruby", ErrConfig, l.Name)
		}
	}
	c := &code{opts: *o, escalate: map[string]policy.Policy{}}
	var err error
	if c.def, err = o.Default.Normalize(""); err != nil {
		return nil, fmt.Errorf("run_code's default sandbox: %w", err)
	}
	for name, p := range o.Escalations {
		if err := ValidSandboxName(name); err != nil {
			return nil, err
		}
		if c.escalate[name], err = p.Normalize(""); err != nil {
			return nil, fmt.Errorf("run_code's sandbox %q: %w", name, err)
		}
		c.names = append(c.names, name)
	}
	slices.Sort(c.names)
	for name, m := range o.Mounts {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || strings.HasPrefix(name, ".") {
			return nil, fmt.Errorf("%w: run_code mount name %q: use one path component not starting with a dot", ErrConfig, name)
		}
		if !filepath.IsAbs(m.Path) {
			return nil, fmt.Errorf("%w: run_code mount %q: %q is not an absolute path", ErrConfig, name, m.Path)
		}
	}
	return c, nil
}

// tool is run_code's description and schema for this configuration.
func (c *code) tool() Tool {
	var langs, names []string
	for _, l := range c.opts.Languages {
		langs = append(langs, fmt.Sprintf("%s (%s)", l.Name, l.Version))
		names = append(names, l.Name)
	}
	var d strings.Builder
	fmt.Fprintf(&d, "Run code in a sandbox: %s. ", strings.Join(langs, ", "))
	d.WriteString("Every call is a fresh process in a fresh sandbox with a fresh, private run directory ($RUN_DIR, removed afterwards): nothing carries over between calls. ")
	d.WriteString("files copies workspace files into $RUN_DIR (read-only). ")
	if len(c.opts.Mounts) > 0 {
		d.WriteString("Folders under $RUN_DIR: " + strings.Join(slices.Sorted(maps.Keys(c.opts.Mounts)), ", ") + ". ")
	}
	d.WriteString("Returns exit_code, stdout, stderr (each cut to its last 200 lines and 16000 characters), timed_out, limit, blocked and the files the code wrote or changed under $RUN_DIR (images are shown). ")
	fmt.Fprintf(&d, "The default sandbox: %s", c.def.Summary())
	props := map[string]map[string]any{
		"language": {"type": "string", "enum": names, "description": "the language of code"},
		"code":     str("the program"),
		"files":    {"type": "array", "items": map[string]any{"type": "string"}, "description": "workspace files to copy into $RUN_DIR, read-only, at their relative paths"},
		"timeout":  {"type": "number", "description": "seconds before the code and everything it started are stopped (at most the sandbox's own timeout)", "exclusiveMinimum": 0},
	}
	if len(c.names) > 0 {
		d.WriteString(" To run one call in a wider sandbox, name it in sandbox with a reason; a person decides that one call (the next call runs in the default again). The sandboxes:")
		for _, n := range c.names {
			p := c.escalate[n]
			fmt.Fprintf(&d, " %s: %s", n, p.Summary())
		}
		props["sandbox"] = map[string]any{"type": "string", "enum": c.names, "description": "a wider sandbox for this one call; it waits for a person's approval"}
		props["reason"] = str("why this call needs the wider sandbox, shown to the person deciding")
	}
	return Tool{
		Name:         "run_code",
		Title:        "Run code",
		Description:  d.String(),
		OutputSchema: outputSchema[CodeResult](),
		Hints:        Hints{Destructive: true, OpenWorld: true},
		InputSchema:  schema([]string{"code", "language"}, props),
		Capability:   permission.Code,
		call:         runCode,
	}
}

type codeArgs struct {
	Language string   `json:"language"`
	Code     string   `json:"code"`
	Files    []string `json:"files,omitempty"`
	Timeout  *float64 `json:"timeout,omitempty"`
	Sandbox  string   `json:"sandbox,omitempty"`
	Reason   string   `json:"reason,omitempty"`
}

// CodeResult is run_code's structured result.
type CodeResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	TimedOut bool   `json:"timed_out"`
	// Limit names the resource limit that stopped the code ("memory",
	// "cpu_time", "pids", "file_size"), or "".
	Limit string `json:"limit"`
	// Blocked lists the destinations the network policy refused; [] when
	// none.
	Blocked []string `json:"blocked"`
	// BlockedOmitted counts the refusals Blocked could not list.
	BlockedOmitted int   `json:"blocked_omitted,omitempty"`
	DurationMS     int64 `json:"duration_ms"`
	// Sandbox names the sandbox the call ran in ("" for the default).
	Sandbox string `json:"sandbox,omitempty"`
	// Files are the files the code wrote or changed under $RUN_DIR
	// (regular files only, links not followed), at most MaxCodeFiles;
	// FilesLeftOut counts the others (too many, too big).
	Files        []CodeFile `json:"files"`
	FilesLeftOut int        `json:"files_left_out"`
}

// CodeFile is one file a run wrote. Data is in the library's Output (see
// Output.Files), not in the JSON text a model reads.
type CodeFile struct {
	// Name is the file's path relative to $RUN_DIR.
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	MediaType string `json:"media_type"`
	Data      []byte `json:"-"`
}

func runCode(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	c := ts.code
	var a codeArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	lang, ok := c.language(a.Language)
	if !ok {
		return failf("run_code: language %q is not offered here: choose %s", a.Language, strings.Join(c.languageNames(), ", ")), nil
	}
	if strings.TrimSpace(a.Code) == "" {
		return failf("run_code needs code"), nil
	}
	pol, dirSet := c.opts.Default, c.opts.Default.Dir != ""
	limit := c.def.Timeout
	if a.Sandbox != "" {
		p, ok := c.opts.Escalations[a.Sandbox]
		if !ok {
			return failf("run_code: there is no sandbox %q: choose %s, or leave sandbox out for the default; nothing ran", a.Sandbox, strings.Join(c.names, ", ")), nil
		}
		if strings.TrimSpace(a.Reason) == "" {
			return failf("run_code: asking for sandbox %q needs a reason, shown to the person deciding; nothing ran", a.Sandbox), nil
		}
		pol, dirSet, limit = p, p.Dir != "", c.escalate[a.Sandbox].Timeout
	} else if a.Reason != "" {
		return failf("run_code: a reason goes with a sandbox to ask for; without one the call runs in the default sandbox"), nil
	}
	var timeout time.Duration
	if a.Timeout != nil {
		timeout = time.Duration(*a.Timeout * float64(time.Second))
		if timeout <= 0 || timeout > limit {
			return failf("run_code: timeout must be more than 0 and at most the sandbox's %v seconds", limit.Seconds()), nil
		}
	}
	for _, f := range a.Files {
		if out, bad := badPath("run_code", f); bad {
			return out, nil
		}
	}

	req, err := c.request(ts, a, lang)
	if err != nil {
		return failf("run_code: %v", err), nil
	}
	d, err := ts.opts.Gate.Check(ctx, req)
	if err != nil {
		return Output{}, err
	}
	if !d.Allowed {
		return failf("%s", d.Reason), nil
	}

	run, err := c.prepare(ctx, ts, a, lang)
	if err != nil {
		return failf("run_code: %v; nothing ran", err), nil
	}
	defer run.remove()
	pol = pol.Extend(policy.Policy{Write: []string{run.dir}})
	for _, m := range slices.Sorted(maps.Keys(c.opts.Mounts)) {
		if c.opts.Mounts[m].Writable {
			pol = pol.Extend(policy.Policy{Write: []string{c.opts.Mounts[m].Path}})
		} else {
			pol = pol.Extend(policy.Policy{Read: []string{c.opts.Mounts[m].Path}})
		}
	}
	pol = scratchOnly(pol, run.dir)
	cmd := sandbox.Command{Args: []string{lang.Program, run.script}, Env: map[string]string{"RUN_DIR": run.dir}, Timeout: timeout}
	if w := progressWriter(ctx); w != nil {
		cmd.Stdout, cmd.Stderr = w, w
	}
	pol = c.opts.Packages.apply(pol, cmd.Env)
	if !dirSet {
		cmd.Dir = run.dir
	}
	if a.Sandbox != "" {
		// The last check, right before the run: this gate's decision, on
		// exactly this call, used once.
		if err := ts.opts.Gate.Confirm(ctx, req, d); err != nil {
			return failf("run_code: not approved: %v; nothing ran", err), nil
		}
	}
	res, err := c.opts.Run(ctx, pol, cmd)
	if err != nil {
		if ctx.Err() != nil {
			return Output{}, ctx.Err()
		}
		return failf("run_code: %s", describeErr(err)), nil
	}
	r := CodeResult{
		ExitCode:   res.ExitCode,
		Stdout:     Truncate(string(res.Stdout), MaxShellLines, MaxShellChars),
		Stderr:     Truncate(string(res.Stderr), MaxShellLines, MaxShellChars),
		TimedOut:   res.TimedOut,
		Limit:      res.Limit,
		Blocked:    res.Blocked,
		DurationMS: res.Duration.Milliseconds(),

		BlockedOmitted: res.BlockedOmitted,
		Sandbox:        a.Sandbox,
	}
	if r.Blocked == nil {
		r.Blocked = []string{}
	}
	r.Files, r.FilesLeftOut = run.written()
	out := structured(r)
	out.Files = r.Files
	return out, nil
}

func (c *code) language(name string) (Language, bool) {
	for _, l := range c.opts.Languages {
		if l.Name == name {
			return l, true
		}
	}
	return Language{}, false
}

func (c *code) languageNames() []string {
	var out []string
	for _, l := range c.opts.Languages {
		out = append(out, l.Name)
	}
	return out
}

// request is the gate's request for a: its arguments always (an
// escalation's approval binds to them), and a detail that shows the person
// the language, the sandbox with its summary, the reason and the code.
func (c *code) request(ts *Toolset, a codeArgs, lang Language) (permission.Request, error) {
	args, err := json.Marshal(a)
	if err != nil {
		return permission.Request{}, err
	}
	detail := fmt.Sprintf("%s code in the default sandbox: %s", lang.Name, strconv.Quote(a.Code))
	var escalation []byte
	if a.Sandbox != "" {
		p := c.escalate[a.Sandbox]
		detail = fmt.Sprintf("%s code in sandbox %q (%s) because %s: %s", lang.Name, a.Sandbox, p.Summary(), strconv.Quote(a.Reason), strconv.Quote(a.Code))
		// The approval binds to the sandbox as it is, not only its name.
		if escalation, err = json.Marshal(p); err != nil {
			return permission.Request{}, err
		}
	}
	if len(a.Files) > 0 {
		detail += fmt.Sprintf(" with files %s", strings.Join(a.Files, ", "))
	}
	if a.Timeout != nil {
		detail += fmt.Sprintf(", timeout %vs", *a.Timeout)
	}
	return permission.Request{Capability: permission.Code, Tool: "run_code", Detail: detail, Args: args, Scope: ts.scope, Escalation: a.Sandbox, EscalationPolicy: string(escalation)}, nil
}

// errTooBig refuses input files over MaxCodeInputBytes together.
var errTooBig = errors.New("the files are too big")

// scratchOnly lifts the protected paths (policy.DefaultProtected) of pol
// when the run directory is all it may write and it protects nothing
// itself: that directory is hutch's, fresh for the call and removed after
// it, and nothing on the host ever runs a hook or reads a start-up file
// planted there, while keeping its names would take every call through a
// supervised session (some 8 ms more a call). A writable mount, or any
// other writable path, keeps the protection for all of them.
func scratchOnly(pol policy.Policy, runDir string) policy.Policy {
	if len(pol.Write) != 1 || pol.Write[0] != runDir || len(pol.Protect) > 0 {
		return pol
	}
	return pol.Extend(policy.Policy{Unprotect: policy.DefaultProtected})
}

// prepare makes the call's run directory: the code, the input files
// (read-only), the mounts' links; and remembers what is there, so the
// files the code writes can be told apart.
func (c *code) prepare(ctx context.Context, ts *Toolset, a codeArgs, lang Language) (*runDir, error) {
	ext := extension(lang.Name)
	r, err := newRunDir(c.opts.RunDirs)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*runDir, error) {
		r.remove()
		return nil, err
	}
	total := 0
	for _, f := range a.Files {
		data, err := ts.opts.Sandbox.Read(ctx, f)
		if err != nil {
			return fail(fmt.Errorf("copying %s: %s", f, describeErr(err)))
		}
		if total += len(data); total > MaxCodeInputBytes {
			return fail(fmt.Errorf("%w: more than %d bytes in all", errTooBig, MaxCodeInputBytes))
		}
		if err := r.put(f, data); err != nil {
			return fail(err)
		}
	}
	for name, m := range c.opts.Mounts {
		if err := os.Symlink(m.Path, filepath.Join(r.dir, name)); err != nil {
			return fail(fmt.Errorf("mount %s: %w", name, err))
		}
	}
	r.script = filepath.Join(r.dir, ".run_code."+ext)
	if err := os.WriteFile(r.script, []byte(a.Code), 0o444); err != nil {
		return fail(err)
	}
	if err := r.snapshot(); err != nil {
		return fail(err)
	}
	return r, nil
}
