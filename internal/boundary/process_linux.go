package boundary

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// CloneFlags are the namespaces every isolated sandbox gets: user, mount,
// PID, IPC, UTS, and network unless hostNetwork.
func CloneFlags(hostNetwork bool) uintptr {
	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if !hostNetwork {
		flags |= unix.CLONE_NEWNET
	}
	return flags
}

// PIDNamespace is the inode number of this process's PID namespace,
// which tells it from another namespace on this boot; 0 when /proc does
// not say.
func PIDNamespace() uint64 {
	if fi, err := os.Stat("/proc/self/ns/pid"); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return st.Ino
		}
	}
	return 0
}

// ProcessStart is pid's start time, in clock ticks after boot (field 22
// of /proc/PID/stat), which tells a process from a later one given the
// same PID. The error wraps fs.ErrNotExist when there is no such process.
func ProcessStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	_, _, start, ok := ParseStat(b)
	if !ok {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected contents", pid)
	}
	return start, nil
}

// StatFields are the fields of a /proc/PID/stat line after the command
// name, which is in parentheses and may hold any byte but NUL, spaces and
// ')' included: f[0] is field 3 (the state), f[n-3] field n. ok is false
// when the line has no command name or ends before field upTo.
func StatFields(b []byte, upTo int) (f []string, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	f = strings.Fields(string(b[i+1:]))
	return f, len(f) >= upTo-2
}

// ParseStat reads the fields of a /proc/PID/stat after the command name,
// which may itself hold spaces and parentheses: state (3: zombie for Z
// and X), ppid (4), starttime (22). ok is false when b has no such
// fields.
func ParseStat(b []byte) (ppid int, zombie bool, start uint64, ok bool) {
	f, ok := StatFields(b, 22)
	if !ok {
		return 0, false, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false, 0, false
	}
	return ppid, f[0] == "Z" || f[0] == "X", start, true
}
