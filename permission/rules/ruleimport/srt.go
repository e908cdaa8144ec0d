package ruleimport

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/netproxy"
	"github.com/hutchsandbox/hutch/policy"
)

// srtPath is one path of an srt settings file, resolved.
type srtPath struct {
	text string // as written
	abs  string // resolved ("" for a glob)
	line int
}

// srt imports sandbox-runtime settings files into a policy.
func (im *importer) srt(files []string) error {
	for _, f := range files {
		n, err := readJSONObject(f, "an srt settings file")
		if err != nil {
			return err
		}
		p := im.policy()
		var fs, net *jnode
		for i, k := range n.keys {
			switch k {
			case "filesystem":
				fs = n.vals[i]
			case "network":
				net = n.vals[i]
			case "$schema":
			default:
				im.report(where(f, n.vals[i].line), "%s: no hutch equivalent; not imported", k)
			}
		}
		im.report(where(f, 0), "srt reads the whole filesystem unless denyRead says otherwise; hutch's policy reads only the system paths (%s) and its read and write paths: add read paths the commands need", strings.Join(policy.SystemPaths, " "))
		if fs != nil {
			if err := im.srtFilesystem(f, fs, p); err != nil {
				return err
			}
		}
		if net == nil {
			p.Network = policy.NetworkNone
			im.mapped(where(f, 0), "no network settings (srt allows no network) -> policy network none")
			continue
		}
		if err := im.srtNetwork(f, net, p); err != nil {
			return err
		}
	}
	return nil
}

// srtPaths reads a list of paths, resolved against the root and home.
func (im *importer) srtPaths(f, key string, v *jnode) ([]srtPath, error) {
	items, err := v.strings()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s %s", ErrImport, where(f, v.line), key, oneLine(err))
	}
	var out []srtPath
	for _, it := range items {
		sp := srtPath{text: it.str, line: it.line}
		if !hasGlob(it.str) {
			abs := expandHome(it.str, im.opts.Home)
			if !filepath.IsAbs(abs) {
				abs = filepath.Join(im.opts.Root, abs)
			}
			sp.abs = filepath.Clean(abs)
		}
		out = append(out, sp)
	}
	return out, nil
}

// srtFilesystem maps the filesystem settings.
func (im *importer) srtFilesystem(f string, fs *jnode, p *policy.Policy) error {
	if fs.kind != 'o' {
		return fmt.Errorf("%w: %s: filesystem is %s, not an object", ErrImport, where(f, fs.line), fs.kindName())
	}
	lists := map[string][]srtPath{}
	for i, k := range fs.keys {
		switch k {
		case "denyRead", "allowRead", "allowWrite", "denyWrite":
			l, err := im.srtPaths(f, k, fs.vals[i])
			if err != nil {
				return err
			}
			lists[k] = l
		default:
			im.report(where(f, fs.vals[i].line), "filesystem.%s: no hutch equivalent; not imported", k)
		}
	}
	glob := func(key string, sp srtPath, hint string) {
		im.report(where(f, sp.line), "%s %s: a glob; hutch's policy takes paths%s", key, sp.text, hint)
	}
	// allow adds a list's paths to one of the policy's lists.
	allow := func(key, to string, dst *[]string, hint string) {
		for _, sp := range lists[key] {
			if sp.abs == "" {
				glob(key, sp, hint)
				continue
			}
			addUnique(dst, sp.abs)
			im.mapped(where(f, sp.line), "%s %s -> policy %s %s", key, sp.text, to, sp.abs)
		}
	}
	allow("allowWrite", "write", &p.Write, " (srt on Linux skips it too)")
	for _, sp := range lists["denyWrite"] {
		w := where(f, sp.line)
		if sp.abs == "" {
			glob("denyWrite", sp, "; protect a name below every writable path with protect: [NAME]")
			continue
		}
		if i := slices.Index(p.Write, sp.abs); i >= 0 {
			p.Write = slices.Delete(p.Write, i, i+1)
			im.mapped(w, "denyWrite %s -> policy write no longer lists %s", sp.text, sp.abs)
		}
		i := slices.IndexFunc(p.Write, func(root string) bool { return within(sp.abs, root) })
		if i < 0 {
			im.mapped(w, "denyWrite %s -> nothing more to add: it is below no writable path, and hutch writes only those", sp.text)
			continue
		}
		rel, _ := filepath.Rel(p.Write[i], sp.abs)
		addUnique(&p.Protect, filepath.ToSlash(rel))
		im.mapped(w, "denyWrite %s -> policy protect %s", sp.text, filepath.ToSlash(rel))
		if len(p.Write) > 1 {
			im.report(w, "denyWrite %s: hutch's protect %s holds below every writable path, not only %s", sp.text, filepath.ToSlash(rel), p.Write[i])
		}
	}
	allow("allowRead", "read", &p.Read, "")
	for _, sp := range lists["denyRead"] {
		w := where(f, sp.line)
		if sp.abs == "" {
			glob("denyRead", sp, "; for the file tools, a rule such as deny: read .env matches a name at any depth")
			continue
		}
		reopened := slices.ContainsFunc(append(slices.Clone(p.Read), p.Write...), func(a string) bool { return within(a, sp.abs) && a != sp.abs })
		if reopened {
			im.report(w, "denyRead %s: srt re-allows paths inside it (allowRead, allowWrite); hutch's deny would win over them, and hutch does not read %s unless the policy lists it: not added", sp.text, sp.abs)
			continue
		}
		addUnique(&p.Deny, sp.abs)
		im.mapped(w, "denyRead %s -> policy deny %s", sp.text, sp.abs)
	}
	return nil
}

// srtNetwork maps the network settings.
func (im *importer) srtNetwork(f string, net *jnode, p *policy.Policy) error {
	if net.kind != 'o' {
		return fmt.Errorf("%w: %s: network is %s, not an object", ErrImport, where(f, net.line), net.kindName())
	}
	p.Network = policy.NetworkNone
	for i, k := range net.keys {
		v := net.vals[i]
		w := where(f, v.line)
		switch k {
		case "allowedDomains", "deniedDomains":
			items, err := v.strings()
			if err != nil {
				return fmt.Errorf("%w: %s: %s %s", ErrImport, w, k, oneLine(err))
			}
			for _, it := range items {
				im.srtDomain(where(f, it.line), k, it.str, p)
			}
		case "allowLocalBinding":
			if v.kind == 'b' && v.b {
				im.report(w, "allowLocalBinding true: commands in hutch's private network may listen on its loopback only; the host cannot reach them")
			}
		case "allowUnixSockets", "allowAllUnixSockets":
			im.report(w, "%s: hutch has no Unix socket setting; a socket is reachable when its path is in the policy's write paths", k)
		default:
			im.report(w, "network.%s: no hutch equivalent; not imported", k)
		}
	}
	if len(p.Hosts) > 0 {
		p.Network = policy.NetworkAllow
	} else if len(p.DenyHosts) > 0 {
		im.report(where(f, net.line), "deniedDomains without allowedDomains: srt allows no network then, nor does hutch (network none); the deny list is kept for when hosts are allowed")
	}
	return nil
}

// srtDomain maps one allowedDomains or deniedDomains entry.
func (im *importer) srtDomain(w, key, entry string, p *policy.Policy) {
	if strings.TrimSpace(entry) == "*" || strings.HasPrefix(strings.TrimSpace(entry), "*:") {
		im.report(w, "%s %s: hutch's network lists take hosts, not every host; with no allowed host hutch has no network", key, entry)
		return
	}
	e, err := netproxy.ParseEntry(entry)
	if err != nil {
		im.report(w, "%s %s: %s", key, entry, oneLine(err))
		return
	}
	if key == "allowedDomains" {
		addUnique(&p.Hosts, e.String())
		im.mapped(w, "allowedDomains %s -> policy network allow %s", entry, e)
		return
	}
	addUnique(&p.DenyHosts, e.String())
	im.mapped(w, "deniedDomains %s -> policy network deny %s", entry, e)
}
