package wire

import (
	"encoding/json"
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Names, arguments and environments cross the JSON records byte for
// byte, also when they are not UTF-8 (JSON alone would turn those bytes
// into U+FFFD); valid UTF-8 goes as it is, unmarked.
func TestWordsCrossExactly(t *testing.T) {
	job := func(argv, env []string, dir string) *Job {
		return &Job{Argv: argv, Env: env, Dir: dir, HostUID: 7}
	}
	cases := []struct {
		name   string
		in     any
		quoted bool
	}{
		{"plain request", Request{ID: 1, Op: "read", Path: "a/é.txt", Pattern: "*.go"}, false},
		{"request path", Request{ID: 2, Op: "read", Path: "a\xff"}, true},
		{"request pattern", Request{ID: 3, Op: "glob", Pattern: "x\xfe*"}, true},
		{"request path with quotes", Request{ID: 4, Op: "stat", Path: "\"a\"\\\xff\n"}, true},
		{"job argv", Request{ID: 5, Op: "exec", Job: job([]string{"printf", "%s", "a\xffb"}, []string{"PATH=/bin"}, "/w")}, true},
		{"job env", Request{ID: 6, Op: "exec", Job: job([]string{"env"}, []string{"K=\xc3"}, "/w")}, true},
		{"job dir", Request{ID: 7, Op: "exec", Job: job([]string{"ls"}, nil, "/w/\x80")}, true},
		{"plain job", Request{ID: 8, Op: "exec", Job: job([]string{"ls", "ü"}, []string{"A=b"}, "/w")}, false},
		{"response info", Response{ID: 9, Info: &sandbox.FileInfo{Path: "d/\xff", Size: 3, ModTime: time.Unix(5, 0).UTC()}}, true},
		{"plain response", Response{ID: 10, Info: &sandbox.FileInfo{Path: "d/ö", Size: 3, ModTime: time.Unix(5, 0).UTC()}}, false},
		{"response error path", Response{ID: 11, Err: &WireError{Kind: "not_found", Msg: "no such file", Op: "read", Path: "nope\xff"}}, true},
		{"response error message", Response{ID: 12, Err: &WireError{Kind: "other", Msg: "read a\xfe: broken"}}, true},
		{"plain response error", Response{ID: 13, Err: &WireError{Kind: "other", Msg: "é", Op: "stat", Path: "ü"}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := clone(t, c.in)
			b, err := json.Marshal(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(b), `"quoted":true`); got != c.quoted {
				t.Errorf("marked quoted %v, want %v: %s", got, c.quoted, b)
			}
			if !reflect.DeepEqual(c.in, before) {
				t.Errorf("marshalling changed the caller's value: %+v, was %+v", c.in, before)
			}
			out := reflect.New(reflect.TypeOf(c.in))
			if err := json.Unmarshal(b, out.Interface()); err != nil {
				t.Fatal(err)
			}
			if got := out.Elem().Interface(); !reflect.DeepEqual(got, c.in) {
				t.Errorf("round trip: got %+v, want %+v (wire %s)", got, c.in, b)
			}
		})
	}
}

// clone deep-copies the cases' Requests and Responses, so that whatever
// marshalling changes in them shows.
func clone(t *testing.T, v any) any {
	t.Helper()
	cp := func(j *Job) *Job {
		if j == nil {
			return nil
		}
		c := *j
		c.Argv, c.Env = append([]string(nil), j.Argv...), append([]string(nil), j.Env...)
		return &c
	}
	switch v := v.(type) {
	case Request:
		v.Job = cp(v.Job)
		return v
	case Response:
		if v.Info != nil {
			i := *v.Info
			v.Info = &i
		}
		if v.Err != nil {
			e := *v.Err
			v.Err = &e
		}
		return v
	}
	t.Fatalf("clone: %T", v)
	return nil
}

// A job's words that do not unquote, or a job with a field it does not
// know, are errors, not a command run with other arguments.
func TestJobDecodeStrict(t *testing.T) {
	for _, in := range []string{
		`{"policy":{},"argv":["\"unterminated"],"env":null,"dir":"\"/w\"","host_uid":0,"host_gid":0,"quoted":true}`,
		`{"policy":{},"argv":["ls"],"env":null,"dir":"/w","host_uid":0,"host_gid":0,"extra":1}`,
	} {
		var j Job
		if err := json.Unmarshal([]byte(in), &j); err == nil {
			t.Errorf("decoded %s as %+v", in, j)
		}
	}
}

// A path error from the other side is a *fs.PathError on this one, so
// callers can rename its operation; its sentinel still matches.
func TestWireErrorKeepsThePathError(t *testing.T) {
	in := tierkit.PathError("stat", "out", sandbox.ErrEscape)
	b, err := json.Marshal(ToWire(in))
	if err != nil {
		t.Fatal(err)
	}
	var w WireError
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	got := w.Error()
	var pe *fs.PathError
	if !errors.As(got, &pe) || pe.Op != "stat" || pe.Path != "out" || !errors.Is(got, sandbox.ErrEscape) || got.Error() != in.Error() {
		t.Errorf("got %#v (%v), want a path error like %v", got, got, in)
	}
	// Wrapped with words of its own, the error keeps them: no path error.
	wrapped := ToWire(errors.Join(errors.New("while reading"), in))
	if wrapped.Op != "" || !strings.Contains(wrapped.Msg, "while reading") {
		t.Errorf("wrapped: %+v", wrapped)
	}
}

// Glob answers cross as the names' bytes, NUL-separated: any name (no
// name holds a NUL) comes back as it went, and skip leaves names out.
func TestNamesRoundTrip(t *testing.T) {
	for _, names := range [][]string{{}, {"a"}, {"a\xff", "b/\xfe c", "é", "x\ny"}, {"", "z"}} {
		if got := SplitNames(JoinNames(names)); !reflect.DeepEqual(got, names) {
			t.Errorf("SplitNames(JoinNames(%q)) = %q", names, got)
		}
	}
	var b strings.Builder
	if err := WriteNames(&b, []string{"keep", "drop", "keep2"}, func(n string) bool { return n == "drop" }); err != nil || b.String() != "keep\x00keep2" {
		t.Errorf("WriteNames with skip: %q, %v", b.String(), err)
	}
}
