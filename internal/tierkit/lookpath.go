package tierkit

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hutchsandbox/hutch/sandbox"
)

// LookPath finds prog the way a shell would, but with the command's own
// PATH and working directory rather than hutch's. Besides the path it
// returns the exit status a shell gives when it fails: 127 for a missing
// program (the error matches os.ErrNotExist), 126 for one that cannot be
// executed.
func LookPath(prog, pathEnv, cwd string) (string, int, error) {
	cands := Candidates(prog, pathEnv, cwd)
	if namesPath(prog) {
		err := executable(cands[0])
		return cands[0], statusFor(err), err
	}
	var firstErr error
	for _, p := range cands {
		err := executable(p)
		if err == nil {
			return p, 0, nil
		}
		if firstErr == nil && !errors.Is(err, os.ErrNotExist) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", 126, firstErr
	}
	return "", 127, os.ErrNotExist
}

// Candidates lists the files prog may be, in the order a shell tries
// them: prog itself when it names a path (it has a slash, or is . or ..),
// else each entry of pathEnv (an empty one is ".") joined with prog.
// Relative paths are taken from cwd.
func Candidates(prog, pathEnv, cwd string) []string {
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(cwd, p)
	}
	if namesPath(prog) {
		return []string{abs(prog)}
	}
	var out []string
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		out = append(out, filepath.Join(abs(dir), prog))
	}
	return out
}

// namesPath reports whether prog is a path rather than a name to look up.
func namesPath(prog string) bool {
	return strings.ContainsRune(prog, '/') || prog == "." || prog == ".."
}

func statusFor(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, os.ErrNotExist):
		return 127
	}
	return 126
}

func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.ErrNotExist
	case err != nil:
		return err
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return sandbox.ErrNotExecutable
	}
	return nil
}

// Tee returns a writer that feeds the buffer and, when live is not nil,
// live too (for output shown as it comes; see Live).
func (b *TailBuffer) Tee(live *Live) io.Writer {
	if live == nil {
		return b
	}
	return io.MultiWriter(b, live)
}
