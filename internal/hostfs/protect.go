package hostfs

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Protect makes the paths entries name (relative and clean, as
// policy.Policy.Protected lists them: ".git/hooks", ".vscode") read-only
// to the file operations wherever they stand below the root, at any
// depth: Write, Mkdir, Rename and Remove refuse, with
// sandbox.ErrProtected, a path at or below one (through symbolic links
// too: what a link leads to is judged), and Rename and Remove refuse a
// directory on the way to one (".git", which holds ".git/hooks"), so no
// protected path can be moved aside and made anew. Call it before the
// FS serves anything; nil protects nothing.
func (s *FS) Protect(entries []string) {
	s.protected = make([][]string, 0, len(entries))
	for _, e := range entries {
		s.protected = append(s.protected, strings.Split(e, "/"))
	}
}

// protectedEntry returns the protected entry the root-relative clean
// path rel is at or below, at any depth; with holding, also one rel is a
// directory on the way to ("a/.git" for ".git/hooks"). "" when none.
func (s *FS) protectedEntry(rel string, holding bool) string {
	if len(s.protected) == 0 || rel == "." || rel == "" {
		return ""
	}
	parts := strings.Split(rel, "/")
	for _, ep := range s.protected {
		for i := range parts {
			n := min(len(ep), len(parts)-i)
			if slices.Equal(parts[i:i+n], ep[:n]) && (n == len(ep) || holding) {
				return strings.Join(ep, "/")
			}
		}
	}
	return ""
}

// refuseProtected returns the error for op on p when the root-relative
// path rel, where its links lead, or any of also (paths the caller has
// resolved already), is protected (see Protect); the entry itself is
// followed only with follow (a mkdir makes what a link at p leads to; a
// rename or remove acts on the link).
func (s *FS) refuseProtected(op, p, rel string, follow, holding bool, also ...string) error {
	if len(s.protected) == 0 {
		return nil
	}
	paths := append([]string{rel}, also...)
	switch {
	case len(also) > 0:
	case follow:
		if t, err := s.followLinks(rel); err == nil {
			paths = append(paths, t)
			break
		}
		fallthrough // below a file, say: judge where its directory leads
	default:
		if dir, base := path.Split(rel); dir != "" {
			if t, err := s.followLinks(dir); err == nil {
				paths = append(paths, path.Join(t, base))
			}
		}
	}
	for _, q := range paths {
		if e := s.protectedEntry(q, holding); e != "" {
			return tierkit.PathError(op, p, fmt.Errorf("%w: %s stays read-only inside a writable directory (.git/hooks, .vscode and the like could run code outside the sandbox later); lift it with --unprotect %s (in a policy, unprotect: [%s])", sandbox.ErrProtected, e, e, e))
		}
	}
	return nil
}

// checkPinned returns an error for op on p unless d, the directory the
// operation pinned after it judged the root-relative dir (a path through
// no symbolic link: followLinks resolved them), is still the directory at
// dir reached through no symbolic link. A directory on the way swapped
// for a link since the check (to .git, say) would lead d somewhere never
// judged: the operation is refused then, and can be tried again. Without
// protected paths there is nothing a swap inside the root could reach
// that the check allowed elsewhere.
func (s *FS) checkPinned(op, p string, d *os.File, dir string) error {
	if len(s.protected) == 0 {
		return nil
	}
	changed, err := samePinned(s.root, d, dir)
	if err != nil {
		return mapErr(op, p, err)
	}
	if changed != nil {
		return mapErr(op, p, fmt.Errorf("a directory on its path changed while it was used (now a symbolic link, or moved): try again: %w", changed))
	}
	return nil
}

// checkPinnedRoot is checkPinned for a directory pinned as an os.Root.
func (s *FS) checkPinnedRoot(op, p string, d *os.Root, dir string) error {
	if len(s.protected) == 0 {
		return nil
	}
	f, err := d.Open(".")
	if err != nil {
		return mapErr(op, p, err)
	}
	defer f.Close()
	return s.checkPinned(op, p, f, dir)
}
