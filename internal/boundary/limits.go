package boundary

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LimitCounts are a sandbox's control-group counters of limits hit: how
// many processes the memory controller killed for lack of memory, and how
// many forks the pids controller refused. They only grow.
type LimitCounts struct {
	OOMKills     int64
	ForkRefusals int64
}

// CgroupFiles name the files LimitCounts are read from: a memory events
// file (cgroup v2 memory.events, v1 memory.oom_control: both count
// "oom_kill") and a pids events file (pids.events: "max"). An empty name
// is not read.
type CgroupFiles struct {
	Memory, Pids string
}

// Open opens the counter files for reading again and again (Counters),
// around every command; a file that cannot be opened counts 0.
func (f CgroupFiles) Open() *Counters {
	open := func(path string) *os.File {
		if path == "" {
			return nil
		}
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil
		}
		// Not os.Open: a cgroup file is not for the network poller,
		// which would try it and give up, at two system calls.
		return os.NewFile(uintptr(fd), path)
	}
	return &Counters{memory: open(f.Memory), pids: open(f.Pids)}
}

// Counters are CgroupFiles held open: each Counts is a pread of each
// file. A nil *Counters counts 0. Safe for concurrent use.
type Counters struct {
	memory, pids *os.File
}

// Counts reads the counters. A file that cannot be read, or lacks its
// key, counts 0.
func (c *Counters) Counts() LimitCounts {
	if c == nil {
		return LimitCounts{}
	}
	return LimitCounts{OOMKills: readCounter(c.memory, "oom_kill"), ForkRefusals: readCounter(c.pids, "max")}
}

// Close closes the files.
func (c *Counters) Close() {
	if c == nil {
		return
	}
	for _, f := range []*os.File{c.memory, c.pids} {
		if f != nil {
			f.Close()
		}
	}
}

// Since names the limit whose counter moved since before: "memory" (first:
// an OOM kill is what ended a command, even when forks failed too),
// "pids", or "" when neither did.
func (c LimitCounts) Since(before LimitCounts) string {
	switch {
	case c.OOMKills > before.OOMKills:
		return "memory"
	case c.ForkRefusals > before.ForkRefusals:
		return "pids"
	}
	return ""
}

// OwnCgroupFiles are the counter files of the control groups this process
// runs in, as a container shows them (a private cgroup namespace, or
// Docker's view of cgroup v1): cgroup v2 at /sys/fs/cgroup, else the v1
// memory and pids hierarchies. A file that does not exist is left out.
func OwnCgroupFiles() CgroupFiles {
	var f CgroupFiles
	for _, c := range [][2]string{{"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/pids.events"},
		{"/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/pids/pids.events"}} {
		if f.Memory == "" && exists(c[0]) {
			f.Memory = c[0]
		}
		if f.Pids == "" && exists(c[1]) {
			f.Pids = c[1]
		}
	}
	return f
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readCounter reads "key N" from a flat-keyed cgroup file open at f (nil
// counts 0), from its start: such a file is made anew at each read from
// offset 0.
func readCounter(f *os.File, key string) int64 {
	if f == nil {
		return 0
	}
	var buf [512]byte
	n, err := f.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(buf[:n]), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// RlimitHit names the rlimit behind a command's exit code, when one is:
// "cpu_time" when the command (or a child whose death a shell reported as
// 128+N) got SIGXCPU under a CPU-time limit, "file_size" for SIGXFSZ under
// a file-size limit; "" otherwise. Signal numbers are Linux's.
func RlimitHit(exitCode int, cpuTime, fileSize bool) string {
	switch {
	case cpuTime && exitCode == 128+sigXCPU:
		return "cpu_time"
	case fileSize && exitCode == 128+sigXFSZ:
		return "file_size"
	}
	return ""
}

// SIGXCPU and SIGXFSZ on Linux (every architecture hutch builds for).
const (
	sigXCPU = 24
	sigXFSZ = 25
)

// MinOpenFiles is the smallest open-files limit the container helper takes
// (see CommandLimits): a reaper lives under the limit it hands down and
// needs about ten descriptors of its own.
const MinOpenFiles = 16

// MaxCPUSeconds is the largest CPU-time limit, in seconds, the container
// helper takes (about 136 years): the bound of serve's --cpu-time.
const MaxCPUSeconds = 1<<32 - 1
