package sandbox

import (
	"errors"
	"io"
	"os"
	"path/filepath"
)

// DefaultPath is a command's PATH when nothing else sets one.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ErrNotExecutable: the program exists but cannot be executed.
var ErrNotExecutable = errors.New("permission denied (not executable)")

// LookPath finds prog the way a shell would, but with the command's own
// PATH and working directory rather than hutch's. Besides the path it
// returns the exit status a shell gives when it fails: 127 for a missing
// program (the error matches os.ErrNotExist), 126 for one that cannot be
// executed.
func LookPath(prog, pathEnv, cwd string) (string, int, error) {
	if filepath.Base(prog) != prog || prog == "." || prog == ".." {
		if !filepath.IsAbs(prog) {
			prog = filepath.Join(cwd, prog)
		}
		return prog, statusFor(executable(prog)), executable(prog)
	}
	var firstErr error
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		p := filepath.Join(dir, prog)
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
		return ErrNotExecutable
	}
	return nil
}

// Tee returns a writer that feeds the buffer and, when live is not nil,
// live too (for output shown as it comes).
func (b *TailBuffer) Tee(live io.Writer) io.Writer {
	if live == nil {
		return b
	}
	return io.MultiWriter(b, live)
}
