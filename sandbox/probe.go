package sandbox

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"sync"
	"time"
)

// DefaultProbeCommands are the commands Probe looks for when the caller
// names none. Each one found costs one "--version" run.
var DefaultProbeCommands = []string{"ruby", "python3", "node", "sh"}

// ProbeTimeout bounds one environment probe.
const ProbeTimeout = 15 * time.Second

// CommandInfo is one command the probe found.
type CommandInfo struct {
	Path string `json:"path"`
	// Version is the first dotted number in the first line the command
	// printed for --version; "" when it printed none.
	Version string `json:"version"`
}

// Environment is what a sandbox provides, as data. Error is empty when the
// probe ran; a non-empty Error means "could not probe" (Commands is then
// empty), which is a different answer from "probed and found nothing".
type Environment struct {
	Commands map[string]CommandInfo `json:"commands"`
	Locale   string                 `json:"locale"`
	// Gaps are what the sandbox says it cannot guarantee of the contract
	// (see Gapped), one sentence each; none for hutch's own tiers.
	Gaps  []string `json:"gaps,omitempty"`
	Error string   `json:"error,omitempty"`
}

// Gapped is implemented by a sandbox that cannot keep every guarantee of
// the contract (remote.FromClient's, over a provider's client): Gaps names
// each, one sentence. Probe reports them, and so does hutch check.
type Gapped interface {
	Gaps() []string
}

// probeScript runs in POSIX sh (busybox included): one "command -v" per
// name and one --version for each found. Names arrive as positional
// arguments, never interpolated into the script.
const probeScript = `printf 'locale=%s\n' "${LC_ALL:-${LC_CTYPE:-${LANG:-}}}"
for c in "$@"; do
  p=$(command -v "$c" 2>/dev/null) || continue
  v=$("$c" --version 2>/dev/null </dev/null | head -n 1)
  printf 'cmd=%s\t%s\t%s\n' "$c" "$p" "$v"
done
`

// versionRE is compiled on first use, not at program start.
var versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\d+(\.\d+)+`) })

// Probe reports which of the commands exist in sb (DefaultProbeCommands
// when none are given), its locale and its gaps (Gapped), at the cost of
// one Exec of a POSIX shell script. It never fails: when the probe could not run (no shell, a
// bad command name, a timeout, a cancelled ctx) Environment.Error says why.
// It does not remember the answer; a ProbeCache does.
func Probe(ctx context.Context, sb Sandbox, commands ...string) Environment {
	if len(commands) == 0 {
		commands = DefaultProbeCommands
	}
	env := probe(ctx, sb, commands)
	if g, ok := sb.(Gapped); ok {
		env.Gaps = g.Gaps()
	}
	return env
}

// ProbeCache remembers the answers of Probe for one sandbox, per command
// list, so a caller that asks often (for every system prompt, say) pays for
// one probe. An answer stays until the cache is dropped, even if the
// sandbox's programs change. A probe cut short by the caller's context is
// not remembered. The zero value is ready; it is safe for concurrent use.
type ProbeCache struct {
	mu    sync.Mutex
	cache map[string]Environment
}

func (p *ProbeCache) Probe(ctx context.Context, sb Sandbox, commands []string) Environment {
	if len(commands) == 0 {
		commands = DefaultProbeCommands
	}
	key := fmt.Sprintf("%q", commands) // unambiguous, unlike a join
	p.mu.Lock()
	defer p.mu.Unlock()
	if env, ok := p.cache[key]; ok {
		return env.clone()
	}
	env := probe(ctx, sb, commands)
	if p.cache == nil {
		p.cache = map[string]Environment{}
	}
	// A probe interrupted by the caller's context is not an answer about
	// the sandbox: do not remember it.
	if ctx.Err() == nil {
		p.cache[key] = env
	}
	return env.clone()
}

// clone copies the Commands map so callers cannot change a cached answer.
func (e Environment) clone() Environment {
	e.Commands = maps.Clone(e.Commands)
	return e
}

func probe(ctx context.Context, sb Sandbox, commands []string) Environment {
	env := Environment{Commands: map[string]CommandInfo{}}
	if !sb.Supports(FeatureShell) {
		env.Error = "sandbox has no shell"
		return env
	}
	for _, c := range commands {
		if c == "" || strings.ContainsAny(c, "\x00\t\n") {
			env.Error = fmt.Sprintf("cannot probe for %q: not a command name", c)
			return env
		}
	}
	res, err := sb.Exec(ctx, Command{
		Args:    append([]string{"/bin/sh", "-c", probeScript, "hutch-probe"}, commands...),
		Timeout: ProbeTimeout,
	})
	switch {
	case err != nil:
		env.Error = oneLine(err.Error())
		return env
	case res.TimedOut:
		env.Error = fmt.Sprintf("probe timed out after %v", ProbeTimeout)
		return env
	case res.ExitCode != 0:
		env.Error = fmt.Sprintf("probe exited %d: %s", res.ExitCode, oneLine(string(res.Stderr)))
		return env
	}
	parseProbe(string(res.Stdout), &env)
	return env
}

// parseProbe reads the probe script's output into env. Unknown lines are
// ignored.
func parseProbe(out string, env *Environment) {
	if env.Commands == nil {
		env.Commands = map[string]CommandInfo{}
	}
	for line := range strings.SplitSeq(out, "\n") {
		if v, ok := strings.CutPrefix(line, "locale="); ok {
			env.Locale = v
			continue
		}
		rest, ok := strings.CutPrefix(line, "cmd=")
		if !ok {
			continue
		}
		f := strings.SplitN(rest, "\t", 3)
		if len(f) < 2 || f[0] == "" {
			continue
		}
		info := CommandInfo{Path: f[1]}
		if len(f) == 3 {
			info.Version = versionRE().FindString(f[2])
		}
		env.Commands[f[0]] = info
	}
}

// oneLine keeps the most telling line of an error text: the last line that
// mentions an error or failure, else the last non-empty line, cut to 300
// characters.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	pick := lines[len(lines)-1]
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.ToLower(lines[i])
		if strings.Contains(l, "error") || strings.Contains(l, "fail") || strings.Contains(l, "cause") {
			pick = lines[i]
			break
		}
	}
	pick = strings.TrimSpace(pick)
	if r := []rune(pick); len(r) > 300 {
		pick = string(r[:300])
	}
	return pick
}
