package container

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/cfgerr"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// FromPolicy maps a policy onto container options, starting from base
// (which names the image, the runtime and anything a policy does not say).
// The policy is normalized against the current directory first.
//
//   - readable paths become read-only binds at the same path, writable
//     paths read-write binds — except the default system paths
//     (policy.SystemPaths: /usr, /bin, /etc...), which the image provides;
//     a readable path inside a writable one needs no bind of its own;
//   - denied paths that exist inside a bind are masked (an empty directory,
//     or the null device for a file); denied paths elsewhere are not in
//     the container at all, nor is any readable or writable path inside
//     one (deny wins; a note says so);
//   - the network is none or all (an allow-list is an error: only the
//     isolated tier enforces one); the start directory becomes the working
//     directory (a bind covers it when it is writable, so the container's
//     tmpfs does not hide it);
//   - memory and processes become the container's limits (policy.Unlimited
//     none: NoPidsLimit for processes), CPU time, file size and open files
//     its per-process rlimits; the policy's environment becomes
//     Options.Env.
//
// What a container cannot enforce is returned in plain words, never
// dropped silently: the nice level, and the gaps of the runtime
// (HardeningGaps). The policy's timeout is per command: callers pass it
// as sandbox.Command.Timeout. Errors match sandbox.ErrConfig (and
// policy.ErrConfig for a policy that does not normalize).
func FromPolicy(p policy.Policy, base Options) (Options, []string, error) {
	cwd, _ := os.Getwd()
	p, err := p.Normalize(cwd)
	if err != nil {
		return base, nil, cfgerr.Under(sandbox.ErrConfig, err)
	}
	o := base
	o.Binds = slices.Clone(base.Binds)
	o.Masks = slices.Clone(base.Masks)
	var notes []string
	under := func(path string, dirs []string) bool {
		return slices.ContainsFunc(dirs, func(d string) bool { return path == d || strings.HasPrefix(path, d+"/") })
	}
	// Deny wins: a path inside a denied one is not bound at all, as the
	// isolated tier hides it under the denied path's mask.
	denied := func(path string) bool {
		if under(path, p.Deny) {
			notes = append(notes, fmt.Sprintf("%s is inside a denied path: not bound (deny wins)", path))
			return true
		}
		return false
	}
	for _, w := range p.Write {
		if !denied(w) {
			o.Binds = append(o.Binds, Bind{Source: w, Target: w, Writable: true})
		}
	}
	for _, r := range p.Read {
		if slices.Contains(policy.SystemPaths, r) || under(r, p.Write) || denied(r) {
			continue
		}
		o.Binds = append(o.Binds, Bind{Source: r, Target: r})
	}
	bound := make([]string, 0, len(o.Binds))
	for _, b := range o.Binds {
		bound = append(bound, b.Target)
	}
	for _, d := range p.Deny {
		if !under(d, bound) {
			continue // never mounted: the container cannot see it
		}
		fi, err := os.Stat(d)
		if err != nil {
			continue // nothing there to hide
		}
		o.Masks = append(o.Masks, Mask{Target: filepath.ToSlash(d), File: !fi.IsDir()})
	}
	switch p.Network {
	case policy.NetworkAll:
		o.Network = "all"
	case policy.NetworkAllow:
		// Narrowing it to none would break what the policy promises;
		// widening it to all would open what it closes.
		return base, nil, configErr("network allow-lists are enforced by the isolated tier only: use --tier isolated, or --network none or all here")
	default:
		o.Network = "none"
	}
	o.WorkDir = p.Dir
	o.Protect, o.Unprotect = p.Protect, p.Unprotect
	l := p.Limits
	if l.Memory > 0 {
		o.Memory = int64(l.Memory)
	}
	switch {
	case l.Processes > 0:
		o.PidsLimit = l.Processes
	case l.Processes == policy.Unlimited:
		o.PidsLimit = NoPidsLimit // asked for: not the container's default
	}
	if l.CPUTime > 0 {
		o.CPUTime = l.CPUTime
	}
	if l.FileSize > 0 {
		o.FileSize = int64(l.FileSize)
	}
	if l.OpenFiles > 0 {
		o.OpenFiles = l.OpenFiles
	}
	if p.Env != nil {
		o.Env = tierkit.MergeEnv(base.Env, p.Env)
	}
	if p.Nice > 0 {
		notes = append(notes, fmt.Sprintf("nice %d: a container has no per-command priority; not applied", p.Nice))
	}
	n, err := o.normalize()
	if err != nil {
		return base, nil, err
	}
	return n, append(notes, n.HardeningGaps()...), nil
}
