package search

import (
	"bytes"
	"strings"
)

// This file is the .gitignore matcher: git's rules (gitignore(5)), ported
// from git's dir.c and wildmatch.c so that a path is ignored here exactly
// when git ignores it.
//
//   - Lines are split at "\n" ("\r\n" too); a UTF-8 byte order mark at the
//     start is dropped; blank lines and lines starting with "#" are
//     skipped ("\#" is a literal "#").
//   - Trailing spaces are removed unless escaped ("\ ").
//   - A leading "!" negates the pattern ("\!" is a literal "!"): a path it
//     matches is not ignored. A file whose parent directory is ignored
//     cannot be re-included, because the walk never enters that directory.
//   - A trailing "/" makes the pattern match directories only.
//   - A "/" at the start or in the middle anchors the pattern to the
//     directory of the .gitignore file; otherwise it matches the base name
//     at any depth below that directory.
//   - "*" and "?" match within one path element, "[...]" is a class
//     ("[!...]" or "[^...]" negated, ranges, "[:alpha:]" and the other
//     POSIX names), "\" escapes the next character; "**/" at the start, "/**"
//     at the end and "/**/" in the middle match any number of directories
//     (a "**" elsewhere is a "*").
//   - The last matching line decides; a deeper .gitignore file overrides a
//     shallower one, and every .gitignore file overrides .git/info/exclude.
//
// Matching is by bytes and case-sensitive, as git's is with core.ignorecase
// false (its default on Linux).

// ignoreRule is one pattern line of an ignore file.
type ignoreRule struct {
	pattern  string // wildmatch pattern, without "!", a leading "/" or a trailing "/"
	negate   bool   // "!": a match re-includes
	dirOnly  bool   // trailing "/": directories only
	baseOnly bool   // no "/": matched against the base name
	literal  bool   // no wildcard: plain comparison
	suffix   string // pattern is "*" + suffix with no other wildcard (baseOnly)
}

// ignoreFile is the rules of one ignore file and the root-relative
// directory they are relative to ("" for the root).
type ignoreFile struct {
	dir   string
	rules []ignoreRule
}

// parseIgnore reads the rules of one .gitignore (or info/exclude) whose
// patterns are relative to dir ("" for the root).
func parseIgnore(dir string, data []byte) *ignoreFile {
	f := &ignoreFile{dir: dir}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if i := bytes.IndexByte(line, 0); i >= 0 { // git reads C strings
			line = line[:i]
		}
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if r, ok := parseRule(trimTrailingSpaces(string(line))); ok {
			f.rules = append(f.rules, r)
		}
	}
	return f
}

// parseRule turns one non-comment line into a rule; ok is false for a line
// that can match nothing.
func parseRule(p string) (r ignoreRule, ok bool) {
	if strings.HasPrefix(p, "!") {
		r.negate = true
		p = p[1:]
	}
	if strings.HasSuffix(p, "/") {
		r.dirOnly = true
		p = p[:len(p)-1]
	}
	r.baseOnly = !strings.Contains(p, "/")
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return r, false
	}
	r.pattern = p
	r.literal = !strings.ContainsAny(p, globSpecial)
	if r.baseOnly && len(p) > 1 && p[0] == '*' && !strings.ContainsAny(p[1:], globSpecial) {
		r.suffix = p[1:]
	}
	return r, true
}

const globSpecial = `*?[\`

// trimTrailingSpaces removes the trailing spaces of a line, except an
// escaped one ("\ "), as git's trim_trailing_spaces does.
func trimTrailingSpaces(s string) string {
	lastSpace := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if lastSpace < 0 {
				lastSpace = i
			}
		case '\\':
			i++
			if i == len(s) {
				return s
			}
			lastSpace = -1
		default:
			lastSpace = -1
		}
	}
	if lastSpace >= 0 {
		return s[:lastSpace]
	}
	return s
}

// match reports whether the file's rules decide about p (root-relative, below
// f.dir) and if so whether p is ignored.
func (f *ignoreFile) match(p, base string, isDir bool) (ignored, decided bool) {
	rel := p
	if f.dir != "" {
		rel = p[len(f.dir)+1:]
	}
	for i := len(f.rules) - 1; i >= 0; i-- {
		r := &f.rules[i]
		if r.dirOnly && !isDir {
			continue
		}
		target := rel
		if r.baseOnly {
			target = base
		}
		var hit bool
		switch {
		case r.literal:
			hit = target == r.pattern
		case r.suffix != "":
			hit = strings.HasSuffix(target, r.suffix)
		default:
			hit = wildmatch(r.pattern, target)
		}
		if hit {
			return !r.negate, true
		}
	}
	return false, false
}

// ignores is the stack of ignore files that apply in one directory: the
// deepest first, .git/info/exclude at the bottom.
type ignores struct {
	file   *ignoreFile
	parent *ignores
}

// push returns the stack with f on top (s itself is unchanged: sibling
// directories share their parent's stack).
func (s *ignores) push(f *ignoreFile) *ignores {
	if f == nil || len(f.rules) == 0 {
		return s
	}
	return &ignores{file: f, parent: s}
}

// ignored reports whether the root-relative path p (a directory when isDir)
// is ignored by the stack, whose files all lie in p's ancestors.
func (s *ignores) ignored(p string, isDir bool) bool {
	base := p[strings.LastIndexByte(p, '/')+1:]
	for n := s; n != nil; n = n.parent {
		if ign, ok := n.file.match(p, base, isDir); ok {
			return ign
		}
	}
	return false
}

// wildmatch reports whether text matches the gitignore pattern p, with
// git's WM_PATHNAME semantics ("*" does not match "/").
func wildmatch(p, text string) bool { return dowild(p, 0, text, 0) == wmMatch }

// dowild's answers, as in git's wildmatch.c: the abort results let a "*"
// stop trying longer texts once no longer one can match, which keeps the
// matching polynomial.
const (
	wmMatch           = 0
	wmNoMatch         = 1
	wmAbortAll        = -1
	wmAbortToStarStar = -2
)

// at is s[i], or 0 past the end (the C code's terminating NUL; neither
// patterns nor paths contain NUL bytes).
func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// dowild is git's dowild (wildmatch.c) with WM_PATHNAME, translated
// statement by statement.
func dowild(p string, pi int, t string, ti int) int {
	for ; at(p, pi) != 0; pi, ti = pi+1, ti+1 {
		pch := p[pi]
		tch := at(t, ti)
		if tch == 0 && pch != '*' {
			return wmAbortAll
		}
		switch pch {
		case '\\':
			pi++
			if tch != at(p, pi) {
				return wmNoMatch
			}
			continue
		case '?':
			if tch == '/' {
				return wmNoMatch
			}
			continue
		case '*':
			matchSlash := false
			pi++
			if at(p, pi) == '*' {
				prev := pi - 2
				for pi++; at(p, pi) == '*'; pi++ {
				}
				c := at(p, pi)
				if (prev < 0 || p[prev] == '/') && (c == 0 || c == '/' || (c == '\\' && at(p, pi+1) == '/')) {
					if c == '/' && dowild(p, pi+1, t, ti) == wmMatch {
						return wmMatch
					}
					matchSlash = true
				}
			}
			switch c := at(p, pi); {
			case c == 0:
				if !matchSlash && strings.IndexByte(t[ti:], '/') >= 0 {
					return wmNoMatch
				}
				return wmMatch
			case !matchSlash && c == '/':
				slash := strings.IndexByte(t[ti:], '/')
				if slash < 0 {
					return wmNoMatch
				}
				ti += slash // the loop's step consumes the slash in both
				continue
			}
			for tch != 0 {
				if c := at(p, pi); !strings.ContainsRune(globSpecial, rune(c)) {
					for {
						tch = at(t, ti)
						if tch == 0 || (!matchSlash && tch == '/') || tch == c {
							break
						}
						ti++
					}
					if tch != c {
						return wmNoMatch
					}
				}
				if m := dowild(p, pi, t, ti); m != wmNoMatch {
					if !matchSlash || m != wmAbortToStarStar {
						return m
					}
				} else if !matchSlash && tch == '/' {
					return wmAbortToStarStar
				}
				ti++
				tch = at(t, ti)
			}
			return wmAbortAll
		case '[':
			pi++
			pch = at(p, pi)
			if pch == '^' {
				pch = '!'
			}
			negated := pch == '!'
			if negated {
				pi++
				pch = at(p, pi)
			}
			var prev byte
			matched := false
			for {
				switch {
				case pch == 0:
					return wmAbortAll
				case pch == '\\':
					pi++
					pch = at(p, pi)
					if pch == 0 {
						return wmAbortAll
					}
					if tch == pch {
						matched = true
					}
				case pch == '-' && prev != 0 && at(p, pi+1) != 0 && at(p, pi+1) != ']':
					pi++
					pch = at(p, pi)
					if pch == '\\' {
						pi++
						pch = at(p, pi)
						if pch == 0 {
							return wmAbortAll
						}
					}
					if tch <= pch && tch >= prev {
						matched = true
					}
					pch = 0 // a range does not start another
				case pch == '[' && at(p, pi+1) == ':':
					pi += 2
					s := pi
					for at(p, pi) != 0 && p[pi] != ']' {
						pi++
					}
					if at(p, pi) == 0 {
						return wmAbortAll
					}
					if n := pi - s - 1; n < 0 || p[pi-1] != ':' {
						// No ":]": the "[" is an ordinary member.
						pi = s - 2
						pch = '['
						if tch == pch {
							matched = true
						}
						break
					}
					in, ok := inClass(p[s:pi-1], tch)
					if !ok {
						return wmAbortAll // an unknown [:class:]
					}
					if in {
						matched = true
					}
					pch = 0
				default:
					if tch == pch {
						matched = true
					}
				}
				prev = pch
				pi++
				pch = at(p, pi)
				if pch == ']' {
					break
				}
			}
			if matched == negated || tch == '/' {
				return wmNoMatch
			}
			continue
		default:
			if tch != pch {
				return wmNoMatch
			}
			continue
		}
	}
	if ti < len(t) {
		return wmNoMatch
	}
	return wmMatch
}

// inClass reports whether c is in the POSIX class name (ASCII only, as in
// git); ok is false for an unknown name.
func inClass(name string, c byte) (in, ok bool) {
	lower := 'a' <= c && c <= 'z'
	upper := 'A' <= c && c <= 'Z'
	digit := '0' <= c && c <= '9'
	space := c == ' ' || ('\t' <= c && c <= '\r')
	print := 0x20 <= c && c <= 0x7e
	switch name {
	case "alnum":
		return lower || upper || digit, true
	case "alpha":
		return lower || upper, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 0x20 || c == 0x7f, true
	case "digit":
		return digit, true
	case "graph":
		return print && c != ' ', true
	case "lower":
		return lower, true
	case "print":
		return print, true
	case "punct":
		return print && c != ' ' && !lower && !upper && !digit, true
	case "space":
		return space, true
	case "upper":
		return upper, true
	case "xdigit":
		return digit || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F'), true
	}
	return false, false
}
