package policy

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrWiden: a narrowing asked for something its base policy does not
// allow. The message names the setting and what the base allows.
var ErrWiden = errors.New("asks for more than the server's policy allows")

// Narrowing is what a client may ask of a policy it is given (`hutch
// serve`'s): fewer paths, less network, lower limits, a shorter timeout.
// The zero value asks nothing and keeps the policy as it is.
type Narrowing struct {
	// Read, when set, replaces the readable paths; each must be readable
	// under the base policy.
	Read []string `json:"read,omitempty"`
	// Write, when set, replaces the writable paths; each must be
	// writable under the base policy.
	Write []string `json:"write,omitempty"`
	// Deny is added to the base's.
	Deny []string `json:"deny,omitempty"`
	// Protect is added to the base's protected paths (Policy.Protect).
	Protect []string `json:"protect,omitempty"`
	// Unprotect may not lift any protection the base keeps: an entry
	// that names a protected path of the base is refused (a widening);
	// one the base does not protect anyway changes nothing.
	Unprotect []string `json:"unprotect,omitempty"`
	// Network, when set, is none, or allow with Hosts (each listed in
	// the base's allow-list, or any host when the base's network is
	// all), or all (only when the base's is all).
	Network Network  `json:"network,omitempty"`
	Hosts   []string `json:"hosts,omitempty"`
	// DenyHosts is added to the base's.
	DenyHosts []string `json:"deny_hosts,omitempty"`
	// Timeout, when set, must not be longer than the base's.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Limits, each when set, must not be more than the base's (any
	// value is less than none).
	Limits Limits `json:"limits,omitempty"`
}

// IsZero reports whether n asks nothing.
func (n Narrowing) IsZero() bool {
	return len(n.Read) == 0 && len(n.Write) == 0 && len(n.Deny) == 0 && len(n.Protect) == 0 && len(n.Unprotect) == 0 && n.Network == "" && len(n.Hosts) == 0 &&
		len(n.DenyHosts) == 0 && n.Timeout == 0 && n.Limits == (Limits{})
}

// Narrow returns p (normalized first) narrowed by n, normalized. Anything
// n asks that p does not allow is an error matching ErrWiden that names
// it; a malformed narrowing (a relative path, a negative limit) matches
// ErrConfig. Narrow never returns a policy that allows more than p.
func (p Policy) Narrow(n Narrowing) (Policy, error) {
	base, err := p.Normalize("/")
	if err != nil {
		return Policy{}, err
	}
	out := base
	widen := func(format string, args ...any) (Policy, error) {
		return Policy{}, fmt.Errorf("%w: %s", ErrWiden, fmt.Sprintf(format, args...))
	}
	clean := func(paths []string) ([]string, error) {
		for _, q := range paths {
			if !isAbs(q) {
				return nil, configErr("narrowing path %q is not absolute", q)
			}
		}
		return cleanPaths(paths, "/")
	}
	if n.Read != nil {
		if out.Read, err = clean(n.Read); err != nil {
			return Policy{}, err
		}
		for _, q := range out.Read {
			if !base.CanRead(q) {
				return widen("read %s: the server's policy does not let commands read it", ShowPath(q))
			}
		}
	}
	if n.Write != nil {
		if out.Write, err = clean(n.Write); err != nil {
			return Policy{}, err
		}
		for _, q := range out.Write {
			if !base.CanWrite(q) {
				return widen("write %s: the server's policy does not let commands change it", ShowPath(q))
			}
		}
	}
	deny, err := clean(n.Deny)
	if err != nil {
		return Policy{}, err
	}
	out.Deny = union(base.Deny, deny)
	out.DenyHosts = union(base.DenyHosts, n.DenyHosts)
	protect, err := checkProtected("protect", n.Protect)
	if err != nil {
		return Policy{}, err
	}
	out.Protect = union(base.Protect, protect)
	unprotect, err := checkProtected("unprotect", n.Unprotect)
	if err != nil {
		return Policy{}, err
	}
	kept := base.Protected()
	for _, u := range unprotect {
		if i := slices.IndexFunc(kept, func(e string) bool { return within(e, u) }); i >= 0 {
			return widen("unprotect %s: the server's policy keeps %s read-only", ShowPath(u), ShowPath(kept[i]))
		}
	}
	switch net := n.Network; {
	case net == "" && len(n.Hosts) == 0:
	case net == NetworkNone && len(n.Hosts) == 0:
		out.Network, out.Hosts = NetworkNone, nil
	case net == NetworkAll:
		if base.Network != NetworkAll {
			return widen("network all: the server's network is %s", base.Network)
		}
	case net == "" || net == NetworkAllow:
		if base.Network == NetworkNone {
			return widen("network hosts %v: the server's policy has no network", n.Hosts)
		}
		if base.Network == NetworkAllow {
			for _, h := range n.Hosts {
				if !slices.Contains(base.Hosts, h) {
					return widen("network host %q: the server allows only %v", h, base.Hosts)
				}
			}
		}
		out.Network, out.Hosts = NetworkAllow, slices.Clone(n.Hosts)
	default:
		return Policy{}, configErr("narrowing network %q (hosts %v): give none, allow with hosts, or all", net, n.Hosts)
	}
	if n.Timeout < 0 {
		return Policy{}, configErr("narrowing timeout %v is negative", n.Timeout)
	}
	if n.Timeout > 0 {
		if n.Timeout > base.Timeout {
			return widen("timeout %v: the server's is %v", n.Timeout, base.Timeout)
		}
		out.Timeout = n.Timeout
	}
	if out.Limits, err = narrowLimits(base.Limits, n.Limits); err != nil {
		return Policy{}, err
	}
	if out.Dir != "/tmp" && !out.CanRead(out.Dir) {
		out.Dir = "" // the first writable path of the narrowed policy, or /tmp
	}
	return out.Normalize("/")
}

// narrowLimits lowers base's limits to n's, refusing any above base's.
func narrowLimits(base, n Limits) (Limits, error) {
	if n.Memory < 0 || n.CPUTime < 0 || n.Processes < 0 || n.FileSize < 0 || n.OpenFiles < 0 {
		return Limits{}, configErr("narrowing limits: a limit cannot be negative or unlimited (a narrowing only lowers limits)")
	}
	out := base
	lower := func(name string, asked, have int64, dst func()) error {
		if asked == 0 {
			return nil
		}
		if have > 0 && asked > have {
			return fmt.Errorf("%w: %s %d: the server's is %d", ErrWiden, name, asked, have)
		}
		dst()
		return nil
	}
	for _, e := range []error{
		lower("memory", int64(n.Memory), int64(base.Memory), func() { out.Memory = n.Memory }),
		lower("cpu time (ns)", int64(n.CPUTime), int64(base.CPUTime), func() { out.CPUTime = n.CPUTime }),
		lower("processes", int64(n.Processes), int64(base.Processes), func() { out.Processes = n.Processes }),
		lower("file size", int64(n.FileSize), int64(base.FileSize), func() { out.FileSize = n.FileSize }),
		lower("open files", int64(n.OpenFiles), int64(base.OpenFiles), func() { out.OpenFiles = n.OpenFiles }),
	} {
		if e != nil {
			return Limits{}, e
		}
	}
	return out, nil
}

func isAbs(p string) bool { return len(p) > 0 && p[0] == '/' }
