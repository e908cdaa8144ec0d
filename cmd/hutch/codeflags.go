package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/hutchsandbox/hutch/config"
)

// codeFlags are run_code's flags on "hutch mcp": the default sandbox's
// policy file and the escalations, NAME=FILE each.
type codeFlags struct {
	sandbox  string
	escalate []string
}

// defaultSandbox is the name --code-sandbox's policy gets.
const defaultSandbox = "default"

func (cf *codeFlags) register(f *pflag.FlagSet) {
	f.StringVar(&cf.sandbox, "code-sandbox", "", `turn on run_code: the policy file of the sandbox every call runs in (named "default"; the tier becomes isolated unless --tier says container)`)
	f.StringArrayVar(&cf.escalate, "escalate-to", nil, "with --code-sandbox: NAME=FILE, a wider sandbox (a policy file) a run_code call may ask a person for, one call at a time (repeatable)")
}

// apply puts the flags' code settings into s, replacing a settings file's
// code and sandboxes wholly (the flags win, never merge). Paths are
// relative to the current directory. With neither flag, s is unchanged.
func (cf *codeFlags) apply(s *config.Settings, set *pflag.FlagSet) error {
	if !set.Changed("code-sandbox") && !set.Changed("escalate-to") {
		return nil
	}
	if cf.sandbox == "" {
		return fmt.Errorf("%w: --escalate-to needs --code-sandbox FILE, the default sandbox's policy file", config.ErrConfig)
	}
	abs := func(p string) (string, error) {
		a, err := filepath.Abs(p)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", config.ErrConfig, p, err)
		}
		return a, nil
	}
	def, err := abs(cf.sandbox)
	if err != nil {
		return err
	}
	code := &config.CodeSettings{Sandbox: defaultSandbox}
	if s.Code != nil {
		code.Mounts, code.Packages = s.Code.Mounts, s.Code.Packages // no flags: a settings file's hold
	}
	boxes := map[string]config.SandboxSpec{defaultSandbox: {File: def}}
	for _, e := range cf.escalate {
		name, file, ok := strings.Cut(e, "=")
		if !ok || name == "" || file == "" {
			return fmt.Errorf("%w: --escalate-to %q: give NAME=FILE, a sandbox name and its policy file (--escalate-to online=online.yaml)", config.ErrConfig, e)
		}
		if name == defaultSandbox {
			return fmt.Errorf("%w: --escalate-to %q: %q is --code-sandbox's name; choose another", config.ErrConfig, e, defaultSandbox)
		}
		if _, dup := boxes[name]; dup {
			return fmt.Errorf("%w: --escalate-to names %q twice: give each sandbox once", config.ErrConfig, name)
		}
		path, err := abs(file)
		if err != nil {
			return err
		}
		boxes[name] = config.SandboxSpec{File: path}
		code.EscalateTo = append(code.EscalateTo, name)
	}
	s.Code, s.Sandboxes = code, boxes
	return nil
}
