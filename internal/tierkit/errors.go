package tierkit

import "io/fs"

// PathError wraps err as an *fs.PathError naming op and path. Tiers use it so
// messages look alike everywhere ("read ../x: path escapes the sandbox root").
func PathError(op, path string, err error) error {
	return &fs.PathError{Op: op, Path: path, Err: err}
}
