package tierkit

import (
	"maps"
	"os"
	"slices"
	"time"

	"github.com/hutchsandbox/hutch/sandbox"
)

// Captured is a command's result as far as its output goes: what the two
// buffers kept and counted, and the time since begin. The caller adds how
// the command ended.
func Captured(begin time.Time, stdout, stderr *TailBuffer) sandbox.Result {
	return sandbox.Result{
		Duration:        time.Since(begin),
		Stdout:          stdout.Bytes(),
		Stderr:          stderr.Bytes(),
		StdoutTruncated: stdout.Truncated(),
		StderrTruncated: stderr.Truncated(),
		StdoutSize:      stdout.Total(),
		StderrSize:      stderr.Total(),
	}
}

// MergeEnv overlays the layers in order (later wins) into a new map.
func MergeEnv(layers ...map[string]string) map[string]string {
	m := map[string]string{}
	for _, l := range layers {
		maps.Copy(m, l)
	}
	return m
}

// EnvList returns env as a sorted "K=V" list, the form os/exec takes.
func EnvList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// BaseEnv is a command's base environment on the tiers that take it from
// the process that starts the command: PATH (sandbox.DefaultPath when
// unset or empty), HOME and LANG from this process's environment, and
// nothing else of it.
func BaseEnv() map[string]string {
	env := map[string]string{"PATH": sandbox.DefaultPath}
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	return env
}
