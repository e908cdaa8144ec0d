package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/hutchsandbox/hutch/policy"
)

// policyFlags are the isolated tier's policy flags, shared by run and mcp.
type policyFlags struct {
	file              string
	read, write, deny []string
	protect           []string
	unprotect         []string
	network           string
	networkDeny       []string
	memory, fileSize  string
	cpuTime           time.Duration
	pids, nice        int
	openFiles         int
}

var policyFlagNames = []string{"policy", "read", "write", "deny", "protect", "unprotect", "network", "network-deny", "memory", "cpu-time", "pids", "file-size", "open-files", "nice"}

func (p *policyFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&p.file, "policy", "", "isolated: start from this YAML policy instead of the default one")
	fl.StringArrayVar(&p.read, "read", nil, "isolated: let the command read PATH (repeatable)")
	fl.StringArrayVar(&p.write, "write", nil, "isolated: let the command change PATH (repeatable)")
	fl.StringArrayVar(&p.deny, "deny", nil, "isolated: hide PATH even inside a readable or writable path (repeatable)")
	fl.StringArrayVar(&p.protect, "protect", nil, "isolated, container and the file tools: keep PATH (relative to each writable path, like .env) read-only there, beside the default list (.git/hooks, .git/config, .vscode, .bashrc...) (repeatable)")
	fl.StringArrayVar(&p.unprotect, "unprotect", nil, "lift the protection of a default protected PATH (such as .vscode) or of those below it (.git) (repeatable)")
	fl.StringVar(&p.network, "network", "", "isolated: none (default), all, or allow=HOST,... (only those hosts, through hutch's filtering proxy; HOST is host[:port], *.example.com, an IP or a CIDR range)")
	fl.StringSliceVar(&p.networkDeny, "network-deny", nil, "isolated: refuse these hosts even when allowed (same grammar; repeatable or comma-separated)")
	fl.StringVar(&p.memory, "memory", "", fmt.Sprintf("isolated: memory limit, e.g. 512M, or unlimited (default %v here: half the host's memory, at most 8 GiB)", policy.DefaultMemory()))
	fl.DurationVar(&p.cpuTime, "cpu-time", 0, "isolated: CPU time limit, e.g. 30s")
	fl.Var((*processCount)(&p.pids), "pids", fmt.Sprintf("isolated: at most N processes and threads at once, or unlimited (default %d)", policy.DefaultProcesses))
	fl.StringVar(&p.fileSize, "file-size", "", "isolated: largest file the command may write, e.g. 1G")
	fl.Var((*decimal)(&p.openFiles), "open-files", "isolated: at most N open files per process (16 up to hutch's hard limit; without one, the soft limit hutch started with)")
	fl.Var((*decimal)(&p.nice), "nice", "isolated: lower the priority (0-19)")
}

// decimal is an int flag written in decimal only (policy.ParseWholeNumber):
// pflag's own int flags read 010 as octal 8 and take 0x20.
type decimal int

func (d *decimal) Set(s string) error {
	v, err := policy.ParseWholeNumber(s)
	if err != nil {
		return err
	}
	*d = decimal(v)
	return nil
}

func (d *decimal) String() string { return strconv.Itoa(int(*d)) }
func (d *decimal) Type() string   { return "int" }

// processCount is --pids: a decimal count or unlimited
// (policy.ParseProcessLimit).
type processCount int

func (n *processCount) Set(s string) error {
	v, err := policy.ParseProcessLimit(s)
	if err != nil {
		return err
	}
	*n = processCount(v)
	return nil
}

func (n *processCount) String() string {
	if *n == policy.Unlimited {
		return policy.UnlimitedWord
	}
	return strconv.Itoa(int(*n))
}

func (n *processCount) Type() string { return "N" }

// decimalFloat is a float flag written as decimal digits with an optional
// fraction: pflag's float flags take NaN, Inf, 1e3 and hex (0x1p1 is 2).
type decimalFloat float64

func (d *decimalFloat) Set(s string) error {
	whole, frac, dot := strings.Cut(s, ".")
	v, err := strconv.ParseFloat(s, 64)
	if whole == "" || strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" || dot && frac == "" || err != nil {
		return fmt.Errorf("%q is not a decimal number: write digits, with an optional fraction (1.5)", s)
	}
	*d = decimalFloat(v)
	return nil
}

func (d *decimalFloat) String() string { return strconv.FormatFloat(float64(*d), 'f', -1, 64) }
func (d *decimalFloat) Type() string   { return "float" }

func policyFlagsSet(fl *pflag.FlagSet) bool { return slices.ContainsFunc(policyFlagNames, fl.Changed) }

// build is the default policy (or --policy FILE) widened by the flags;
// dir and timeout, when set, become the policy's.
func (p *policyFlags) build(fl *pflag.FlagSet, dir string, timeout time.Duration) (policy.Policy, error) {
	base := policy.Default()
	if p.file != "" {
		var err error
		if base, err = policy.Load(p.file); err != nil {
			return base, err
		}
	}
	q, err := p.asked(fl, dir, timeout)
	if err != nil {
		return base, err
	}
	return base.Extend(q), nil
}

// narrowing is the flags as a remote session's narrowing of the server's
// policy (policy.Narrowing: --read and --write replace the server's
// paths, --deny and --network-deny add to its lists, --network and the
// limits lower its own); the server refuses anything wider, naming it.
// --policy and --nice have no meaning there.
func (p *policyFlags) narrowing(fl *pflag.FlagSet) (policy.Narrowing, error) {
	for _, name := range []string{"policy", "nice"} {
		if fl.Changed(name) {
			return policy.Narrowing{}, fmt.Errorf("--%s does not apply to --tier remote: the server's policy is the widest a session gets; give --%s to hutch serve", name, name)
		}
	}
	q, err := p.asked(fl, "", 0)
	if err != nil {
		return policy.Narrowing{}, err
	}
	return policy.Narrowing{Read: q.Read, Write: q.Write, Deny: q.Deny, Protect: q.Protect, Unprotect: q.Unprotect, Network: q.Network, Hosts: q.Hosts, DenyHosts: q.DenyHosts, Limits: q.Limits}, nil
}

// asked is what the flags ask, as a policy of its own (what build adds to
// its base).
func (p *policyFlags) asked(fl *pflag.FlagSet, dir string, timeout time.Duration) (policy.Policy, error) {
	q := policy.Policy{Read: p.read, Write: p.write, Deny: p.deny, Protect: p.protect, Unprotect: p.unprotect, Dir: dir, Nice: p.nice, Timeout: timeout, DenyHosts: p.networkDeny}
	if fl.Changed("network-deny") && len(p.networkDeny) == 0 {
		return q, fmt.Errorf("--network-deny names no host: give entries (--network-deny evil.example.com)")
	}
	if hosts, ok := strings.CutPrefix(p.network, "allow="); ok {
		q.Network = policy.NetworkAllow
		if strings.TrimSpace(hosts) != "" {
			// Every entry, empty ones too: the list's parser refuses
			// those, as it does in --network-deny.
			for _, h := range strings.Split(hosts, ",") {
				q.Hosts = append(q.Hosts, strings.TrimSpace(h))
			}
		}
	} else {
		q.Network = policy.Network(p.network)
	}
	q.Limits.CPUTime, q.Limits.Processes, q.Limits.OpenFiles = p.cpuTime, p.pids, p.openFiles
	for _, s := range []struct {
		flag, val string
		dst       *policy.Size
		parse     func(string) (policy.Size, error)
	}{{"memory", p.memory, &q.Limits.Memory, policy.ParseMemoryLimit}, {"file-size", p.fileSize, &q.Limits.FileSize, policy.ParseSize}} {
		if !fl.Changed(s.flag) {
			continue
		}
		v, err := s.parse(s.val)
		if err != nil {
			return q, fmt.Errorf("--%s: %v", s.flag, err)
		}
		*s.dst = v
	}
	return q, nil
}
