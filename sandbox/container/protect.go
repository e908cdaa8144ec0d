package container

import (
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// protectedBinds are the read-only binds that keep the protected paths
// (o.protected: policy.Policy.Protected) that exist now at the top of
// each writable bind, and of the working directory when it lies deeper
// in one, read-only in the container: a write there fails (EROFS), a
// rename or removal of the path itself too (EBUSY: it is a mount point).
// Each directory on the way to one (.git for .git/hooks) is bound onto
// itself, writable, so that it cannot be moved aside and made anew, and
// so are a working directory deeper in a writable bind and the
// directories above it up to the bind. A
// protected path that is missing, that is a symbolic link or that lies
// behind one gets nothing: a mount needs something there, and the
// runtime would follow the link (see docs/security.md): when any is,
// supervise lists every root (as the container sees it) and hutch's
// helper runs the supervisor for the commands (HelperArgs). Nothing is
// bound or supervised for a remote engine, whose files this machine
// cannot see.
func (o Options) protectedBinds() (binds []Bind, supervise []string) {
	if len(o.protected) == 0 || o.Engine.remote() {
		return nil, nil
	}
	type root struct{ src, dst string }
	var roots []root
	for _, b := range o.Binds {
		if !b.Writable {
			continue
		}
		roots = append(roots, root{b.Source, b.Target})
		if rel, ok := strings.CutPrefix(o.WorkDir, strings.TrimSuffix(b.Target, "/")+"/"); ok {
			roots = append(roots, root{path.Join(b.Source, rel), o.WorkDir})
		}
	}
	var out []Bind
	missing := false
	add := func(b Bind) {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	// A working directory deeper in a writable bind, and each directory
	// above it up to the bind, is bound onto itself too: moved aside, it
	// would take its protected paths to names nothing keeps. Up to the
	// first that is missing, not a directory or a symbolic link (the
	// runtime would follow one).
	for _, b := range o.Binds {
		rel, ok := strings.CutPrefix(o.WorkDir, strings.TrimSuffix(b.Target, "/")+"/")
		if !b.Writable || !ok {
			continue
		}
		parts := strings.Split(rel, "/")
		for i := range parts {
			sub := strings.Join(parts[:i+1], "/")
			fi, err := os.Lstat(path.Join(b.Source, sub))
			if err != nil || !fi.IsDir() {
				break
			}
			add(Bind{Source: path.Join(b.Source, sub), Target: path.Join(b.Target, sub), Writable: true})
		}
	}
	for _, r := range roots {
		for _, e := range o.protected {
			parts := strings.Split(e, "/")
			ok := true
			for i := range parts {
				fi, err := os.Lstat(path.Join(r.src, strings.Join(parts[:i+1], "/")))
				if err != nil || fi.Mode()&fs.ModeSymlink != 0 || i < len(parts)-1 && !fi.IsDir() {
					ok = false
					break
				}
			}
			if !ok {
				missing = true
				continue
			}
			for i := 1; i < len(parts); i++ {
				dir := strings.Join(parts[:i], "/")
				add(Bind{Source: path.Join(r.src, dir), Target: path.Join(r.dst, dir), Writable: true})
			}
			add(Bind{Source: path.Join(r.src, e), Target: path.Join(r.dst, e)})
		}
	}
	if missing {
		for _, r := range roots {
			if !slices.Contains(supervise, path.Clean(r.dst)) {
				supervise = append(supervise, path.Clean(r.dst))
			}
		}
	}
	return out, supervise
}
