package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Limits of the shell tool's output, per stream, as the model sees it.
const (
	MaxShellLines = 200
	MaxShellChars = 16_000
	// MaxShellTimeout is the longest timeout a model may ask for.
	MaxShellTimeout = 30 * time.Minute
)

// ansiRE matches terminal escape sequences: colour codes (ESC [ 1;31 m)
// and other CSI sequences, and OSC sequences (titles, hyperlinks). It is
// compiled on first use, not at program start.
var ansiRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)`)
})

// Truncate prepares one output stream for a model: terminal escape codes
// stripped; when there are more than maxLines lines only the last maxLines
// are kept, behind a "[truncated N lines]" marker; then at most maxChars
// characters (the end is kept, never cutting a character).
func Truncate(s string, maxLines, maxChars int) string {
	// Counted and cut in place: a stream of up to a mebibyte of short lines
	// costs no per-line or per-character copies.
	s = ansiRE().ReplaceAllString(s, "")
	maxLines, maxChars = max(maxLines, 0), max(maxChars, 0)
	body, trailing := strings.CutSuffix(s, "\n")
	lines := 0
	if s != "" {
		lines = strings.Count(body, "\n") + 1
	}
	if lines > maxLines {
		dropped := lines - maxLines
		keep := body
		for range dropped {
			_, keep, _ = strings.Cut(keep, "\n")
		}
		s = fmt.Sprintf("[truncated %d lines]", dropped)
		if maxLines > 0 {
			s += "\n" + keep
		}
		if trailing {
			s += "\n"
		}
	}
	// The last maxChars characters; a byte that is no UTF-8 counts as one
	// and becomes U+FFFD.
	i := len(s)
	for n := 0; n < maxChars && i > 0; n++ {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	if i > 0 {
		s = string([]rune(s[i:]))
	}
	return s
}

type shellArgs struct {
	Command string   `json:"command"`
	Timeout *float64 `json:"timeout,omitempty"` // seconds
	// Dir is where the command starts, inside the root.
	Dir string `json:"dir,omitempty"`
	// Stdin is the command's standard input (empty when nil).
	Stdin *string `json:"stdin,omitempty"`
	// Background starts the command and answers at once with its id.
	Background bool `json:"background,omitempty"`
}

// MaxShellStdin is the most standard input one shell call takes.
const MaxShellStdin = 1 << 20

// ShellResult is the shell tool's structured result.
type ShellResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	TimedOut bool   `json:"timed_out"`
	// Blocked lists the destinations ("host:port") the sandbox's network
	// allow-list refused during the command; [] when none.
	Blocked []string `json:"blocked"`
	// BlockedOmitted counts the refusals Blocked could not list (it
	// holds at most netproxy.MaxBlocked).
	BlockedOmitted int `json:"blocked_omitted,omitempty"`
}

func runShell(ctx context.Context, ts *Toolset, raw json.RawMessage) (Output, error) {
	var a shellArgs
	if err := decode(raw, &a); err != nil {
		return failf("%v", err), nil
	}
	if strings.TrimSpace(a.Command) == "" {
		return failf("shell needs a command"), nil
	}
	if out, bad := badPath("shell", a.Dir); bad {
		return out, nil
	}
	if a.Stdin != nil && len(*a.Stdin) > MaxShellStdin {
		return failf("stdin is %d bytes, more than the %d a call takes: write it to a file and redirect from it", len(*a.Stdin), MaxShellStdin), nil
	}
	if a.Background && a.Stdin != nil {
		return failf("a background command takes its input through process_input, not stdin"), nil
	}
	timeout := sandbox.DefaultTimeout
	if a.Background {
		timeout = MaxShellTimeout
	}
	if a.Timeout != nil {
		t := time.Duration(*a.Timeout * float64(time.Second))
		if t <= 0 || t > MaxShellTimeout {
			return failf("timeout must be between 0 and %v seconds", MaxShellTimeout.Seconds()), nil
		}
		timeout = t
	}
	if out, ok, err := ts.gate(ctx, permission.Request{Capability: permission.Shell, Tool: "shell", Detail: a.Command, Command: a.Command}, a); !ok {
		return out, err
	}
	cmd := sandbox.Command{Shell: a.Command, Timeout: timeout, Dir: a.Dir}
	if a.Background {
		return ts.startBackground(cmd, a.Command), nil
	}
	if a.Stdin != nil {
		cmd.Stdin = strings.NewReader(*a.Stdin)
	}
	if w := progressWriter(ctx); w != nil {
		cmd.Stdout, cmd.Stderr = w, w
	}
	res, err := ts.opts.Sandbox.Exec(ctx, cmd)
	if err != nil {
		if ctx.Err() != nil {
			return Output{}, ctx.Err()
		}
		return failf("%s", describeErr(err)), nil
	}
	r := ShellResult{
		ExitCode: res.ExitCode,
		Stdout:   Truncate(string(res.Stdout), MaxShellLines, MaxShellChars),
		Stderr:   Truncate(string(res.Stderr), MaxShellLines, MaxShellChars),
		TimedOut: res.TimedOut,
		Blocked:  res.Blocked,

		BlockedOmitted: res.BlockedOmitted,
	}
	if r.Blocked == nil {
		r.Blocked = []string{}
	} else {
		more := ""
		if r.BlockedOmitted > 0 {
			more = fmt.Sprintf(", and %d more refusals not listed", r.BlockedOmitted)
		}
		r.Stderr += fmt.Sprintf("\n[network refused %s%s: not in the sandbox's allow-list]", strings.Join(r.Blocked, ", "), more)
	}
	if res.TimedOut {
		r.Stderr += fmt.Sprintf("\n[timed out after %v; every process it started was stopped]", timeout)
	}
	return structured(r), nil
}
