package policy

import (
	"fmt"
	"slices"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Unlimited, as Limits.Processes or Limits.Memory, is no limit asked for
// explicitly: Extend carries it over a narrower policy's limit (a 0 there
// means "not set here" and leaves that limit as it is), Normalize accepts
// it, and enforcement reads it as none (see Limits.Enforced). Files and
// flags write it as the word unlimited. The other limits have no default,
// so 0 is their "none", and Unlimited is refused there like any negative
// limit.
const Unlimited = -1

// UnlimitedWord is how files and flags write Unlimited.
const UnlimitedWord = "unlimited"

// DefaultProcesses is the default policy's process limit: the command may
// have at most this many tasks (processes and threads) at once. A fork
// bomb stops there, a small part of a host's usual pid_max of 32768,
// while builds and test runs stay far below it (go build -a std with
// GOMAXPROCS=32, 32 jobs at once, peaked at 272 tasks). Where a pids
// cgroup holds it, it counts the command's tasks only, not hutch's in the
// sandbox. The RLIMIT_NPROC fallback (hutch not root and given no cgroup)
// counts every task in the sandbox, hutch's own helpers' threads included
// (about 20 in a session). As root without a pids cgroup no rlimit binds,
// and a sandbox with a process limit is refused: give Unlimited (--pids
// unlimited) to run one without.
const DefaultProcesses = 1024

// Bounds of DefaultMemory.
const (
	defaultMemoryCap     Size = 8 << 30
	defaultMemoryUnknown Size = 4 << 30
)

// DefaultMemory is the default policy's memory limit: half of this host's
// physical memory (as sysinfo reports it, whatever a container's own limit
// around hutch is), rounded down to a MiB and at most 8 GiB; 4 GiB where
// the host's memory cannot be read. Half leaves the host and hutch room
// while the command runs ordinary builds and tests.
//
// What it bounds depends on the host (hutch check says which): with a
// memory cgroup, everything the sandbox's processes use together, shared
// memory and the private /tmp included, and the command is OOM-killed at
// the limit (the result's Limit is "memory"). Without one it is only an
// RLIMIT_DATA per process: private memory is refused beyond it (an
// allocation fails), but shared mappings (MAP_SHARED|MAP_ANONYMOUS, memfd,
// /dev/zero) are not counted, and each process of the command has a limit
// of its own.
func DefaultMemory() Size { return defaultMemory() }

var defaultMemory = sync.OnceValue(func() Size { return memoryFor(physicalMemory()) })

// memoryFor is DefaultMemory for a host with total bytes of physical
// memory (ok false: unknown).
func memoryFor(total uint64, ok bool) Size {
	if !ok || total == 0 {
		return defaultMemoryUnknown
	}
	half := Size(min(total/2, uint64(defaultMemoryCap)))
	return half &^ (1<<20 - 1)
}

// Enforced is l as enforcement reads it: Unlimited, in Memory or
// Processes, becomes 0, no limit, so that no code testing a limit against
// 0 takes the sentinel for a number.
func (l Limits) Enforced() Limits {
	if l.Memory == Unlimited {
		l.Memory = 0
	}
	if l.Processes == Unlimited {
		l.Processes = 0
	}
	return l
}

// ParseProcessLimit reads a process limit as files and flags write it: a
// positive whole number in decimal (ParseWholeNumber's rules), or
// unlimited.
func ParseProcessLimit(s string) (int, error) {
	if s == UnlimitedWord {
		return Unlimited, nil
	}
	n, err := ParseWholeNumber(s)
	switch {
	case err != nil:
		return 0, err
	case n < 0:
		return 0, fmt.Errorf("process limit %d is negative: give a number of processes, or %s for none", n, UnlimitedWord)
	case n == 0:
		return 0, fmt.Errorf("process limit 0 is no limit here: give a number of processes, or %s for none", UnlimitedWord)
	}
	return n, nil
}

// ParseMemoryLimit reads a memory limit as files and flags write it: a
// size other than 0 (ParseSize's rules), or unlimited. A 0 would not lift
// the default policy's limit (it means "not set" to Extend), so it is
// refused rather than silently kept.
func ParseMemoryLimit(s string) (Size, error) {
	if s == UnlimitedWord {
		return Unlimited, nil
	}
	v, err := ParseSize(s)
	switch {
	case err != nil:
		return 0, err
	case v == 0:
		return 0, fmt.Errorf("memory limit %q is no limit here: give a size (512M), or %s for none", s, UnlimitedWord)
	}
	return v, nil
}

// fileLimit reads limits.processes or limits.memory (key) of a file with
// parse: a node the file does not have is 0, not set; an empty one (~,
// null, nothing) is refused, where YAML would make it 0 and so keep the
// limit it extends, whatever the writer meant. A count must be written as
// one (processes: "64" is refused, as other counts in files are); kinds
// lists the YAML tags taken besides the word unlimited.
func fileLimit[T int | Size](n yaml.Node, key string, kinds []string, parse func(string) (T, error)) (T, error) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = *n.Alias
	}
	word := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value == UnlimitedWord
	switch {
	case n.Kind == 0:
		return 0, nil
	case !word && (n.Kind != yaml.ScalarNode || !slices.Contains(kinds, n.ShortTag())):
		return 0, fmt.Errorf("line %d: %s %q: give a limit, or %s for none", n.Line, key, n.Value, UnlimitedWord)
	}
	v, err := parse(n.Value)
	if err != nil {
		return 0, fmt.Errorf("line %d: %v", n.Line, err)
	}
	return v, nil
}
