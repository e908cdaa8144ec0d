package helper

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/policy"
)

// execMain runs inside the finished sandbox as a child of init. It confines
// itself — resource limits, priority, Landlock, no_new_privs, every
// capability dropped, the seccomp filter — and then becomes the command
// with execve. Confinement happens here rather than in init so that init
// keeps what it needs to serve the sandbox, while nothing the command runs
// ever holds more than the command.
func execMain() int {
	runtime.LockOSThread() // capabilities are per thread: exec from this one
	jobFile := os.NewFile(3, "job")
	job, err := decodeJob(jobFile)
	jobFile.Close()
	if err != nil {
		return fail(125, "hutch: %v", err)
	}
	prog, code, err := lookPath(job)
	if err != nil {
		return fail(code, "hutch: %s: %v", job.Argv[0], err)
	}
	if err := confine(job); err != nil {
		return fail(125, "hutch: confining the command: %v", err)
	}
	err = syscall.Exec(prog, job.Argv, job.Env)
	code = 126
	if errors.Is(err, syscall.ENOENT) {
		code = 127
	}
	return fail(code, "hutch: %s: %v", job.Argv[0], err)
}

func fail(code int, format string, args ...any) int {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	return code
}

// lookPath finds the program in the command's own PATH, as a shell would:
// 127 when it is missing, 126 when it cannot be executed.
func lookPath(job Job) (string, int, error) {
	name := job.Argv[0]
	if strings.Contains(name, "/") {
		return name, 126, executable(name)
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range job.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	var firstErr error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		err := executable(p)
		if err == nil {
			return p, 0, nil
		}
		if firstErr == nil && !errors.Is(err, os.ErrNotExist) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", 126, firstErr
	}
	return "", 127, errors.New("command not found")
}

func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.ErrNotExist
	case err != nil:
		return err
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return errors.New("permission denied (not executable)")
	}
	return nil
}

// confine applies every layer that works per process, in an order where
// each step still has the privilege it needs.
func confine(job Job) error {
	p := job.Policy
	if err := setLimits(job); err != nil {
		return err
	}
	if p.Nice > 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, p.Nice); err != nil {
			return fmt.Errorf("nice: %w", err)
		}
	}
	if err := restrictPaths(p); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := dropCapabilities(); err != nil {
		return fmt.Errorf("dropping capabilities: %w", err)
	}
	return loadSeccomp()
}

func setLimits(job Job) error {
	l := job.Policy.Limits
	set := func(res int, v uint64, name string) error {
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("%s limit: %w", name, err)
		}
		return nil
	}
	if err := set(unix.RLIMIT_CORE, 0, "core"); err != nil {
		return err
	}
	if l.CPUTime > 0 {
		secs := uint64((l.CPUTime + 999_999_999) / 1_000_000_000)
		// SIGXCPU at the limit, SIGKILL a second later for programs that
		// catch it.
		if err := unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: secs, Max: secs + 1}); err != nil {
			return fmt.Errorf("cpu limit: %w", err)
		}
	}
	if l.FileSize > 0 {
		if err := set(unix.RLIMIT_FSIZE, uint64(l.FileSize), "file size"); err != nil {
			return err
		}
	}
	if l.OpenFiles > 0 {
		if err := set(unix.RLIMIT_NOFILE, uint64(l.OpenFiles), "open files"); err != nil {
			return err
		}
	}
	if l.Processes > 0 && !job.PidsByCgroup {
		// Counted per user namespace: only the sandbox's processes.
		if err := set(unix.RLIMIT_NPROC, uint64(l.Processes), "processes"); err != nil {
			return err
		}
	}
	if l.Memory > 0 && !job.MemoryByCgroup {
		// Writable private memory per process (heap, anonymous maps);
		// unlike an address-space limit it does not count reserved but
		// unused ranges, so runtimes that reserve large arenas still start.
		if err := set(unix.RLIMIT_DATA, uint64(l.Memory), "memory"); err != nil {
			return err
		}
	}
	return nil
}

// restrictPaths mirrors the policy in a Landlock ruleset: the policy's
// readable paths read-only, its writable paths and the private /tmp
// writable, /dev's few devices usable. Best effort by kernel ABI (this
// layer adds to the mount namespace; it is not the only wall).
func restrictPaths(p policy.Policy) error {
	var rules []landlock.Rule
	add := func(paths []string, writable bool) {
		for _, path := range paths {
			fi, err := os.Stat(path)
			if err != nil {
				continue // not in the sandbox
			}
			switch {
			case fi.IsDir() && writable:
				rules = append(rules, landlock.RWDirs(path))
			case fi.IsDir():
				rules = append(rules, landlock.RODirs(path))
			case writable:
				rules = append(rules, landlock.RWFiles(path))
			default:
				rules = append(rules, landlock.ROFiles(path))
			}
		}
	}
	add(p.Read, false)
	add([]string{"/proc"}, false)
	add(append([]string{"/tmp", "/dev/shm"}, p.Write...), true)
	add([]string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}, true)
	return landlock.V7.BestEffort().RestrictPaths(rules...)
}

// dropCapabilities leaves the command no capability, now or after execve:
// the bounding and ambient sets are emptied, the securebits stop root from
// regaining capabilities at exec, and the thread's own sets are cleared.
func dropCapabilities() error {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &last)
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("bounding set: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("ambient set: %w", err)
	}
	// NOROOT, NO_SETUID_FIXUP and NO_CAP_AMBIENT_RAISE, each locked, and
	// KEEP_CAPS locked off.
	const bits = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<5 | 1<<6 | 1<<7
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, bits, 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}
