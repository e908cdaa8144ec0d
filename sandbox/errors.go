package sandbox

import (
	"errors"
	"io/fs"

	"github.com/hutchsandbox/hutch/internal/cfgerr"
)

// Errors callers branch on with errors.Is. Operations wrap them in an
// *fs.PathError (for path operations) or with fmt.Errorf, so the message
// names the operation and the path while errors.Is still matches.
var (
	// ErrEscape: the path resolves outside the sandbox root ("..", an
	// absolute path elsewhere, a symbolic link pointing out). Nothing was
	// touched.
	ErrEscape = errors.New("path escapes the sandbox root")

	// ErrNotFound: the path does not exist. It also matches fs.ErrNotExist.
	ErrNotFound error = notFound{}

	// ErrUnsupported: the tier cannot do this (for example Exec on the
	// virtual tier, or a host without PID namespaces).
	ErrUnsupported = errors.New("not supported by this sandbox")

	// ErrConfig: the sandbox or the call is configured wrongly (missing
	// root, both Args and Shell set, a bad environment variable...).
	ErrConfig = cfgerr.New("invalid sandbox configuration")

	// ErrInvalidPath: the path itself is malformed (empty, NUL byte, longer
	// than MaxPathLen, a bad glob pattern).
	ErrInvalidPath = errors.New("invalid path")

	// ErrIsDir: a file operation named a directory.
	ErrIsDir = errors.New("is a directory")

	// ErrNotDir: a path component or an Exec directory is not a directory.
	ErrNotDir = errors.New("not a directory")

	// ErrNotEmpty: a directory with entries was to be removed without
	// asking for everything in it.
	ErrNotEmpty = errors.New("directory not empty")

	// ErrTooLarge: the result would exceed MaxFileSize or MaxGlobResults.
	ErrTooLarge = errors.New("too large")

	// ErrProtected: the path is one of the protected paths (a policy's
	// Protect list: .git/hooks, .vscode, shell rc files...) that stay
	// read-only inside a writable directory, or holds one: it cannot be
	// written, created, renamed or removed. It also matches
	// fs.ErrPermission. The message names the path and how to lift the
	// protection.
	ErrProtected error = protected{}

	// ErrClosed: the sandbox was closed.
	ErrClosed = errors.New("sandbox is closed")
)

type notFound struct{}

func (notFound) Error() string { return "no such file or directory" }

// Is lets errors.Is(err, fs.ErrNotExist) hold for ErrNotFound.
func (notFound) Is(target error) bool { return target == fs.ErrNotExist }

type protected struct{}

func (protected) Error() string { return "protected path" }

// Is lets errors.Is(err, fs.ErrPermission) hold for ErrProtected.
func (protected) Is(target error) bool { return target == fs.ErrPermission }
