// Package virtual is hutch's in-memory sandbox tier: files live in a map,
// nothing on the host is reachable, and there is no shell on purpose
// ([sandbox.Sandbox.Exec] returns [sandbox.ErrUnsupported]). [New] makes
// an empty one.
//
// # Paths
//
// The root is "/": absolute paths are accepted. A relative path whose ".."
// climbs past the root is an escape error; in an absolute path "/.." is
// "/", as on any Unix (so "/../x" is "/x"). Modification times are real
// (the time of each write). There are no symbolic links.
//
// # Limits
//
// The files together hold at most [Options].MaxBytes ([MaxBytes] by
// default) of content: an agent cannot run hutch out of memory by writing.
package virtual
