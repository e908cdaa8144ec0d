package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/sandbox"
)

// JSON carries strings as UTF-8: Go's encoder turns any byte that is no
// UTF-8 into U+FFFD, so a name like "a\xff" would reach the other side as
// another name (a read of another file, a command with other arguments).
// The messages that carry names, arguments and environments therefore
// send them in Go's quoted form (strconv.Quote), marked "quoted", when
// any of them is not UTF-8; the receiving side unquotes them. Valid UTF-8,
// by far the usual case, goes as it is.

// quoteWords replaces each of ws by its quoted form when any of them is
// not UTF-8, and reports whether it did.
func quoteWords(ws ...*string) bool {
	if !slices.ContainsFunc(ws, invalid) {
		return false
	}
	for _, w := range ws {
		*w = strconv.Quote(*w)
	}
	return true
}

// invalid reports whether *w is not UTF-8.
func invalid(w *string) bool { return !utf8.ValidString(*w) }

// unquoteWords undoes quoteWords.
func unquoteWords(ws ...*string) error {
	for _, w := range ws {
		u, err := strconv.Unquote(*w)
		if err != nil {
			return fmt.Errorf("a quoted word %.40q: %w", *w, err)
		}
		*w = u
	}
	return nil
}

// words are the job's strings that quoteWords covers: the command's
// arguments, environment and start directory. (A policy's paths are
// UTF-8: policy.Normalize refuses others.)
func (j *Job) words() []*string {
	ws := make([]*string, 0, len(j.Argv)+len(j.Env)+1)
	for i := range j.Argv {
		ws = append(ws, &j.Argv[i])
	}
	for i := range j.Env {
		ws = append(ws, &j.Env[i])
	}
	return append(ws, &j.Dir)
}

// MarshalJSON encodes the job with its words quoted when they need it.
func (j Job) MarshalJSON() ([]byte, error) {
	type plain Job // the same fields, without these methods
	if slices.ContainsFunc(j.words(), invalid) {
		j.Argv, j.Env = slices.Clone(j.Argv), slices.Clone(j.Env) // the caller's stay as they are
		j.Quoted = quoteWords(j.words()...)
	}
	return json.Marshal(plain(j))
}

// UnmarshalJSON decodes a job, strictly (an unknown field is an error),
// and unquotes its words.
func (j *Job) UnmarshalJSON(b []byte) error {
	type plain Job
	if err := strictJSON(b, (*plain)(j)); err != nil {
		return err
	}
	if j.Quoted {
		j.Quoted = false
		return unquoteWords(j.words()...)
	}
	return nil
}

// words are the request's strings that quoteWords covers: its paths and
// patterns, a search's included (its job quotes its own words).
func (r *Request) words() []*string {
	ws := []*string{&r.Path, &r.Pattern, &r.To}
	if r.Search != nil {
		ws = append(ws, &r.Search.Dir, &r.Search.Glob, &r.Search.Pattern)
	}
	return ws
}

// MarshalJSON encodes the request with its words quoted when they need
// it.
func (r Request) MarshalJSON() ([]byte, error) {
	type plain Request
	if r.Search != nil {
		s := *r.Search // the caller's stays as it is
		r.Search = &s
	}
	r.Quoted = quoteWords(r.words()...)
	return json.Marshal(plain(r))
}

// UnmarshalJSON decodes a request and unquotes its words.
func (r *Request) UnmarshalJSON(b []byte) error {
	type plain Request
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	if r.Quoted {
		r.Quoted = false
		return unquoteWords(r.words()...)
	}
	return nil
}

// MarshalJSON encodes the response with its file's path and its error's
// path and message quoted when they need it.
func (r Response) MarshalJSON() ([]byte, error) {
	type plain Response
	r.Quoted = quoteResponse(&r.Info, &r.Err)
	return json.Marshal(plain(r))
}

// UnmarshalJSON decodes a response and unquotes its words.
func (r *Response) UnmarshalJSON(b []byte) error {
	type plain Response
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	return unquoteResponse(&r.Quoted, r.Info, r.Err)
}

// MarshalJSON encodes the container helper's response as Response's
// MarshalJSON does: its file's path and its error's path and message
// quoted when they need it.
func (r StreamResponse) MarshalJSON() ([]byte, error) {
	type plain StreamResponse
	r.Quoted = quoteResponse(&r.Info, &r.Err)
	return json.Marshal(plain(r))
}

// UnmarshalJSON decodes a container helper's response and unquotes its
// words.
func (r *StreamResponse) UnmarshalJSON(b []byte) error {
	type plain StreamResponse
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	return unquoteResponse(&r.Quoted, r.Info, r.Err)
}

// quoteResponse quotes a response's words (responseWords) when any of
// them is not UTF-8, in copies of *info and *e (the caller's stay as they
// are), and reports whether it did.
func quoteResponse(info **sandbox.FileInfo, e **WireError) bool {
	if !slices.ContainsFunc(responseWords(*info, *e), invalid) {
		return false
	}
	if *info != nil {
		c := **info
		*info = &c
	}
	if *e != nil {
		c := **e
		*e = &c
	}
	return quoteWords(responseWords(*info, *e)...)
}

// unquoteResponse undoes quoteResponse on a decoded response whose
// *quoted says it was quoted, and clears *quoted.
func unquoteResponse(quoted *bool, info *sandbox.FileInfo, e *WireError) error {
	if !*quoted {
		return nil
	}
	*quoted = false
	return unquoteWords(responseWords(info, e)...)
}

// responseWords are the strings of a response's file information and
// error that quoteWords covers.
func responseWords(info *sandbox.FileInfo, e *WireError) []*string {
	var ws []*string
	if info != nil {
		ws = append(ws, &info.Path)
	}
	if e != nil {
		ws = append(ws, &e.Path, &e.Msg)
	}
	return ws
}

// strictJSON decodes b into v, refusing unknown fields.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
