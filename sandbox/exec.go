package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// DefaultTimeout is how long Exec lets a command run when Command.Timeout
// is zero.
const DefaultTimeout = 120 * time.Second

// DefaultMaxOutput is how many bytes of each output stream Exec keeps when
// the Command does not say.
const DefaultMaxOutput = 1 << 20

// LiveGrace is how long Exec waits, once a command's output has ended, for
// its live writers (Command.Stdout, Command.Stderr) to take what is queued
// for them; then it returns without them.
const LiveGrace = 2 * time.Second

// OutputGrace bounds how long Exec reads a command's output after the
// command is gone: a process outside its reach (one that was handed the
// pipe) could otherwise keep it open for ever. What comes later is lost.
const OutputGrace = 5 * time.Second

// DefaultPath is a command's PATH when nothing else sets one.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ErrNotExecutable: the program exists but cannot be executed.
var ErrNotExecutable = errors.New("permission denied (not executable)")

// Command is what Exec runs. Exactly one of Args and Shell is set.
type Command struct {
	// Args is the program and its arguments, run without a shell. A program
	// name without "/" is looked up in the command's own PATH.
	Args []string
	// Shell is a command line run by "/bin/sh -c".
	Shell string
	// Dir is where the command starts, a path inside the root ("" is the
	// root). It must exist and be a directory.
	Dir string
	// Env adds to (or overrides) the tier's base environment. The base is
	// never the parent's whole environment; each tier documents its own.
	Env map[string]string
	// Stdin is the command's standard input; nil means empty. It is read
	// from a goroutine that Exec does not wait for: a reader that blocks
	// never holds Exec up (the goroutine then ends when the read returns).
	Stdin io.Reader
	// Timeout stops the command and every process it started; zero means
	// DefaultTimeout. Negative is an error.
	Timeout time.Duration
	// MaxOutput is how many bytes of each stream are kept (the end is
	// kept); zero means DefaultMaxOutput.
	MaxOutput int
	// Stdout and Stderr, when set, also receive each stream as it is
	// produced (for live display), from a goroutine of their own (see
	// Live): a slow writer holds the command up as a pipe would, but once
	// the command has ended Exec waits at most LiveGrace for them. The
	// bounded capture in Result is made either way. A write error stops
	// the copy, and the command then gets SIGPIPE on its next write, as
	// with a closed pipe.
	Stdout, Stderr io.Writer
}

// Result is what a command did. Output streams keep their last
// Command.MaxOutput bytes; the *Size fields count everything printed.
type Result struct {
	// ExitCode is the command's exit status. A command ended by a signal
	// gets 128+N, as a shell reports it, and Signal names the signal.
	ExitCode int
	Stdout   []byte
	Stderr   []byte
	// TimedOut is true when the timeout stopped the command.
	TimedOut bool
	// Signal is the signal that ended the command ("SIGKILL"), or "".
	Signal string
	// Limit names the resource limit that stopped the command: "memory",
	// "cpu_time", "pids" or "file_size"; "" when none did (or the tier
	// sets no limits).
	Limit    string
	Duration time.Duration
	// Blocked lists the network destinations ("host:port") the sandbox's
	// allow-list refused while the command ran, in the order first
	// refused, without duplicates. Empty when none were (or the tier has
	// no allow-list). While commands of one session overlap, a refusal is
	// reported in each of the overlapping results.
	Blocked []string
	// BlockedOmitted counts the refusals Blocked does not list because
	// it holds at most netproxy.MaxBlocked: 0 unless a command was
	// refused for that many distinct hosts.
	BlockedOmitted int

	StdoutTruncated bool
	StderrTruncated bool
	StdoutSize      int64
	StderrSize      int64
}

// Status is the exit status a command-line front end should report: 124
// when the command timed out, otherwise ExitCode (which is 128+N for a
// command ended by signal N).
func (r Result) Status() int {
	if r.TimedOut {
		return 124
	}
	return r.ExitCode
}

// MarshalJSON encodes the result with snake_case keys, output as text
// (invalid UTF-8 is replaced by U+FFFD) and the duration in milliseconds.
// Blocked is always a list ([] when nothing was refused).
func (r Result) MarshalJSON() ([]byte, error) {
	blocked := r.Blocked
	if blocked == nil {
		blocked = []string{}
	}
	return json.Marshal(resultJSON{
		ExitCode:        r.ExitCode,
		Stdout:          string(r.Stdout),
		Stderr:          string(r.Stderr),
		TimedOut:        r.TimedOut,
		Signal:          r.Signal,
		Limit:           r.Limit,
		Blocked:         blocked,
		BlockedOmitted:  r.BlockedOmitted,
		DurationMS:      r.Duration.Milliseconds(),
		StdoutTruncated: r.StdoutTruncated,
		StderrTruncated: r.StderrTruncated,
		StdoutSize:      r.StdoutSize,
		StderrSize:      r.StderrSize,
	})
}

type resultJSON struct {
	ExitCode        int      `json:"exit_code"`
	Stdout          string   `json:"stdout"`
	Stderr          string   `json:"stderr"`
	TimedOut        bool     `json:"timed_out"`
	Signal          string   `json:"signal"`
	Limit           string   `json:"limit"`
	Blocked         []string `json:"blocked"`
	BlockedOmitted  int      `json:"blocked_omitted"`
	DurationMS      int64    `json:"duration_ms"`
	StdoutTruncated bool     `json:"stdout_truncated"`
	StderrTruncated bool     `json:"stderr_truncated"`
	StdoutSize      int64    `json:"stdout_size"`
	StderrSize      int64    `json:"stderr_size"`
}

// Validate checks cmd and returns it with defaults filled in. Errors match
// ErrConfig.
func (cmd Command) Validate() (Command, error) {
	switch {
	case len(cmd.Args) == 0 && cmd.Shell == "":
		return cmd, fmt.Errorf("%w: command is empty: set Args or Shell", ErrConfig)
	case len(cmd.Args) > 0 && cmd.Shell != "":
		return cmd, fmt.Errorf("%w: command sets both Args and Shell: set one", ErrConfig)
	case len(cmd.Args) > 0 && cmd.Args[0] == "":
		return cmd, fmt.Errorf("%w: program name is empty", ErrConfig)
	case cmd.Timeout < 0:
		return cmd, fmt.Errorf("%w: negative timeout %v", ErrConfig, cmd.Timeout)
	case cmd.MaxOutput < 0:
		return cmd, fmt.Errorf("%w: negative output limit %d", ErrConfig, cmd.MaxOutput)
	}
	for _, a := range append([]string{cmd.Shell}, cmd.Args...) {
		if strings.IndexByte(a, 0) >= 0 {
			return cmd, fmt.Errorf("%w: command contains a NUL byte", ErrConfig)
		}
	}
	for k, v := range cmd.Env {
		if err := CheckEnvVar(k, v); err != nil {
			return cmd, err
		}
	}
	if cmd.Timeout == 0 {
		cmd.Timeout = DefaultTimeout
	}
	if cmd.MaxOutput == 0 {
		cmd.MaxOutput = DefaultMaxOutput
	}
	return cmd, nil
}

// CheckEnvVar validates one environment variable: a non-empty name without
// '=' or NUL, a value without NUL. Errors match ErrConfig.
func CheckEnvVar(k, v string) error {
	if k == "" || strings.ContainsAny(k, "=\x00") {
		return fmt.Errorf("%w: bad environment variable name %q: want NAME=VALUE with a non-empty NAME without '='", ErrConfig, k)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%w: environment variable %s contains a NUL byte", ErrConfig, k)
	}
	return nil
}

// ParseEnv turns "K=V" strings (as given on a command line) into a map.
// Errors match ErrConfig.
func ParseEnv(kvs []string) (map[string]string, error) {
	env := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%w: environment entry %q has no '=': write NAME=VALUE", ErrConfig, kv)
		}
		if err := CheckEnvVar(k, v); err != nil {
			return nil, err
		}
		env[k] = v
	}
	return env, nil
}
