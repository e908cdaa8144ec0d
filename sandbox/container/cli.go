package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/internal/streamclient"
	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

// The fallback: one runtime exec per operation, each a fixed POSIX sh
// script. Paths, patterns, names and commands reach the script only as
// positional arguments ("$1"...), never as part of its text; environment
// values travel in a 0600 file given to --env-file. Links are resolved
// inside the container (readlink -f, as far as the path exists) and the
// result is checked against the resolved working directory. Unlike the
// helper's os.Root guard this resolves, then acts: a link swapped in
// between by a concurrent command is not caught.

// errRuntime: the runtime's exec failed before the script ran.
var errRuntime = errors.New("the container runtime's exec failed")

// isLost reports an error that may mean the container went away: the
// helper's stream ended, or the runtime's exec failed.
func isLost(err error) bool {
	return errors.Is(err, streamclient.ErrLost) || errors.Is(err, errRuntime)
}

// cliPrelude: the guard every script starts with. hutch_guard ROOT REL
// sets root (ROOT resolved) and R (REL resolved inside it, links followed
// as far as the path exists); it exits 3 when R leaves root.
const cliPrelude = `hutch_fail() { printf '%s\n' "$2" >&2; exit "$1"; }
hutch_guard() {
	root=$(readlink -f -- "$1") && [ -n "$root" ] || hutch_fail 8 "the working directory $1 is missing"
	if [ "$2" = . ]; then R=$root; return 0; fi
	p=$root/$2 rest=
	until r=$(readlink -f -- "$p" 2>/dev/null) && [ -n "$r" ]; do
		rest=/${p##*/}$rest
		p=${p%/*}
		[ -n "$p" ] || hutch_fail 8 "cannot resolve $2"
	done
	R=$r$rest
	case $R in "$root" | "$root"/*) ;; *) hutch_fail 3 "path escapes the sandbox root" ;; esac
}
`

// Exit codes of the scripts, and the errors they stand for.
var cliCodes = map[int]error{3: sandbox.ErrEscape, 4: sandbox.ErrNotFound, 5: sandbox.ErrIsDir, 6: sandbox.ErrNotDir, 7: sandbox.ErrTooLarge}

// $1 root, $2 path, $3 max bytes (0: all), $4 the size limit.
const cliRead = cliPrelude + `hutch_guard "$1" "$2"
[ -e "$R" ] || hutch_fail 4 "no such file or directory"
[ -d "$R" ] && hutch_fail 5 "is a directory"
[ -f "$R" ] || hutch_fail 9 "not a regular file"
info=$(stat -L -c '%s %f %y' -- "$R") || hutch_fail 8 "cannot stat"
size=${info%% *}
if [ "$3" -le 0 ] || [ "$3" -gt "$4" ]; then
	[ "$size" -gt "$4" ] && hutch_fail 7 "$size bytes is over the $4 byte limit"
fi
printf '%s\n' "$info"
if [ "$3" -gt 0 ]; then exec head -c "$3" -- "$R"; fi
exec cat -- "$R"
`

// $1 root, $2 path.
const cliStat = cliPrelude + `hutch_guard "$1" "$2"
[ -e "$R" ] || hutch_fail 4 "no such file or directory"
exec stat -L -c '%s %f %y' -- "$R"
`

// $1 root, $2 path, $3 a random suffix (16 hex digits), $4 the content's
// size, $5 1 to sweep the directory first; the content on stdin. Content
// that ends short (hutch died while sending it) is never renamed into
// place. The sweep removes what killed writes left in the directory: the
// regular files named .hutch-<16 hex>.tmp that are this user's and over a
// minute old, and nothing else.
const cliWrite = cliPrelude + `hutch_guard "$1" "$2"
[ "$R" = "$root" ] && hutch_fail 5 "is a directory"
[ -d "$R" ] && hutch_fail 5 "is a directory"
d=${R%/*}
[ -n "$d" ] || d=/
[ -d "$d" ] || mkdir -p -- "$d" 2>/dev/null || hutch_fail 6 "not a directory"
if [ "$5" = 1 ]; then
	h=[0-9a-f][0-9a-f][0-9a-f][0-9a-f]
	find "$d" -maxdepth 1 -type f -name ".hutch-$h$h$h$h.tmp" -user "$(id -u)" -mmin +1 -exec rm -f -- {} + 2>/dev/null
fi
m=644
[ -e "$R" ] && m=$(stat -L -c %a -- "$R")
t=$d/.hutch-$3.tmp
if cat >"$t" && [ "$(stat -c %s -- "$t")" = "$4" ] && chmod "$m" "$t" && { sync "$t" 2>/dev/null || sync; } && mv -f -- "$t" "$R"; then exit 0; fi
rm -f -- "$t"
hutch_fail 8 "write failed"
`

// $1 root, $2 the pattern's fixed base, $3 the depth (-1: any). Prints,
// NUL-separated: the resolved root; "D" and the directories; "F" and the
// other non-links; "L" and, per link, its path, its target resolved and
// the target's kind (d, f, or x when it does not resolve).
const cliGlob = cliPrelude + `hutch_guard "$1" "$2"
printf '%s\0' "$root"
[ -d "$R" ] && cd -- "$R" || exit 0
depth=
[ "$3" -ge 0 ] && depth="-maxdepth $3"
printf 'D\0'
find . -mindepth 1 $depth -type d -print0
printf 'F\0'
find . -mindepth 1 $depth ! -type d ! -type l -print0
printf 'L\0'
find . -mindepth 1 $depth -type l -exec sh -c '
for l do
	r=$(readlink -f -- "$l") || r=
	if [ -d "$r" ]; then k=d; elif [ -e "$r" ]; then k=f; else k=x; fi
	printf "%s\0%s\0%s\0" "$l" "$r" "$k"
done' sh {} +
exit 0
`

// cliSweep kills the tree of an exec's wrapper and every orphan started
// since it began: hutch_sweep W T0 kills each process whose parent chain
// reaches W, or reaches PID 1 through a process started at or after T0;
// other runtime execs (parent 0) and their trees are spared. Victims are
// stopped before they are killed, so none forks in between; only builtins
// run in the loop, so the sweep starts no process of its own (a fork bomb
// may have used every process slot).
const cliSweep = `hutch_sweep() {
	w=$1 t0=$2 round=0 all=
	while [ "$round" -lt 100 ]; do
		round=$((round + 1))
		for p in $all; do unset "pp_$p" "st_$p"; done
		all=
		for d in /proc/[0-9]*; do
			p=${d#/proc/}
			read -r s <"$d/stat" 2>/dev/null || continue
			s=${s##*") "}
			set -- $s
			[ "$1" = Z ] && continue
			eval "pp_$p=$2 st_$p=${20}"
			all="$all $p"
		done
		victims=
		for p in $all; do
			[ "$p" = "$$" ] && continue
			q=$p hops=0
			while [ "$hops" -lt 4096 ]; do
				if [ "$q" = "$w" ]; then victims="$victims $p"; break; fi
				eval "up=\${pp_$q-}"
				case $up in
				"" | 0) break ;;
				1) eval "[ \"\${st_$q}\" -ge $t0 ]" && victims="$victims $p"; break ;;
				esac
				q=$up hops=$((hops + 1))
			done
		done
		[ -z "$victims" ] && return 0
		kill -STOP $victims 2>/dev/null
		kill -KILL $victims 2>/dev/null
	done
}
`

// cliKill: $1 the wrapper's pid, $2 its start time.
const cliKill = cliSweep + `hutch_sweep "$1" "$2"
`

// cliExec: $1 root, $2 dir, $3 n, then n variable names, then the
// command. It starts in the directory, prints the header line "hutch-exec
// PID START" on stdout and on stderr (execHeader), runs the command with
// exactly PATH, HOME, LANG and the named variables (env -i), then sweeps
// what it left behind and exits with its status.
const cliExec = cliPrelude + cliSweep + `hutch_start() { read -r s <"/proc/$1/stat"; s=${s##*") "}; set -- $s; t0=${20}; }
hutch_guard "$1" "$2"
[ -e "$R" ] || hutch_fail 4 "no such file or directory"
[ -d "$R" ] || hutch_fail 6 "not a directory"
cd -- "$R" || hutch_fail 8 "cannot enter $2"
n=$3
shift 3
k=$(($# - n))
eval "prog=\${$((n + 1))}"
for v in PATH HOME LANG; do
	eval "[ -n \"\${$v+x}\" ] && set -- \"\$@\" \"$v=\${$v}\""
done
i=0
while [ "$i" -lt "$n" ]; do
	name=$1
	shift
	eval "set -- \"\$@\" \"$name=\${$name-}\""
	i=$((i + 1))
done
i=0
while [ "$i" -lt "$k" ]; do
	set -- "$@" "$1"
	shift
	i=$((i + 1))
done
hutch_start $$
printf 'hutch-exec %s %s\n' "$$" "$t0"
printf 'hutch-exec %s %s\n' "$$" "$t0" >&2
case $prog in
*/*) ;;
*) command -v "$prog" >/dev/null 2>&1 || { printf 'hutch: %s: command not found\n' "$prog" >&2; exit 127; } ;;
esac
env -i "$@"
st=$?
hutch_sweep "$$" "$t0"
exit "$st"
`

// shArgv is the argv that runs script with /bin/sh, args as its
// positional parameters. The runtime's exec carries argv as JSON, whose
// encoder turns every byte that is not UTF-8 into U+FFFD ("a\xff" and
// "a\xfe" would both become "a\uFFFD", one file): when any argument is
// not UTF-8, every one goes as octal escapes, which the script's first
// line (cliDecodeArgs) turns back into the bytes.
func shArgv(script string, args ...string) []string {
	if !slices.ContainsFunc(args, func(a string) bool { return !utf8.ValidString(a) }) {
		return append([]string{"/bin/sh", "-c", script, "sh"}, args...)
	}
	enc := make([]string, len(args))
	for i, a := range args {
		var b strings.Builder
		for j := 0; j < len(a); j++ {
			fmt.Fprintf(&b, "\\%03o", a[j])
		}
		enc[i] = b.String()
	}
	return append([]string{"/bin/sh", "-c", cliDecodeArgs + script, "sh"}, enc...)
}

// cliDecodeArgs replaces each positional parameter, an octal-escaped
// string (shArgv), by its bytes; the x keeps trailing newlines.
const cliDecodeArgs = `for a do d=$(printf "$a"; printf x); set -- "$@" "${d%x}"; shift; done
`

// cliBackend runs each operation as one runtime exec.
type cliBackend struct{ s *Sandbox }

// script runs one of the scripts with args; stdin may be nil. It returns
// the script's stdout, or the error its exit code stands for.
func (b cliBackend) script(ctx context.Context, op, rel string, stdin io.Reader, limit int, script string, args ...string) ([]byte, error) {
	s := b.s
	argv := shArgv(script, append([]string{s.o.WorkDir}, args...)...)
	c := exec.CommandContext(ctx, s.prog, s.o.ExecArgs(s.containerID(), stdin != nil, "", argv...)...)
	c.Stdin = stdin
	var out bytes.Buffer
	lw := &limitedWriter{w: &out, n: int64(limit) + 1}
	c.Stdout = lw
	errb := &tierkit.TailBuffer{Max: 4096}
	c.Stderr = errb
	c.WaitDelay = 5 * time.Second
	err := c.Run()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if out.Len() > limit {
		return nil, tierkit.PathError(op, rel, sandbox.ErrTooLarge)
	}
	if err == nil {
		return out.Bytes(), nil
	}
	return nil, scriptErr(op, rel, c.ProcessState, errb.Bytes(), err)
}

// scriptErr maps a failed script's exit code to the contract's errors;
// any other code means the runtime's exec itself failed.
func scriptErr(op, rel string, ps *os.ProcessState, stderr []byte, err error) error {
	msg := runtimeSays(stderr)
	code := -1
	if ps != nil {
		code = ps.ExitCode()
	}
	if e, ok := cliCodes[code]; ok {
		return tierkit.PathError(op, rel, e)
	}
	if code == 8 || code == 9 {
		return tierkit.PathError(op, rel, errors.New(msg))
	}
	if msg == "" {
		msg = err.Error()
	}
	return fmt.Errorf("%w: %s", errRuntime, msg)
}

func (s *Sandbox) containerID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

func (b cliBackend) ReadStat(ctx context.Context, rel string, max int64) ([]byte, sandbox.FileInfo, error) {
	out, err := b.script(ctx, "read", rel, nil, sandbox.MaxFileSize+4096, cliRead, rel,
		strconv.FormatInt(max, 10), strconv.Itoa(sandbox.MaxFileSize))
	if err != nil {
		return nil, sandbox.FileInfo{}, err
	}
	line, data, ok := bytes.Cut(out, []byte("\n"))
	if !ok {
		return nil, sandbox.FileInfo{}, fmt.Errorf("%w: read %s: no file information", errRuntime, rel)
	}
	fi, err := parseStat(string(line))
	if err != nil {
		return nil, sandbox.FileInfo{}, err
	}
	if int64(len(data)) > sandbox.MaxFileSize {
		return nil, sandbox.FileInfo{}, tierkit.PathError("read", rel, sandbox.ErrTooLarge)
	}
	return data, fi, nil
}

func (b cliBackend) Stat(ctx context.Context, rel string) (sandbox.FileInfo, error) {
	out, err := b.script(ctx, "stat", rel, nil, 4096, cliStat, rel)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	return parseStat(strings.TrimSpace(string(out)))
}

func (b cliBackend) Write(ctx context.Context, rel string, data []byte) error {
	sweep := "0"
	if b.s.firstWriteIn(path.Dir(rel)) {
		sweep = "1"
	}
	_, err := b.script(ctx, "write", rel, bytes.NewReader(data), 4096, cliWrite, rel, randomHex(), strconv.Itoa(len(data)), sweep)
	return err
}

// firstWriteIn reports whether this is the sandbox's first write into
// directory dir (root-relative), remembering it.
func (s *Sandbox) firstWriteIn(dir string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.swept == nil {
		s.swept = map[string]bool{}
	}
	first := !s.swept[dir]
	s.swept[dir] = true
	return first
}

// parseStat reads "SIZE RAWMODE(hex) YYYY-MM-DD HH:MM:SS.NNNNNNNNN +ZZZZ",
// what both GNU and busybox stat print for -c '%s %f %y'.
func parseStat(line string) (sandbox.FileInfo, error) {
	f := strings.SplitN(line, " ", 3)
	if len(f) == 3 {
		size, err1 := strconv.ParseInt(f[0], 10, 64)
		raw, err2 := strconv.ParseUint(f[1], 16, 32)
		mt, err3 := time.Parse("2006-01-02 15:04:05.999999999 -0700", f[2])
		if err1 == nil && err2 == nil && err3 == nil {
			mode, kind := tierkit.UnixMode(uint32(raw))
			fi := sandbox.FileInfo{Size: size, ModTime: mt, Mode: mode, Kind: kind}
			if kind == sandbox.KindDir {
				fi.Size = 0
			}
			return fi, nil
		}
	}
	return sandbox.FileInfo{}, fmt.Errorf("%w: unexpected stat output %q", errRuntime, line)
}

// errNeedsHelper is what the operations only hutch's helper serves
// return without it.
func errNeedsHelper(op, rel string) error {
	return tierkit.PathError(op, rel, fmt.Errorf("%w without hutch's helper in the container (it could not run there; see `hutch check`): build hutch with CGO_ENABLED=0 so the helper runs in any image", sandbox.ErrUnsupported))
}

func (b cliBackend) List(_ context.Context, rel string) ([]sandbox.FileInfo, error) {
	return nil, errNeedsHelper("list", rel)
}

func (b cliBackend) Search(_ context.Context, req sandbox.SearchRequest) (sandbox.SearchResult, error) {
	return sandbox.SearchResult{}, errNeedsHelper("search", req.Dir)
}

func (b cliBackend) Mkdir(_ context.Context, rel string) error { return errNeedsHelper("mkdir", rel) }

func (b cliBackend) Remove(_ context.Context, rel string, _ bool) error {
	return errNeedsHelper("remove", rel)
}

func (b cliBackend) Rename(_ context.Context, from, _ string) error {
	return errNeedsHelper("rename", from)
}

// maxListing bounds what one glob's listing may print.
const maxListing = 64 << 20

func (b cliBackend) Glob(ctx context.Context, pattern string, dirsOnly bool) ([]string, error) {
	base, depth := globBase(pattern)
	out, err := b.script(ctx, "glob", pattern, nil, maxListing, cliGlob, base, strconv.Itoa(depth))
	if err != nil {
		if errors.Is(err, sandbox.ErrEscape) {
			return []string{}, nil // the base leads out: nothing inside matches
		}
		if errors.Is(err, sandbox.ErrTooLarge) {
			return nil, fmt.Errorf("glob %s: the listing is over %d bytes, narrow the pattern: %w", pattern, maxListing, sandbox.ErrTooLarge)
		}
		return nil, err
	}
	fsys, err := parseListing(out, base)
	if err != nil {
		return nil, err
	}
	return tierkit.GlobFS(ctx, fsys, pattern, dirsOnly)
}

// globBase splits a clean pattern into its fixed leading directories (no
// glob syntax) and how deep below them a match can be (-1: any depth).
func globBase(pattern string) (string, int) {
	parts := strings.Split(pattern, "/")
	i := 0
	for i < len(parts)-1 && !strings.ContainsAny(parts[i], `*?[{\`) {
		i++
	}
	base := strings.Join(parts[:i], "/")
	if base == "" {
		base = "."
	}
	rest := parts[i:]
	if slices.ContainsFunc(rest, func(p string) bool { return strings.Contains(p, "**") }) ||
		strings.ContainsAny(strings.Join(rest, "/"), "{") {
		return base, -1 // ** or alternatives that may hold '/'
	}
	return base, len(rest)
}

// cleanRel reports whether rel is a clean relative path, by fs.ValidPath's
// rules but of any bytes: a name need not be UTF-8 (fs.ValidPath would
// refuse it), and '/' and '.' are single bytes wherever they appear.
func cleanRel(rel string) bool { return fs.ValidPath(strings.ToValidUTF8(rel, "x")) }

// listingFS is a glob listing as an fs.FS rooted at the sandbox root:
// directories, other entries, and links with their resolved targets.
type listingFS struct {
	kind     map[string]byte   // 'd', 'f' or 'l'
	target   map[string]string // link → root-relative target (absent: outside the root or dangling)
	linkKind map[string]byte   // link → its target's kind, 'd' or 'f', as the container saw it
	children map[string][]fs.DirEntry
}

// parseListing reads the glob script's output (paths relative to base).
func parseListing(out []byte, base string) (*listingFS, error) {
	bad := func() (*listingFS, error) {
		return nil, fmt.Errorf("%w: unexpected glob listing", errRuntime)
	}
	recs := strings.Split(string(out), "\x00")
	if len(recs) < 2 || recs[len(recs)-1] != "" {
		return bad() // every record ends with a NUL
	}
	recs = recs[:len(recs)-1]
	root := recs[0]
	recs = recs[1:]
	m := &listingFS{kind: map[string]byte{".": 'd'}, target: map[string]string{}, linkKind: map[string]byte{},
		children: map[string][]fs.DirEntry{}}
	add := func(p string, k byte) {
		if _, ok := m.kind[p]; ok {
			return
		}
		parent := path.Dir(p)
		if parent != p {
			if _, ok := m.kind[parent]; !ok {
				m.kindAdd(parent, 'd')
			}
		}
		m.kindAdd(p, k)
	}
	if base != "." {
		add(base, 'd')
	}
	section := byte(0)
	for i := 0; i < len(recs); i++ {
		r := recs[i]
		switch r {
		case "D", "F", "L":
			section = r[0]
			continue
		case "":
			return bad()
		}
		rel, ok := strings.CutPrefix(r, "./")
		if !ok || section == 0 || !cleanRel(rel) || rel == "." {
			return bad() // find prints clean paths below "."
		}
		p := path.Join(base, rel)
		switch section {
		case 'D':
			add(p, 'd')
		case 'F':
			add(p, 'f')
		case 'L':
			if i+2 >= len(recs) {
				return bad()
			}
			t, k := recs[i+1], recs[i+2]
			i += 2
			if k != "d" && k != "f" && k != "x" {
				return bad()
			}
			add(p, 'l')
			m.linkKind[p] = k[0]
			switch {
			case k == "x":
			case t == root:
				m.target[p] = "."
			case strings.HasPrefix(t, root+"/") && cleanRel(t[len(root)+1:]):
				m.target[p] = t[len(root)+1:]
			}
		}
	}
	for d := range m.children {
		slices.SortFunc(m.children[d], func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	}
	return m, nil
}

func (m *listingFS) kindAdd(p string, k byte) {
	if p == "." {
		return
	}
	if _, ok := m.kind[p]; ok {
		return
	}
	parent := path.Dir(p)
	if _, ok := m.kind[parent]; !ok {
		m.kindAdd(parent, 'd')
	}
	m.kind[p] = k
	m.children[parent] = append(m.children[parent], listEntry{name: path.Base(p), k: k})
}

// resolve follows the links along name (at most 40) and returns the path
// it names and its kind. A link at the end keeps the kind the container
// reported for its target, which may lie beyond the listing; a link in the
// middle is followed into the listing.
func (m *listingFS) resolve(name string) (string, byte, error) {
	done, todo := ".", name
	for hops := 0; ; {
		c, rest, _ := strings.Cut(todo, "/")
		next := path.Join(done, c)
		k := m.kind[next]
		if c == "" || c == "." {
			k = m.kind[done]
			next = done
		}
		switch {
		case k == 0:
			return "", 0, fs.ErrNotExist
		case k == 'l':
			t, ok := m.target[next]
			if !ok {
				return "", 0, fs.ErrNotExist // outside the root, or dangling
			}
			if rest == "" {
				return t, m.linkKind[next], nil
			}
			if hops++; hops > 40 {
				return "", 0, fs.ErrNotExist
			}
			done, todo = ".", t+"/"+rest
			continue
		}
		if rest == "" {
			return next, k, nil
		}
		done, todo = next, rest
	}
}

func (m *listingFS) Open(name string) (fs.File, error) {
	fi, err := m.Stat(name)
	if err != nil {
		return nil, err
	}
	return listFile{fi}, nil
}

func (m *listingFS) Stat(name string) (fs.FileInfo, error) {
	_, k, err := m.resolve(name)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return listEntry{name: path.Base(name), k: k}, nil
}

func (m *listingFS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, k, err := m.resolve(name)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	if k != 'd' {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	return m.children[p], nil // a directory beyond the listing reads as empty
}

// listEntry is both the fs.DirEntry and the fs.FileInfo of a listed path.
type listEntry struct {
	name string
	k    byte
}

func (e listEntry) Name() string { return e.name }
func (e listEntry) IsDir() bool  { return e.k == 'd' }
func (e listEntry) Type() fs.FileMode {
	switch e.k {
	case 'd':
		return fs.ModeDir
	case 'l':
		return fs.ModeSymlink
	}
	return 0
}
func (e listEntry) Info() (fs.FileInfo, error) { return e, nil }
func (e listEntry) Size() int64                { return 0 }
func (e listEntry) Mode() fs.FileMode          { return e.Type() | 0o755 }
func (e listEntry) ModTime() time.Time         { return time.Time{} }
func (e listEntry) Sys() any                   { return nil }

type listFile struct{ fi fs.FileInfo }

func (f listFile) Stat() (fs.FileInfo, error) { return f.fi, nil }
func (f listFile) Read([]byte) (int, error)   { return 0, io.EOF }
func (f listFile) Close() error               { return nil }

var identRE = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_]*$`)

// exec runs one command through the wrapper script (see cliExec).
func (b cliBackend) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	s := b.s
	argv := cmd.Args
	if cmd.Shell != "" {
		argv = []string{"/bin/sh", "-c", cmd.Shell}
	}
	if strings.Contains(argv[0], "=") {
		return sandbox.Result{}, fmt.Errorf("%w: container: without the helper a program name cannot contain '=' (%q)", sandbox.ErrConfig, argv[0])
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range cmd.Env {
			if !yield(k) {
				return
			}
		}
	})
	var envFile bytes.Buffer
	for _, k := range names {
		v := cmd.Env[k]
		if !identRE().MatchString(k) || strings.ContainsAny(v, "\n\r") {
			return sandbox.Result{}, fmt.Errorf("%w: container: without the helper, environment names must be shell identifiers and values one line (%s)", sandbox.ErrConfig, k)
		}
		fmt.Fprintf(&envFile, "%s=%s\n", k, v)
	}
	file := ""
	if len(names) > 0 {
		f, err := os.CreateTemp("", "hutch-env-*") // mode 0600
		if err != nil {
			return sandbox.Result{}, err
		}
		file = f.Name()
		defer os.Remove(file)
		_, err = f.Write(envFile.Bytes())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return sandbox.Result{}, err
		}
	}
	args := shArgv(cliExec, append(append([]string{s.o.WorkDir, cmd.Dir, strconv.Itoa(len(names))}, names...), argv...)...)
	c := exec.Command(s.prog, s.o.ExecArgs(s.containerID(), cmd.Stdin != nil, file, args...)...)
	stdout := &tierkit.TailBuffer{Max: cmd.MaxOutput}
	stderr := &tierkit.TailBuffer{Max: cmd.MaxOutput}
	hdr := newExecHeader()
	var errHdr *headerWriter
	pipes, err := tierkit.NewPipes(cmd, stdout, stderr, func(stream int, w io.Writer) io.Writer {
		h := &headerWriter{hdr: hdr, rest: w, passBad: stream == 1}
		if stream == 2 {
			errHdr = h
		}
		return h
	})
	if err != nil {
		return sandbox.Result{}, err
	}
	defer pipes.Close()
	// Pipes of our own: os/exec would wait without end for a copy stuck
	// in a caller's reader or writer.
	c.Stdin, c.Stdout, c.Stderr = pipes.Child[0], pipes.Child[1], pipes.Child[2]
	begin := time.Now()
	if err := c.Start(); err != nil {
		return sandbox.Result{}, fmt.Errorf("%w: %v", errRuntime, err)
	}
	pipes.Started()
	exited := make(chan struct{})
	var werr error
	go func() { werr = c.Wait(); close(exited) }()
	timer := time.NewTimer(cmd.Timeout)
	defer timer.Stop()
	timedOut := false
	select {
	case <-exited:
	case <-timer.C:
		timedOut = true
		pipes.Unblock() // the runtime's exec ends only once its output is read
		if !b.kill(c, hdr, exited) {
			return sandbox.Result{}, fmt.Errorf("%w: the command's timeout came and it could not be killed within %v (is the container paused? hutch kills it once the container runs again, while the sandbox is open)", ErrNotStopped, StopGrace)
		}
	case <-ctx.Done():
		b.kill(c, hdr, exited)
		return sandbox.Result{}, ctx.Err()
	}
	pipes.Ended() // the runtime's exec has exited: its output ends
	if !hdr.started() && !(pipes.Refused() && diedOf(c.ProcessState, syscall.SIGPIPE)) {
		return sandbox.Result{}, scriptErr("exec", cmd.Dir, c.ProcessState, errHdr.early(), werr)
	}
	res := tierkit.Captured(begin, stdout, stderr)
	res.ExitCode = c.ProcessState.ExitCode()
	switch {
	case timedOut:
		res.TimedOut, res.ExitCode, res.Signal = true, 137, "SIGKILL"
	case res.ExitCode == -1 && pipes.Refused():
		// A live writer failed: the runtime's exec died of the broken
		// pipe, and the command's tree, which does not write into that
		// pipe itself, may still run in the container. End it, and report
		// what the command would have had from a pipe of its own.
		// The runtime copies the command's stdout and stderr apart, so
		// its first output can come before the wrapper's header: a
		// runtime's exec that died of the refused pipe then never named
		// the tree, which ends on its own next write into the runtime's
		// broken stream, or with the container.
		if hdr.started() {
			b.endTree(hdr)
		}
		res.ExitCode, res.Signal = 141, "SIGPIPE"
	}
	return res, nil
}

// diedOf reports whether the process ps describes was killed by sig.
func diedOf(ps *os.ProcessState, sig syscall.Signal) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// endTree kills the tree of a wrapper whose runtime's exec is gone, trying
// for up to killGrace.
func (b cliBackend) endTree(hdr *execHeader) {
	ctx, cancel := context.WithTimeout(context.Background(), killGrace)
	defer cancel()
	pid, start := hdr.id()
	b.killTree(ctx, nil, pid, start, killRetry, false)
}

// kill ends a running wrapper's tree from a second exec, once its header
// has named it, and waits for the runtime's exec to end. It reports
// whether the tree is known to be dead: the runtime's exec ended (the
// wrapper sweeps its tree as it ends), or the kill ran. A paused
// container runs no kill: kill then gives up within StopGrace, kills the
// runtime's exec and tries the kill again in the background until it
// runs or the sandbox closes. A kill that cannot get a process (a fork
// bomb at the process limit) is tried for up to killGrace; a wrapper
// that never named itself within StopGrace is abandoned.
func (b cliBackend) kill(c *exec.Cmd, hdr *execHeader, exited chan struct{}) bool {
	ctx, cancel := context.WithTimeout(context.Background(), killGrace)
	defer cancel()
	grace := time.NewTimer(StopGrace)
	defer grace.Stop()
	killed := false
	select {
	case <-hdr.seen:
		pid, start := hdr.id()
		if killed = b.killTree(ctx, exited, pid, start, killRetry, true); !killed {
			go b.killTree(context.Background(), nil, pid, start, time.Second, false)
		}
	case <-exited:
		return true
	case <-grace.C:
	}
	if !killed {
		select {
		case <-exited:
			return true
		default:
		}
		_ = c.Process.Kill()
		<-exited
		return false
	}
	grace.Reset(StopGrace) // the runtime's exec ends with the wrapper
	select {
	case <-exited:
	case <-grace.C:
		_ = c.Process.Kill()
		<-exited
	}
	return true
}

// killTree runs the kill script for the wrapper pid (started at start),
// trying again every so long, until it runs, ctx ends, exited closes, the
// sandbox closes or its container is gone, or (with paused) the
// container is found paused; it reports whether the
// script ran. The kill needs a process in the container: under a fork
// bomb it may take a few tries to get one, and none runs in a paused
// container.
func (b cliBackend) killTree(ctx context.Context, exited chan struct{}, pid, start string, every time.Duration, paused bool) bool {
	s := b.s
	for ctx.Err() == nil {
		s.mu.Lock()
		over := s.closed || s.gone != nil
		s.mu.Unlock()
		if over {
			return false
		}
		tctx, cancel := context.WithTimeout(ctx, StopGrace)
		_, err := s.run(tctx, nil, s.o.ExecArgs(s.containerID(), false, "", "/bin/sh", "-c", cliKill, "sh", pid, start)...)
		cancel()
		if err == nil {
			return true
		}
		if paused && s.paused(ctx) {
			return false
		}
		select {
		case <-exited:
			return true
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
	return false
}

// paused reports whether the container is known to be paused.
func (s *Sandbox) paused(ctx context.Context) bool {
	if s.o.Runtime == Apple {
		return false
	}
	out, err := s.run(ctx, nil, s.o.PausedArgs(s.containerID())...)
	return err == nil && strings.TrimSpace(out) == "true"
}

// killRetry is the pause between two tries of a fallback command's kill.
const killRetry = 100 * time.Millisecond

// killGrace bounds the tries of a fallback command's kill that cannot
// get a process in the container.
const killGrace = 30 * time.Second

// execHeader is who the wrapper is, from its header line "hutch-exec
// PID START", which it prints first on both its stdout and its stderr
// before the command starts: the runtime copies the two streams apart, so
// either may reach hutch first, and a runtime's exec that dies of a
// refused pipe may never deliver the other. The first header seen names
// the wrapper; seen closes then.
type execHeader struct {
	mu         sync.Mutex
	pid, start string
	seen       chan struct{}
}

func newExecHeader() *execHeader { return &execHeader{seen: make(chan struct{})} }

func (e *execHeader) set(pid, start string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pid == "" {
		e.pid, e.start = pid, start
		close(e.seen)
	}
}

func (e *execHeader) started() bool {
	select {
	case <-e.seen:
		return true
	default:
		return false
	}
}

func (e *execHeader) id() (string, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pid, e.start
}

// headerWriter takes one of the wrapper's streams: its first line, the
// header, names the wrapper (hdr); what comes after is the command's and
// passes on to rest. On stderr, anything before a header is the wrapper's
// or the runtime's own error message, kept for early. On stdout (passBad),
// where the wrapper writes nothing before its header, a first line that
// is not a header passes on whole: it is not lost.
type headerWriter struct {
	mu        sync.Mutex
	hdr       *execHeader
	line      []byte
	done, bad bool
	passBad   bool
	rest      io.Writer
}

var headerRE = lazyRegexp(`^hutch-exec ([0-9]+) ([0-9]+)$`)

func (h *headerWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return h.rest.Write(p)
	}
	if h.bad {
		return h.hold(p)
	}
	i := bytes.IndexByte(p, '\n')
	head := p
	if i >= 0 {
		head = p[:i]
	}
	line := append(h.line[:len(h.line):len(h.line)], head...)
	if h.passBad && !couldBeHeader(line) {
		return h.pass(p)
	}
	if i < 0 {
		return h.hold(p)
	}
	if m := headerRE().FindSubmatch(line); m != nil {
		h.done, h.line = true, nil
		h.hdr.set(string(m[1]), string(m[2]))
		_, _ = h.rest.Write(p[i+1:])
		return len(p), nil
	}
	if h.passBad {
		return h.pass(p)
	}
	h.bad = true // not a header: all of it is the error message
	h.line = append(line, p[i:]...)
	return len(p), nil
}

// hold keeps p, up to 4 KiB in all, while no header has come.
func (h *headerWriter) hold(p []byte) (int, error) {
	if len(h.line) < 4096 {
		h.line = append(h.line, p...)
	}
	return len(p), nil
}

// pass ends the search for a header on a stream where none came: what
// was held back and p go on to rest.
func (h *headerWriter) pass(p []byte) (int, error) {
	h.done = true
	held := h.line
	h.line = nil
	if _, err := h.rest.Write(append(held, p...)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// couldBeHeader reports whether b may be the start of a header line.
func couldBeHeader(b []byte) bool {
	const prefix = "hutch-exec "
	if len(b) <= len(prefix) {
		return bytes.HasPrefix([]byte(prefix), b)
	}
	return len(b) <= 64 && bytes.HasPrefix(b, []byte(prefix))
}

func (h *headerWriter) early() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.line
}
