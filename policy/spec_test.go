package policy_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hutchsandbox/hutch/policy"
)

// decodeSpec reads body (a YAML document holding one policy under "p")
// strictly, as a settings file does.
func decodeSpec(body string) (policy.Spec, error) {
	var doc struct {
		P policy.Spec `yaml:"p"`
	}
	dec := yaml.NewDecoder(strings.NewReader(body))
	dec.KnownFields(true)
	err := dec.Decode(&doc)
	return doc.P, err
}

// An inline policy builds as the same keys in a file do: relative paths
// against the given directory, widening the given base, extends left to
// the caller.
func TestSpecBuildsLikeAFile(t *testing.T) {
	s, err := decodeSpec("p:\n  read: [src]\n  write: [out]\n  dir: out\n  network: {allow: [pypi.org]}\n  timeout: 30s\n  limits: {processes: 64}\n  extends: base\n")
	if err != nil {
		t.Fatal(err)
	}
	if s.Extends() != "base" || s.Line() != 2 {
		t.Errorf("Extends %q, Line %d; want base, 2", s.Extends(), s.Line())
	}
	base := policy.Default().Extend(policy.Policy{Read: []string{"/base"}})
	p, err := s.Build("/proj", base)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Read, "/base") || !slices.Contains(p.Read, "/proj/src") || !slices.Equal(p.Write, []string{"/proj/out"}) ||
		p.Dir != "/proj/out" || p.Network != policy.NetworkAllow || p.Limits.Processes != 64 || p.Timeout.Seconds() != 30 {
		t.Errorf("Build = %+v", p)
	}
}

// An inline policy is as strict as a file: unknown keys, also inside
// limits, are errors naming their line; a relative path with no directory
// to resolve it against is an error, never a path under the process's
// directory.
func TestSpecIsStrict(t *testing.T) {
	for name, c := range map[string]struct{ body, want string }{
		"unknown key":        {"p:\n  read: [/a]\n  wirte: [/b]\n", `line 3: unknown key "wirte"`},
		"unknown limit":      {"p:\n  limits:\n    memroy: 1GiB\n", `line 3: limits: unknown key "memroy"`},
		"unknown network":    {"p:\n  network: {alow: [x]}\n", `unknown key "alow"`},
		"not a mapping":      {"p: [a]\n", "line 1: a policy is a mapping"},
		"null path":          {"p:\n  read: [~]\n", "line 2"},
		"fractional process": {"p:\n  nice: 1.5\n", "not a whole number"},
	} {
		_, err := decodeSpec(c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error with %q", name, err, c.want)
		}
	}
	s, err := decodeSpec("p:\n  read: [rel]\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Build("", policy.Default()); !errors.Is(err, policy.ErrConfig) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("relative path without a directory: %v; want ErrConfig naming line 2", err)
	}
	s, _ = decodeSpec("p:\n  timeout: soon\n")
	if _, err := s.Build("/d", policy.Default()); !errors.Is(err, policy.ErrConfig) || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("bad timeout: %v; want ErrConfig naming timeout", err)
	}
}
