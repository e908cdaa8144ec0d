package isolated

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hutchsandbox/hutch/helper"
	"github.com/hutchsandbox/hutch/policy"
)

// cgroupRoot is where cgroup filesystems are mounted.
var cgroupRoot = "/sys/fs/cgroup"

// cgroup is one sandbox's memory and pids control groups, on cgroup v2
// (one directory) or v1 (one per controller).
type cgroup struct {
	dirs   map[string]string // controller -> directory
	v2     bool
	memory bool // a memory limit is set here
	pids   bool // a pids limit is set here
}

// newCgroup creates control groups for the policy's memory and process
// limits, or returns nil (and why) when this host does not let hutch: not
// root and no delegated cgroup, or no such controller. The caller then
// relies on rlimits.
func newCgroup(l policy.Limits) (*cgroup, error) {
	if l.Memory == 0 && l.Processes == 0 {
		return nil, nil
	}
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	name := "hutch-" + hex.EncodeToString(id)
	cg := &cgroup{dirs: map[string]string{}}
	if ctrl, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil &&
		strings.Contains(string(ctrl), "memory") && strings.Contains(string(ctrl), "pids") {
		cg.v2 = true
		dir := filepath.Join(cgroupRoot, ownCgroup(""), name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating cgroup: %w", err)
		}
		cg.dirs["memory"], cg.dirs["pids"] = dir, dir
	} else {
		for _, c := range []string{"memory", "pids"} {
			if _, err := os.Stat(filepath.Join(cgroupRoot, c, "cgroup.procs")); err != nil {
				continue
			}
			dir := filepath.Join(cgroupRoot, c, ownCgroup(c), name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				cg.remove()
				return nil, fmt.Errorf("creating %s cgroup: %w", c, err)
			}
			cg.dirs[c] = dir
		}
		if len(cg.dirs) == 0 {
			return nil, errors.New("no memory or pids cgroup controller")
		}
	}
	if err := cg.limit(l); err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

// ownCgroup is the group this process runs in for controller (v1), or in
// the unified hierarchy (""): sandboxes are made below it, so they stay
// within whatever limits the host set for hutch (a container's, a
// systemd unit's).
func ownCgroup(controller string) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "/"
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if (controller == "" && parts[0] == "0" && parts[1] == "") ||
			(controller != "" && strings.Contains(","+parts[1]+",", ","+controller+",")) {
			return filepath.Clean("/" + parts[2])
		}
	}
	return "/"
}

func (cg *cgroup) limit(l policy.Limits) error {
	write := func(ctrl, file, v string) error {
		return os.WriteFile(filepath.Join(cg.dirs[ctrl], file), []byte(v), 0o644)
	}
	if dir := cg.dirs["memory"]; dir != "" && l.Memory > 0 {
		mem := strconv.FormatInt(int64(l.Memory), 10)
		if cg.v2 {
			if err := write("memory", "memory.max", mem); err != nil {
				return err
			}
			_ = write("memory", "memory.swap.max", "0")
		} else {
			if err := write("memory", "memory.limit_in_bytes", mem); err != nil {
				return err
			}
			// Memory plus swap, where swap accounting is on: no escape
			// into swap.
			_ = write("memory", "memory.memsw.limit_in_bytes", mem)
		}
		cg.memory = true
	}
	if dir := cg.dirs["pids"]; dir != "" && l.Processes > 0 {
		if err := write("pids", "pids.max", strconv.Itoa(l.Processes)); err != nil {
			return err
		}
		cg.pids = true
	}
	return nil
}

// add moves pid (the sandbox's init, before it starts anything) in.
func (cg *cgroup) add(pid int) error {
	for _, dir := range cg.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("joining cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// files are the counter files of the limits set here: none for a nil
// cgroup (no groups), whose counts are then always 0.
func (cg *cgroup) files() helper.CgroupFiles {
	var f helper.CgroupFiles
	if cg == nil {
		return f
	}
	if cg.memory {
		f.Memory = filepath.Join(cg.dirs["memory"], "memory.oom_control")
		if cg.v2 {
			f.Memory = filepath.Join(cg.dirs["memory"], "memory.events")
		}
	}
	if cg.pids {
		f.Pids = filepath.Join(cg.dirs["pids"], "pids.events")
	}
	return f
}

// remove deletes the groups once their processes are gone (the PID
// namespace dies with its init, but the kernel may take a moment). A nil
// cgroup has nothing to remove.
func (cg *cgroup) remove() {
	if cg == nil {
		return
	}
	seen := map[string]bool{}
	for _, dir := range cg.dirs {
		if seen[dir] {
			continue
		}
		seen[dir] = true
		for i := 0; i < 100; i++ {
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
