package sandbox_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/tierkit"
	"github.com/hutchsandbox/hutch/sandbox"
)

func TestCommandValidate(t *testing.T) {
	tests := []struct {
		name string
		cmd  sandbox.Command
		want string // substring of the error message
	}{
		{"empty", sandbox.Command{}, "command is empty"},
		{"empty args slice", sandbox.Command{Args: []string{}}, "command is empty"},
		{"both", sandbox.Command{Args: []string{"ls"}, Shell: "ls"}, "both Args and Shell"},
		{"empty program", sandbox.Command{Args: []string{"", "x"}}, "program name is empty"},
		{"negative timeout", sandbox.Command{Shell: "true", Timeout: -time.Second}, "negative timeout -1s"},
		{"negative output", sandbox.Command{Shell: "true", MaxOutput: -5}, "negative output limit -5"},
		{"NUL in shell", sandbox.Command{Shell: "echo a\x00b"}, "NUL byte"},
		{"NUL in program", sandbox.Command{Args: []string{"l\x00s"}}, "NUL byte"},
		{"NUL in later arg", sandbox.Command{Args: []string{"ls", "ok", "b\x00d"}}, "NUL byte"},
		{"empty env name", sandbox.Command{Shell: "true", Env: map[string]string{"": "x"}}, `bad environment variable name ""`},
		{"env name with =", sandbox.Command{Shell: "true", Env: map[string]string{"A=B": "x"}}, `bad environment variable name "A=B"`},
		{"env name with NUL", sandbox.Command{Shell: "true", Env: map[string]string{"A\x00": "x"}}, `bad environment variable name "A\x00"`},
		{"env value with NUL", sandbox.Command{Shell: "true", Env: map[string]string{"PATH": "/bin\x00/evil"}}, "environment variable PATH contains a NUL byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cmd.Validate()
			if !errors.Is(err, sandbox.ErrConfig) {
				t.Fatalf("Validate() error = %v, want one matching ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() error = %q, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestCommandValidateDefaults(t *testing.T) {
	tests := []struct {
		name        string
		cmd         sandbox.Command
		wantTimeout time.Duration
		wantMax     int
	}{
		{"shell defaults", sandbox.Command{Shell: "echo hi"}, sandbox.DefaultTimeout, sandbox.DefaultMaxOutput},
		{"args defaults", sandbox.Command{Args: []string{"ls", ""}}, sandbox.DefaultTimeout, sandbox.DefaultMaxOutput},
		{"kept", sandbox.Command{Shell: "x", Timeout: time.Millisecond, MaxOutput: 7}, time.Millisecond, 7},
		{"env ok", sandbox.Command{Shell: "x", Env: map[string]string{"A": "", "B_2": "x=y"}}, sandbox.DefaultTimeout, sandbox.DefaultMaxOutput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := tt.cmd
			got, err := tt.cmd.Validate()
			if err != nil {
				t.Fatalf("Validate() error = %v", err)
			}
			if got.Timeout != tt.wantTimeout || got.MaxOutput != tt.wantMax {
				t.Errorf("Validate() Timeout = %v, MaxOutput = %d; want %v, %d", got.Timeout, got.MaxOutput, tt.wantTimeout, tt.wantMax)
			}
			if got.Shell != orig.Shell || !slices.Equal(got.Args, orig.Args) || !maps.Equal(got.Env, orig.Env) {
				t.Errorf("Validate() changed the command: %+v -> %+v", orig, got)
			}
			if tt.cmd.Timeout != orig.Timeout || tt.cmd.MaxOutput != orig.MaxOutput {
				t.Errorf("Validate() modified its receiver")
			}
		})
	}
}

func TestParseEnv(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want map[string]string
		err  string // substring; "" means success
	}{
		{"nil", nil, map[string]string{}, ""},
		{"simple", []string{"A=1", "B=two"}, map[string]string{"A": "1", "B": "two"}, ""},
		{"empty value", []string{"A="}, map[string]string{"A": ""}, ""},
		{"value with =", []string{"A=b=c"}, map[string]string{"A": "b=c"}, ""},
		{"later wins", []string{"A=1", "A=2"}, map[string]string{"A": "2"}, ""},
		{"spaces kept", []string{"A= x "}, map[string]string{"A": " x "}, ""},
		{"utf8", []string{"É=ü"}, map[string]string{"É": "ü"}, ""},
		{"missing =", []string{"A=1", "NOEQ"}, nil, `"NOEQ" has no '='`},
		{"empty entry", []string{""}, nil, `"" has no '='`},
		{"empty name", []string{"=x"}, nil, `bad environment variable name ""`},
		{"only =", []string{"="}, nil, `bad environment variable name ""`},
		{"NUL in name", []string{"A\x00=x"}, nil, "bad environment variable name"},
		{"NUL in value", []string{"A=x\x00"}, nil, "A contains a NUL byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sandbox.ParseEnv(tt.in)
			if tt.err != "" {
				if !errors.Is(err, sandbox.ErrConfig) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseEnv(%q) error = %v, want ErrConfig mentioning %q", tt.in, err, tt.err)
				}
				if got != nil {
					t.Errorf("ParseEnv(%q) = %v with an error, want nil", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseEnv(%q) error = %v", tt.in, err)
			}
			if got == nil || !maps.Equal(got, tt.want) {
				t.Errorf("ParseEnv(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestMergeEnv(t *testing.T) {
	base := map[string]string{"PATH": "/bin", "HOME": "/h", "A": "base"}
	tier := map[string]string{"A": "tier", "T": "1"}
	call := map[string]string{"A": "call", "PATH": "/usr/bin"}
	got := tierkit.MergeEnv(base, nil, tier, call)
	want := map[string]string{"PATH": "/usr/bin", "HOME": "/h", "A": "call", "T": "1"}
	if !maps.Equal(got, want) {
		t.Fatalf("MergeEnv = %v, want %v", got, want)
	}
	// The result is a new map: changing it leaves the layers alone.
	got["HOME"] = "changed"
	got["NEW"] = "x"
	if base["HOME"] != "/h" || len(base) != 3 || len(call) != 2 {
		t.Fatalf("MergeEnv result aliases a layer: base %v, call %v", base, call)
	}
	// Order matters: earlier layers lose.
	if got := tierkit.MergeEnv(call, base); got["A"] != "base" || got["PATH"] != "/bin" {
		t.Fatalf("MergeEnv(call, base) = %v, want base to win", got)
	}
	for _, layers := range [][]map[string]string{nil, {nil}, {{}, nil}} {
		if got := tierkit.MergeEnv(layers...); got == nil || len(got) != 0 {
			t.Errorf("MergeEnv(%v) = %#v, want a non-nil empty map", layers, got)
		}
	}
}

func TestEnvList(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want []string
	}{
		{nil, []string{}},
		{map[string]string{}, []string{}},
		{map[string]string{"B": "2", "A": "1", "a": "3", "C": ""}, []string{"A=1", "B=2", "C=", "a=3"}},
		{map[string]string{"X": "y=z", "PATH": "/bin:/usr/bin"}, []string{"PATH=/bin:/usr/bin", "X=y=z"}},
	}
	for _, tt := range tests {
		got := tierkit.EnvList(tt.env)
		if got == nil || !slices.Equal(got, tt.want) {
			t.Errorf("EnvList(%v) = %#v, want %#v", tt.env, got, tt.want)
		}
	}
	// Round trip through ParseEnv.
	env := map[string]string{"Z": "last", "A": "first=1", "M": ""}
	back, err := sandbox.ParseEnv(tierkit.EnvList(env))
	if err != nil || !maps.Equal(back, env) {
		t.Fatalf("ParseEnv(EnvList(%v)) = %v, %v", env, back, err)
	}
}
