package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/cfgerr"
	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/permission/rules"
	"github.com/hutchsandbox/hutch/tier"
)

// openGate builds the gate of s: its mode and allow list, its rules file,
// the approval store and the audit log (which b closes), and s.Asker in
// ask mode or with rules (an ask rule asks in every mode).
func (b *Built) openGate(s Settings) (*permission.Gate, error) {
	mode, err := permission.ParseMode(s.Mode)
	if err != nil {
		return nil, err
	}
	allow, err := permission.ParseCapabilities(strings.Join(s.Allow, ","))
	if err != nil {
		return nil, err
	}
	gcfg := permission.Config{Mode: mode, Allow: allow}
	if s.Rules != "" {
		set, err := rules.Load(s.Rules)
		if err != nil {
			return nil, err
		}
		gcfg.Rules = set
	}
	if mode == permission.Ask || gcfg.Rules != nil {
		gcfg.Asker = s.Asker
	}
	if gcfg.Store, b.StorePath, err = openStore(s); err != nil {
		return nil, err
	}
	if s.Audit != "" {
		if gcfg.Audit, err = permission.OpenAudit(s.Audit); err != nil {
			return nil, cfgerr.Under(ErrConfig, err)
		}
		b.onClose(gcfg.Audit.Close)
	}
	return permission.New(gcfg)
}

// openStore opens the approval store of s, if any, with its decision TTL,
// and returns it with its absolute path.
func openStore(s Settings) (*permission.Store, string, error) {
	if s.Store == "" {
		if s.DecisionTTL != "" {
			return nil, "", fmt.Errorf("%w: decision_ttl applies to an approval store (--store FILE)", ErrConfig)
		}
		return nil, "", nil
	}
	// Absolute, so the approving command a front end prints works from
	// any directory, not only from the one the MCP client started it in.
	path, err := filepath.Abs(s.Store)
	if err != nil {
		return nil, "", fmt.Errorf("%w: store: %v", ErrConfig, err)
	}
	st, err := permission.OpenStore(path)
	if err != nil || s.DecisionTTL == "" {
		return st, path, err
	}
	d, err := time.ParseDuration(s.DecisionTTL)
	if err != nil {
		return nil, "", fmt.Errorf("%w: decision TTL %q is not a duration (write 24h, 30m, or 0 for no expiry)", ErrConfig, s.DecisionTTL)
	}
	if err := st.SetDecisionTTL(d); err != nil {
		return nil, "", err
	}
	return st, path, nil
}

// checkGoverningFiles refuses settings whose approval store, audit log or
// rules file lies inside a path the agent's tools or sandboxes may change:
// the tier's writable root or policy paths, a container's writable binds,
// run_code's sandboxes' writable paths. The agent could then rewrite its
// own decisions (approve its own requests, and name the person who did),
// erase its traces from the audit log, or widen its rules. A settings
// file there (the layout of docs/code-modes: hutch.yaml in the project
// its sandbox writes) gets a note instead: what the agent writes into it
// takes effect at the next start, which a person makes, and should
// review. Paths are compared as the kernel names them (symbolic links
// resolved).
func (s Settings) checkGoverningFiles(plan *codePlan) (notes []string, err error) {
	type file struct{ what, path string }
	var files []file
	for _, f := range []file{{"approval store", s.Store}, {"audit log", s.Audit}, {"rules file", s.Rules}, {"settings file", s.File}} {
		if f.path != "" {
			files = append(files, file{f.what, realPath(f.path)})
		}
	}
	if len(files) == 0 {
		return nil, nil
	}
	var places []string
	if s.Tier == tier.Local && s.Root != "" {
		places = append(places, s.Root)
	}
	if s.Tier == tier.Container {
		for _, b := range containerOptions(s).Binds {
			if b.Writable {
				places = append(places, b.Source)
			}
		}
	}
	if s.Tier == tier.Isolated || s.Tier == tier.Container && (s.Isolation != nil || s.PolicyFile != "" || s.Root != "") {
		if pol, err := isolationPolicy(s); err == nil {
			places = append(places, pol.Write...)
		}
	}
	if plan != nil {
		dir, _ := s.baseDir()
		for _, name := range slices.Sorted(maps.Keys(plan.pols)) {
			if pol, err := plan.pols[name].Normalize(dir); err == nil {
				places = append(places, pol.Write...)
			}
		}
	}
	for _, f := range files {
		for _, p := range places {
			place := realPath(p)
			if f.path != place && !strings.HasPrefix(f.path, strings.TrimSuffix(place, "/")+"/") {
				continue
			}
			if f.what == "settings file" {
				notes = append(notes, fmt.Sprintf("the settings file %s lies inside %s, which the agent's tools or sandboxes may change: what it writes there (a wider sandbox, another mode) takes effect at the next start; keep the file outside, or review its changes before restarting", f.path, place))
				break
			}
			return nil, fmt.Errorf("%w: the %s %s lies inside %s, which the agent's tools or sandboxes may change: the agent could rewrite it (approve its own requests, erase its traces, widen its rules); keep it outside every writable path (for example under ~/.local/state/hutch)", ErrConfig, f.what, f.path, place)
		}
	}
	return notes, nil
}

// realPath is p absolute, with the symbolic links of its longest existing
// part resolved (a store not made yet lies where its directory does).
func realPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	rest := ""
	for d := abs; ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(r, rest)
		}
		if d == filepath.Dir(d) {
			return abs
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}
