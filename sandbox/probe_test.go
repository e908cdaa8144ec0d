package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hutchsandbox/hutch/sandbox"
)

// fakeSB is a Sandbox whose Exec returns canned results and counts calls.
type fakeSB struct {
	shell bool
	exec  func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error)

	mu    sync.Mutex
	calls int
	cmds  []sandbox.Command
}

func (f *fakeSB) Root() string { return "/fake" }
func (f *fakeSB) Read(context.Context, string) ([]byte, error) {
	return nil, sandbox.ErrUnsupported
}
func (f *fakeSB) Write(context.Context, string, []byte) error { return sandbox.ErrUnsupported }
func (f *fakeSB) Glob(context.Context, string) ([]string, error) {
	return nil, sandbox.ErrUnsupported
}
func (f *fakeSB) Stat(context.Context, string) (sandbox.FileInfo, error) {
	return sandbox.FileInfo{}, sandbox.ErrUnsupported
}
func (f *fakeSB) List(context.Context, string) ([]sandbox.FileInfo, error) {
	return nil, sandbox.ErrUnsupported
}
func (f *fakeSB) Mkdir(context.Context, string) error          { return sandbox.ErrUnsupported }
func (f *fakeSB) Remove(context.Context, string, bool) error   { return sandbox.ErrUnsupported }
func (f *fakeSB) Rename(context.Context, string, string) error { return sandbox.ErrUnsupported }
func (f *fakeSB) Supports(c sandbox.Feature) bool              { return c == sandbox.FeatureShell && f.shell }
func (f *fakeSB) Instructions() string                         { return "" }
func (f *fakeSB) Close() error                                 { return nil }

func (f *fakeSB) Exec(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	f.mu.Lock()
	f.calls++
	f.cmds = append(f.cmds, cmd)
	f.mu.Unlock()
	if f.exec == nil {
		return sandbox.Result{}, errors.New("no exec configured")
	}
	return f.exec(ctx, cmd)
}

func (f *fakeSB) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

var _ sandbox.Sandbox = (*fakeSB)(nil)

// probeArgs is the tail of the probe command: the names probed for.
func probeArgs(t *testing.T, cmd sandbox.Command) []string {
	t.Helper()
	if len(cmd.Args) < 4 || cmd.Args[0] != "/bin/sh" || cmd.Args[1] != "-c" || cmd.Shell != "" {
		t.Fatalf("probe command = %q / Shell %q, want /bin/sh -c SCRIPT NAME ARGS...", cmd.Args, cmd.Shell)
	}
	if cmd.Timeout != sandbox.ProbeTimeout {
		t.Errorf("probe Timeout = %v, want %v", cmd.Timeout, sandbox.ProbeTimeout)
	}
	if _, err := cmd.Validate(); err != nil {
		t.Errorf("probe command does not validate: %v", err)
	}
	return cmd.Args[4:]
}

// answer prints a probe output line for each name.
func answer(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
	var b strings.Builder
	b.WriteString("locale=en_US.UTF-8\n")
	for _, c := range cmd.Args[4:] {
		fmt.Fprintf(&b, "cmd=%s\t/usr/bin/%s\t%s 1.2.3\n", c, c, c)
	}
	return sandbox.Result{Stdout: []byte(b.String())}, nil
}

var bg = context.Background()

func TestProberMemoizes(t *testing.T) {
	sb := &fakeSB{shell: true, exec: answer}
	var p sandbox.ProbeCache
	first := p.Probe(bg, sb, []string{"python3", "node"})
	second := p.Probe(bg, sb, []string{"python3", "node"})
	if sb.Calls() != 1 {
		t.Fatalf("same list probed %d times, want 1", sb.Calls())
	}
	if first.Error != "" || first.Locale != "en_US.UTF-8" || len(first.Commands) != 2 ||
		first.Commands["node"] != (sandbox.CommandInfo{Path: "/usr/bin/node", Version: "1.2.3"}) {
		t.Fatalf("Probe = %+v", first)
	}
	if !maps.Equal(first.Commands, second.Commands) || first.Locale != second.Locale {
		t.Fatalf("memoized answer differs: %+v vs %+v", first, second)
	}
	if got := probeArgs(t, sb.cmds[0]); !slices.Equal(got, []string{"python3", "node"}) {
		t.Fatalf("probed names = %q", got)
	}
	// The names are arguments, never part of the script.
	if strings.Contains(sb.cmds[0].Args[2], "python3") {
		t.Fatalf("command name interpolated into the script")
	}

	// Different lists are probed separately, each once.
	p.Probe(bg, sb, []string{"ruby"})
	p.Probe(bg, sb, []string{"node", "python3"})
	p.Probe(bg, sb, []string{"python3"})
	p.Probe(bg, sb, []string{"ruby"})
	p.Probe(bg, sb, []string{"node", "python3"})
	if sb.Calls() != 4 {
		t.Fatalf("Exec called %d times for 4 distinct lists, want 4", sb.Calls())
	}
	if env := p.Probe(bg, sb, []string{"ruby"}); len(env.Commands) != 1 || env.Commands["ruby"].Path != "/usr/bin/ruby" {
		t.Fatalf("Probe(ruby) = %+v", env)
	}
}

func TestProberDefaultCommands(t *testing.T) {
	sb := &fakeSB{shell: true, exec: answer}
	var p sandbox.ProbeCache
	env := p.Probe(bg, sb, nil)
	p.Probe(bg, sb, []string{})
	p.Probe(bg, sb, slices.Clone(sandbox.DefaultProbeCommands))
	if sb.Calls() != 1 {
		t.Fatalf("default list probed %d times, want 1", sb.Calls())
	}
	if got := probeArgs(t, sb.cmds[0]); !slices.Equal(got, sandbox.DefaultProbeCommands) {
		t.Fatalf("probed %q, want DefaultProbeCommands %q", got, sandbox.DefaultProbeCommands)
	}
	if len(env.Commands) != len(sandbox.DefaultProbeCommands) {
		t.Fatalf("Commands = %v", env.Commands)
	}
}

func TestProberErrors(t *testing.T) {
	tests := []struct {
		name     string
		shell    bool
		commands []string
		exec     func(context.Context, sandbox.Command) (sandbox.Result, error)
		wantErr  []string // substrings of Environment.Error
		execs    int
	}{
		{
			name: "no shell", shell: false, exec: answer,
			wantErr: []string{"sandbox has no shell"}, execs: 0,
		},
		{
			name: "exec error", shell: true,
			exec: func(context.Context, sandbox.Command) (sandbox.Result, error) {
				return sandbox.Result{}, fmt.Errorf("starting\nsetup failed: %w\nhint: none", sandbox.ErrUnsupported)
			},
			wantErr: []string{"setup failed: not supported by this sandbox"}, execs: 1,
		},
		{
			name: "non-zero exit", shell: true,
			exec: func(context.Context, sandbox.Command) (sandbox.Result, error) {
				return sandbox.Result{ExitCode: 127, Stdout: []byte("locale=C\n"), Stderr: []byte("sh: 1: /bin/sh: not found\n")}, nil
			},
			wantErr: []string{"127", "not found"}, execs: 1,
		},
		{
			name: "signal", shell: true,
			exec: func(context.Context, sandbox.Command) (sandbox.Result, error) {
				return sandbox.Result{ExitCode: 137, Signal: "SIGKILL"}, nil
			},
			wantErr: []string{"137"}, execs: 1,
		},
		{
			name: "timed out", shell: true,
			exec: func(context.Context, sandbox.Command) (sandbox.Result, error) {
				return sandbox.Result{ExitCode: 137, TimedOut: true, Stdout: []byte("locale=C\n")}, nil
			},
			wantErr: []string{"timed out", sandbox.ProbeTimeout.String()}, execs: 1,
		},
		{
			name: "empty name", shell: true, commands: []string{"sh", ""}, exec: answer,
			wantErr: []string{`cannot probe for ""`}, execs: 0,
		},
		{
			name: "tab in name", shell: true, commands: []string{"a\tb"}, exec: answer,
			wantErr: []string{"not a command name"}, execs: 0,
		},
		{
			name: "newline in name", shell: true, commands: []string{"sh", "x\ncmd=evil\t/evil\t6.6"}, exec: answer,
			wantErr: []string{"not a command name"}, execs: 0,
		},
		{
			name: "NUL in name", shell: true, commands: []string{"a\x00b"}, exec: answer,
			wantErr: []string{"not a command name"}, execs: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := &fakeSB{shell: tt.shell, exec: tt.exec}
			var p sandbox.ProbeCache
			env := p.Probe(bg, sb, tt.commands)
			for _, w := range tt.wantErr {
				if !strings.Contains(env.Error, w) {
					t.Errorf("Error = %q, want it to mention %q", env.Error, w)
				}
			}
			if strings.Contains(env.Error, "\n") {
				t.Errorf("Error = %q spans lines", env.Error)
			}
			if env.Commands == nil || len(env.Commands) != 0 {
				t.Errorf("Commands = %#v, want a non-nil empty map on error", env.Commands)
			}
			if env.Locale != "" {
				t.Errorf("Locale = %q, want empty on error", env.Locale)
			}
			// The failure is an answer about the sandbox: it is memoized.
			again := p.Probe(bg, sb, tt.commands)
			if again.Error != env.Error {
				t.Errorf("second Probe Error = %q, want %q", again.Error, env.Error)
			}
			if sb.Calls() != tt.execs {
				t.Errorf("Exec called %d times, want %d", sb.Calls(), tt.execs)
			}
		})
	}
}

func TestProberCancelledNotCached(t *testing.T) {
	sb := &fakeSB{shell: true, exec: func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
		if err := ctx.Err(); err != nil {
			return sandbox.Result{}, err
		}
		return answer(ctx, cmd)
	}}
	var p sandbox.ProbeCache
	ctx, cancel := context.WithCancel(bg)
	cancel()
	env := p.Probe(ctx, sb, []string{"sh"})
	if !strings.Contains(env.Error, "context canceled") || len(env.Commands) != 0 {
		t.Fatalf("Probe with a cancelled context = %+v", env)
	}
	env = p.Probe(bg, sb, []string{"sh"})
	if env.Error != "" || env.Commands["sh"].Path != "/usr/bin/sh" {
		t.Fatalf("Probe after cancellation = %+v, want a fresh probe", env)
	}
	if sb.Calls() != 2 {
		t.Fatalf("Exec called %d times, want 2", sb.Calls())
	}
	p.Probe(bg, sb, []string{"sh"})
	if sb.Calls() != 2 {
		t.Fatalf("successful probe not memoized: %d Exec calls", sb.Calls())
	}
}

// A context cancelled while the probe ran makes even a successful answer
// uncached.
func TestProberCancelledDuringProbe(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	sb := &fakeSB{shell: true, exec: func(ctx context.Context, cmd sandbox.Command) (sandbox.Result, error) {
		cancel()
		return answer(ctx, cmd)
	}}
	var p sandbox.ProbeCache
	p.Probe(ctx, sb, []string{"sh"})
	p.Probe(ctx, sb, []string{"sh"})
	if sb.Calls() != 2 {
		t.Fatalf("Exec called %d times, want 2 (nothing cached under a cancelled context)", sb.Calls())
	}
	p.Probe(bg, sb, []string{"sh"})
	p.Probe(bg, sb, []string{"sh"})
	if sb.Calls() != 3 {
		t.Fatalf("Exec called %d times, want 3", sb.Calls())
	}
}

func TestProberConcurrent(t *testing.T) {
	sb := &fakeSB{shell: true, exec: answer}
	var p sandbox.ProbeCache
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			list := []string{"sh"}
			if i%2 == 1 {
				list = []string{"node"}
			}
			if env := p.Probe(bg, sb, list); env.Error != "" || len(env.Commands) != 1 {
				t.Errorf("Probe(%q) = %+v", list, env)
			}
		})
	}
	wg.Wait()
	if sb.Calls() != 2 {
		t.Fatalf("Exec called %d times for 2 lists from 32 goroutines, want 2", sb.Calls())
	}
}

// Lists that a naive join would confuse are distinct cache entries.
func TestProberKeysDoNotCollide(t *testing.T) {
	sb := &fakeSB{shell: true, exec: answer}
	var p sandbox.ProbeCache
	bad := p.Probe(bg, sb, []string{"a\x00b"})
	if bad.Error == "" {
		t.Fatalf("a NUL in a name must be reported: %+v", bad)
	}
	good := p.Probe(bg, sb, []string{"a", "b"})
	if good.Error != "" || len(good.Commands) != 2 {
		t.Fatalf("[a b] answered from the [a\\x00b] entry: %+v", good)
	}
}

// Changing a returned answer does not change what later callers get.
func TestProberAnswersAreCopies(t *testing.T) {
	sb := &fakeSB{shell: true, exec: answer}
	var p sandbox.ProbeCache
	first := p.Probe(bg, sb, []string{"node"})
	first.Commands["node"] = sandbox.CommandInfo{Path: "/evil"}
	first.Commands["extra"] = sandbox.CommandInfo{}
	again := p.Probe(bg, sb, []string{"node"})
	if again.Commands["node"].Path != "/usr/bin/node" || len(again.Commands) != 1 {
		t.Fatalf("cached answer was changed through a returned map: %+v", again)
	}
}
