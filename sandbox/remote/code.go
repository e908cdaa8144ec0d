package remote

import (
	"context"
	"crypto/rand"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/policy"
	"github.com/hutchsandbox/hutch/sandbox"
)

// CodeMount is a folder of this machine that a RunCode command sees at
// Name inside its run directory.
type CodeMount struct {
	Name     string
	Host     string
	Writable bool
}

// RunCode runs cmd, prepared for a run directory on this machine
// (hostRun: its script and input files; cmd's arguments, Dir and its
// RUN_DIR variable may name paths in it), on the server: the run
// directory and each mount are copied to a fresh directory below the
// served root (symbolic links are not copied), cmd runs with those paths
// rewritten to the copy, and then the files the command created or
// changed come back — the run directory's into hostRun, a writable
// mount's into its folder; a read-only mount's changes are not copied
// back, so its folder here never changes. The server's copy is removed
// afterwards. The result is the command's own, Blocked included.
//
// It relies on modification times on the server (a command that sets
// them back hides its change) and deletes nothing here.
func (s *Sandbox) RunCode(ctx context.Context, cmd sandbox.Command, hostRun string, mounts []CodeMount) (sandbox.Result, error) {
	rel := ".hutch-run-" + strings.ToLower(rand.Text()[:16])
	remoteRun := path.Join(s.Root(), rel)
	defer func() {
		// Removed on a context of its own: a cancelled call leaves no
		// copy behind on a server whose sessions outlive it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = s.Remove(rctx, rel, true)
	}()
	if _, err := s.CopyIn(ctx, hostRun, rel); err != nil {
		return sandbox.Result{}, fmt.Errorf("copying the run directory in: %w", err)
	}
	for _, m := range mounts {
		if err := validMountName(m.Name); err != nil {
			return sandbox.Result{}, err
		}
		if _, err := s.CopyIn(ctx, m.Host, path.Join(rel, m.Name)); err != nil {
			return sandbox.Result{}, fmt.Errorf("copying mount %s in: %w", m.Name, err)
		}
	}
	mark, err := s.mark(ctx, rel)
	if err != nil {
		return sandbox.Result{}, err
	}
	res, err := s.Exec(ctx, rewriteRun(cmd, filepath.Clean(hostRun), remoteRun))
	if err != nil {
		return res, err
	}
	inMount := func(name string) bool {
		for _, m := range mounts {
			if name == m.Name || strings.HasPrefix(name, m.Name+"/") {
				return true
			}
		}
		return false
	}
	if _, err := s.copyOut(ctx, rel, hostRun, mark, inMount); err != nil {
		return res, fmt.Errorf("copying the run directory back: %w", err)
	}
	for _, m := range mounts {
		if !m.Writable {
			continue
		}
		if _, err := s.CopyOut(ctx, path.Join(rel, m.Name), m.Host, mark); err != nil {
			return res, fmt.Errorf("copying mount %s back: %w", m.Name, err)
		}
	}
	return res, nil
}

// validMountName refuses a mount name that is not one path component.
func validMountName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%w: mount name %q is not a single path component", sandbox.ErrConfig, name)
	}
	return nil
}

// rewriteRun is cmd with every argument, its Dir and its environment's
// values naming hostRun or a path below it naming the same path below
// remoteRun instead.
func rewriteRun(cmd sandbox.Command, hostRun, remoteRun string) sandbox.Command {
	swap := func(v string) string {
		if v == hostRun {
			return remoteRun
		}
		if rest, ok := strings.CutPrefix(v, hostRun+string(filepath.Separator)); ok {
			return path.Join(remoteRun, filepath.ToSlash(rest))
		}
		return v
	}
	cmd.Args = append([]string(nil), cmd.Args...)
	for i, a := range cmd.Args {
		cmd.Args[i] = swap(a)
	}
	cmd.Dir = swap(cmd.Dir)
	if cmd.Env != nil {
		env := make(map[string]string, len(cmd.Env))
		for k, v := range cmd.Env {
			env[k] = swap(v)
		}
		cmd.Env = env
	}
	return cmd
}

// CodeNarrowing is what a code run under pol asks of a server's policy:
// pol's network and allowed hosts always (so a sandbox without network
// has none there either, whatever the server allows), its denied hosts
// and paths added, and its limits and timeout where they differ from the
// default policy's (else the server's hold). Paths to read and write are
// the server's: a policy that lists more than the default's (and the
// carried paths, the run directory and mounts RunCode copies) is refused,
// naming them, since they would mean paths on this machine.
func CodeNarrowing(pol policy.Policy, carried ...string) (policy.Narrowing, error) {
	def := policy.Default()
	pol.Read, pol.Write = missingFrom(pol.Read, carried), missingFrom(pol.Write, carried)
	if extra := missingFrom(pol.Read, def.Read); len(extra) > 0 {
		return policy.Narrowing{}, fmt.Errorf("%w: read %s: on the remote tier the paths are the server's: give them to hutch serve", sandbox.ErrConfig, strings.Join(extra, ", "))
	}
	if extra := missingFrom(pol.Write, def.Write); len(extra) > 0 {
		return policy.Narrowing{}, fmt.Errorf("%w: write %s: on the remote tier the paths are the server's: give them to hutch serve", sandbox.ErrConfig, strings.Join(extra, ", "))
	}
	n := policy.Narrowing{Network: pol.Network, Hosts: pol.Hosts, DenyHosts: pol.DenyHosts, Deny: missingFrom(pol.Deny, def.Deny)}
	if n.Network == "" {
		n.Network = policy.NetworkNone
	}
	if pol.Timeout != def.Timeout {
		n.Timeout = pol.Timeout
	}
	l, d := pol.Limits, def.Limits
	if l.Memory != d.Memory {
		n.Limits.Memory = l.Memory
	}
	if l.CPUTime != d.CPUTime {
		n.Limits.CPUTime = l.CPUTime
	}
	if l.Processes != d.Processes {
		n.Limits.Processes = l.Processes
	}
	if l.FileSize != d.FileSize {
		n.Limits.FileSize = l.FileSize
	}
	if l.OpenFiles != d.OpenFiles {
		n.Limits.OpenFiles = l.OpenFiles
	}
	return n, nil
}

// missingFrom is the entries of a not in b.
func missingFrom(a, b []string) []string {
	var out []string
	for _, x := range a {
		found := false
		for _, y := range b {
			if filepath.Clean(x) == filepath.Clean(y) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, x)
		}
	}
	return out
}
