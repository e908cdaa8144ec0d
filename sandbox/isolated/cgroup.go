package isolated

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/policy"
)

// cgroupRoot is where cgroup filesystems are mounted.
var cgroupRoot = "/sys/fs/cgroup"

// cgroup is one sandbox's memory and pids control groups, on cgroup v2
// (one directory) or v1 (one per controller).
//
// A process limit binds the command's processes, not hutch's: commands
// start in a group of their own below the sandbox's pids group (cmd, with
// the policy's limit), while hutch's processes in the sandbox (a
// session's init, runner and exec helpers, a one-shot's PID 1) stay above
// it, bounded by the sandbox group's own, wider limit. On cgroup v2 both
// are threaded subgroups of the sandbox's (which keeps the memory limit,
// a domain controller's): there, as on v1, a thread may be in a group of
// its own, and hutch's are in hutch. The helpers start each command
// inside cmd (see boundary.CommandGroup); no command runs anywhere else.
type cgroup struct {
	dirs   map[string]string // controller -> directory
	v2     bool
	memory bool // a memory limit is set here
	pids   bool // a pids limit is set here (on cmd)
	procs  int  // that limit, the policy's
}

// Names of the sandbox's pids subgroups.
const (
	cmdGroup   = "cmd"
	hutchGroup = "hutch" // v2 only
)

// hutchProcesses is what the sandbox's pids group allows beyond the
// commands' limit, for hutch's own processes and threads in it: far more
// than they use (a session's init and runner hold about 20 threads, each
// concurrent exec helper about 10), as a bound, not a budget.
const hutchProcesses = 1024

// newCgroup creates control groups for the policy's memory and process
// limits, or returns nil (and why) when this host does not let hutch: not
// root and no delegated cgroup, or no such controller. The caller then
// relies on rlimits.
func newCgroup(l policy.Limits) (*cgroup, error) {
	if l.Memory == 0 && l.Processes == 0 {
		return nil, nil
	}
	name := groupName()
	cg := &cgroup{dirs: map[string]string{}}
	if ctrl, err := boundary.ReadKernelFile(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil &&
		strings.Contains(string(ctrl), "memory") && strings.Contains(string(ctrl), "pids") {
		cg.v2 = true
		parent := filepath.Join(cgroupRoot, ownCgroup(""))
		sweepGroups(parent)
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating cgroup: %w", err)
		}
		cg.dirs["memory"], cg.dirs["pids"] = dir, dir
	} else {
		for _, c := range []string{"memory", "pids"} {
			if _, err := os.Stat(filepath.Join(cgroupRoot, c, "cgroup.procs")); err != nil {
				continue
			}
			parent := filepath.Join(cgroupRoot, c, ownCgroup(c))
			sweepGroups(parent)
			dir := filepath.Join(parent, name)
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
	b, err := boundary.ReadKernelFile("/proc/self/cgroup")
	if err != nil {
		return "/"
	}
	g, _ := cgroupIn(b, controller)
	return g
}

// cgroupIn is the group a /proc cgroup listing (/proc/self/cgroup,
// /proc/thread-self/cgroup) names for controller (v1), or in the unified
// hierarchy (""); "/" and false when it names none.
func cgroupIn(listing []byte, controller string) (string, bool) {
	for _, line := range strings.Split(string(listing), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if (controller == "" && parts[0] == "0" && parts[1] == "") ||
			(controller != "" && strings.Contains(","+parts[1]+",", ","+controller+",")) {
			return filepath.Clean("/" + parts[2]), true
		}
	}
	return "/", false
}

func (cg *cgroup) limit(l policy.Limits) error {
	write := func(ctrl, file, v string) error {
		return boundary.WriteKernelFile(filepath.Join(cg.dirs[ctrl], file), []byte(v))
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
		// The kernel takes no pids.max above PID_MAX_LIMIT (1<<22), which
		// a policy may ask for the commands alone.
		if err := write("pids", "pids.max", strconv.Itoa(min(l.Processes+hutchProcesses, 1<<22))); err != nil {
			return err
		}
		subs := []string{cmdGroup}
		if cg.v2 {
			subs = append(subs, hutchGroup)
		}
		cg.pids = true // from here on remove takes the subgroups too
		for _, sub := range subs {
			if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
				return fmt.Errorf("creating cgroup: %w", err)
			}
			if cg.v2 {
				if err := write("pids", filepath.Join(sub, "cgroup.type"), "threaded"); err != nil {
					return fmt.Errorf("making %s/%s threaded: %w", dir, sub, err)
				}
			}
		}
		if cg.v2 {
			if err := write("pids", "cgroup.subtree_control", "+pids"); err != nil {
				return fmt.Errorf("enabling pids below %s: %w", dir, err)
			}
		}
		if err := write("pids", filepath.Join(cmdGroup, "pids.max"), strconv.Itoa(l.Processes)); err != nil {
			return err
		}
		cg.procs = l.Processes
	}
	return nil
}

// add moves pid (the sandbox's init or PID 1, before it starts anything)
// in: into hutch's part of the groups.
func (cg *cgroup) add(pid int) error {
	for _, dir := range cg.dirs {
		if cg.v2 && cg.pids {
			dir = filepath.Join(dir, hutchGroup) // memory and pids share v2's directory
		}
		if err := boundary.WriteKernelFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid))); err != nil {
			return fmt.Errorf("joining cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// startInside runs start, which forks the sandbox's init, so that the
// init is born in hutch's part of the groups, and reports whether it was
// (otherwise the caller moves it in: add). On v1 start runs on a thread
// that visits the groups: it writes itself ("0") into their tasks files,
// forks there, and goes back to the groups it came from. A thread that
// moves itself takes no lock that waits for an RCU grace period of the
// kernel, as a move by pid does (8-16 ms on a 2-CPU VM whenever the
// kernel's RCU sync has gone idle). On v2, where a thread moves only
// within its domain, start just runs.
//
// The process's main thread never visits: v1's memory controller charges
// the whole process's memory to its main thread's group. A thread that
// cannot go back is kept out of use, locked and retrying (visitThread),
// never ended: the inits it forked die with it (their parent death
// signal is that thread's).
func (cg *cgroup) startInside(start func() error) (inside bool, err error) {
	if cg == nil || cg.v2 {
		return false, start()
	}
	done := make(chan visitResult, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			cg.visitThread(start, done)
			return
		}
		// Held here, the main thread cannot run the visit.
		inner := make(chan visitResult, 1)
		go func() {
			runtime.LockOSThread()
			cg.visitThread(start, inner)
		}()
		done <- <-inner
		runtime.UnlockOSThread()
	}()
	v := <-done
	return v.inside, v.err
}

// visitResult is what startInside's visit reports: whether the init was
// born inside, and start's error.
type visitResult struct {
	inside bool
	err    error
}

// visitedBy, when set (by a test), is told the thread that visits.
var visitedBy func(tid int)

// visitThread is startInside's visit, on a locked thread that is not the
// main thread: it reports on done, then unlocks the thread once the
// thread is back in its own groups. One that cannot go back stays locked
// (out of use) and tries again every second.
func (cg *cgroup) visitThread(start func() error, done chan<- visitResult) {
	into, back, err := cg.visitFiles()
	defer wire.CloseFiles(into)
	defer wire.CloseFiles(back)
	if err != nil {
		runtime.UnlockOSThread()
		done <- visitResult{false, start()}
		return
	}
	if visitedBy != nil {
		visitedBy(unix.Gettid())
	}
	if writeSelf(into) {
		done <- visitResult{true, start()}
	} else {
		// Not wholly inside: the init starts elsewhere, and the caller
		// moves it in.
		go func() { done <- visitResult{false, start()} }()
	}
	for !writeSelf(back) {
		time.Sleep(time.Second)
	}
	runtime.UnlockOSThread()
}

// visitFiles opens the tasks files of the calling thread's way into the
// groups (into, one a controller) and of its way back (back: the groups
// it is in now, as /proc/thread-self/cgroup names them).
func (cg *cgroup) visitFiles() (into, back []*os.File, err error) {
	own, err := boundary.ReadKernelFile("/proc/thread-self/cgroup")
	if err != nil {
		return nil, nil, err
	}
	for ctrl, dir := range cg.dirs {
		g, ok := cgroupIn(own, ctrl)
		if !ok {
			return into, back, fmt.Errorf("no %s group in /proc/thread-self/cgroup", ctrl)
		}
		home := filepath.Join(cgroupRoot, ctrl, g)
		for _, d := range []struct {
			dir   string
			files *[]*os.File
		}{{dir, &into}, {home, &back}} {
			f, err := os.OpenFile(filepath.Join(d.dir, "tasks"), os.O_WRONLY, 0)
			if err != nil {
				return into, back, err
			}
			*d.files = append(*d.files, f)
		}
	}
	return into, back, nil
}

// writeSelf moves the calling thread into each group whose tasks file is
// open in files, and reports whether every move was made.
func writeSelf(files []*os.File) bool {
	ok := true
	for _, f := range files {
		if _, err := f.Write([]byte("0")); err != nil {
			ok = false
		}
	}
	return ok
}

// selfJoin readies the groups for a one-shot's PID 1, which joins them
// itself once its namespaces are set, before it builds the root or
// starts anything, and returns the files it writes itself ("0") into;
// the caller closes them. PID 1 joins the commands'
// part: the commands' group holds one process more for it, and its
// command then starts there without moving. PID 1 forks once, for its
// command, before the command can fill the group, and needs no process
// after that: it only waits, kills and reports.
//
// On v1 the files are the groups' tasks files: PID 1 is then a single
// thread, and a thread that moves itself takes no lock that waits for an
// RCU grace period of the kernel, as a move by pid does (8-16 ms on a
// 2-CPU VM, unless the host favours dynamic cgroup changes). On v2, where
// a thread moves only within its domain, it is cgroup.procs, which waits.
func (cg *cgroup) selfJoin() ([]*os.File, error) {
	file := "tasks"
	if cg.v2 {
		file = "cgroup.procs"
	}
	dirs := map[string]bool{}
	for ctrl, dir := range cg.dirs {
		if cg.pids && (ctrl == "pids" || cg.v2) {
			dir = filepath.Join(cg.dirs["pids"], cmdGroup) // v2: memory and pids share it
		}
		dirs[dir] = true
	}
	if cg.pids {
		cmd := filepath.Join(cg.dirs["pids"], cmdGroup)
		if err := boundary.WriteKernelFile(filepath.Join(cmd, "pids.max"), []byte(strconv.Itoa(min(cg.procs+1, 1<<22)))); err != nil {
			return nil, fmt.Errorf("making room for PID 1 in %s: %w", cmd, err)
		}
	}
	var files []*os.File
	for dir := range dirs {
		f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY, 0)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("opening cgroup %s: %w", dir, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// commandFiles opens what the sandbox's helpers need to start commands in
// the commands' group (see boundary.CommandGroup): none without a process
// limit. The caller closes them once the helper has its copies.
func (cg *cgroup) commandFiles() (boundary.CommandGroup, error) {
	var g boundary.CommandGroup
	if cg == nil || !cg.pids {
		return g, nil
	}
	cmd := filepath.Join(cg.dirs["pids"], cmdGroup)
	open := func(path string, flag int) (*os.File, error) {
		f, err := os.OpenFile(path, flag, 0)
		if err != nil {
			return nil, fmt.Errorf("opening the commands' cgroup: %w", err)
		}
		return f, nil
	}
	var err error
	if g.Procs, err = open(filepath.Join(cmd, "cgroup.procs"), os.O_WRONLY); err != nil {
		return g, err
	}
	// A thread's own group: v1's tasks file, v2's cgroup.threads.
	threads := "tasks"
	if cg.v2 {
		threads = "cgroup.threads"
	}
	if g.Threads, err = open(filepath.Join(cmd, threads), os.O_WRONLY); err == nil {
		g.Count, err = open(filepath.Join(cmd, "pids.current"), os.O_RDONLY)
	}
	if err != nil {
		g.Close()
		return boundary.CommandGroup{}, err
	}
	return g, nil
}

// files are the counter files of the limits set here: none for a nil
// cgroup (no groups), whose counts are then always 0.
func (cg *cgroup) files() boundary.CgroupFiles {
	var f boundary.CgroupFiles
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
		f.Pids = filepath.Join(cg.dirs["pids"], cmdGroup, "pids.events")
	}
	return f
}

// remove deletes the groups once their processes are gone (the PID
// namespace dies with its init, but the kernel may take a moment: a
// one-shot's PID 1 is still exiting when its command's status is in),
// trying again after 0.2 ms, then twice as long each time up to 10 ms,
// for a second in all. A nil cgroup has nothing to remove.
func (cg *cgroup) remove() {
	if cg == nil {
		return
	}
	var dirs []string
	if cg.pids {
		dirs = append(dirs, filepath.Join(cg.dirs["pids"], cmdGroup))
		if cg.v2 {
			dirs = append(dirs, filepath.Join(cg.dirs["pids"], hutchGroup))
		}
	}
	seen := map[string]bool{}
	for _, dir := range append(dirs, cg.dirs["pids"], cg.dirs["memory"]) {
		if dir == "" || seen[dir] {
			continue
		}
		seen[dir] = true
		removeDir(dir, time.Second)
	}
}

// removeDir removes the empty directory dir (a cgroup), trying again
// while it is busy, with a growing pause, until it is gone or patience is
// spent.
func removeDir(dir string, patience time.Duration) {
	deadline := time.Now().Add(patience)
	for pause := 200 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		if err := unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) || time.Now().After(deadline) {
			return
		}
		time.Sleep(pause)
	}
}

// A sandbox's groups outlive a hutch killed with SIGKILL (it never gets
// to remove them). So every group's name says who made it: the creating
// process's PID namespace, PID and start time (which tells a PID reused
// since from the same process), then random digits. Before a sandbox
// makes its groups, sweepGroups removes the groups of its parent whose
// creator is gone. Only the creator ever moves a process into a group it
// made, so once it is dead no one is between making a group and filling
// it, and the kernel removes a group only while no process is in it: a
// group whose sandbox still runs stays. A group made in another PID
// namespace, whose creator this process cannot look up, is left alone,
// as is every name not of this exact form.

// groupOwner identifies the process that made a group.
type groupOwner struct {
	ns, pid, start uint64 // PID namespace inode, PID, start time in clock ticks
}

// groupNameRE is the exact form of groupName's names (compiled when a
// sweep first needs it, not at every start).
var groupNameRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^hutch-([0-9]+)-([0-9]+)-([0-9]+)-[0-9a-f]{12}$`)
})

// selfOwner is this process as a group's creator.
var selfOwner = sync.OnceValue(func() groupOwner {
	o := groupOwner{pid: uint64(os.Getpid()), ns: boundary.PIDNamespace()}
	o.start, _ = boundary.ProcessStart(int(o.pid))
	return o
})

// groupName is the name of a new sandbox's groups.
func groupName() string {
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	o := selfOwner()
	return fmt.Sprintf("hutch-%d-%d-%d-%s", o.ns, o.pid, o.start, hex.EncodeToString(id))
}

// ownerGone reports whether name is a group of groupName's form whose
// creator, in this process's PID namespace, is no longer running.
func ownerGone(name string) bool {
	m := groupNameRE().FindStringSubmatch(name)
	if m == nil {
		return false
	}
	var o groupOwner
	for i, p := range []*uint64{&o.ns, &o.pid, &o.start} {
		v, err := strconv.ParseUint(m[i+1], 10, 64)
		if err != nil {
			return false
		}
		*p = v
	}
	self := selfOwner()
	if o.ns == 0 || o.ns != self.ns || o == self || o.pid > 1<<22 {
		return false
	}
	start, err := boundary.ProcessStart(int(o.pid))
	if errors.Is(err, os.ErrNotExist) {
		return true // no such process
	}
	return err == nil && start != o.start // its PID is another process's now
}

// sweepGroups removes the groups below parent whose creator is gone (see
// above) and that hold no process: their subgroups first, then the
// group. Whatever the kernel refuses to remove (a process still in it)
// stays for a later sweep.
func sweepGroups(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !ownerGone(e.Name()) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		for _, sub := range []string{cmdGroup, hutchGroup} {
			_ = os.Remove(filepath.Join(dir, sub))
		}
		_ = os.Remove(dir)
	}
}
