package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/internal/cfgerr"
	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/permission/rules"
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
