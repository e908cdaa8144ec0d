// Package cfgerr gives each hutch package that can be configured wrongly its
// own configuration error, while one test still recognizes them all: every
// error made by [New] matches [ErrAny] under errors.Is, and nothing else does.
//
// A front end uses ErrAny to tell "the user must change a setting" (a usage
// error) from a failure at run time, whichever package found the problem.
package cfgerr

import "errors"

// ErrAny is matched by every configuration error made by New.
var ErrAny = errors.New("invalid configuration")

type sentinel struct{ msg string }

func (s *sentinel) Error() string { return s.msg }

// Is makes errors.Is(err, ErrAny) hold for every sentinel.
func (s *sentinel) Is(target error) bool { return target == ErrAny }

// New returns a new configuration sentinel with the given message. Each one
// is distinct (errors.Is tells them apart) and each matches ErrAny.
func New(msg string) error { return &sentinel{msg: msg} }

// Under returns err as a configuration error of kind as well: its message is
// err's, and errors.Is matches kind besides everything err matches. A
// package uses it for a check it shares with another (an environment
// variable checked by package sandbox, say) so that callers can branch on
// the package's own sentinel.
func Under(kind, err error) error {
	if err == nil {
		return nil
	}
	return &under{kind: kind, err: err}
}

type under struct{ kind, err error }

func (u *under) Error() string   { return u.err.Error() }
func (u *under) Unwrap() []error { return []error{u.kind, u.err} }
