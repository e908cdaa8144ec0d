package isolated_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"golang.org/x/sys/unix"
)

// The test binary runs these inside the sandbox as programs
// (testenv.RegisterProgram; e.attack starts one). Each prints what
// happened, then "attack NAME done".
func init() {
	for name, fn := range map[string]func(args []string){
		"dial":       func(a []string) { attackDial(a[0], a[1]) },
		"read-proc":  readProcAsUser,
		"unix":       func(a []string) { attackUnix(a[0], a[1]) },
		"syscalls":   func([]string) { attackSyscalls() },
		"setid":      func(a []string) { attackSetID(a[0], a[1]) },
		"lease":      func(a []string) { attackLease(a[0]) },
		"tty":        func([]string) { attackTTY() },
		"quotas":     func(a []string) { attackQuotas(a[0]) },
		"alloc":      func(a []string) { mib, _ := strconv.Atoi(a[0]); attackAlloc(mib) },
		"map":        func(a []string) { n, _ := strconv.Atoi(a[0]); attackMap(n) },
		"unix-hibit": func(a []string) { attackUnixHiBit(a[0]) },
		"int80":      func(a []string) { attackInt80(a[0]) },
		"vsock":      func([]string) { attackVsock() },
		"procmem":    func([]string) { attackProcMem() },
		"shmalloc":   func(a []string) { mib, _ := strconv.Atoi(a[1]); attackShmAlloc(a[0], mib) },
	} {
		testenv.RegisterProgram(name, func(args []string) {
			fn(args)
			fmt.Printf("attack %s done\n", name)
		})
	}
}

func attackDial(network, addr string) {
	c, err := net.DialTimeout(network, addr, 2*time.Second)
	if err != nil {
		fmt.Println("BLOCKED", err)
		return
	}
	defer c.Close()
	if network == "udp" {
		c.Write([]byte("ping"))
		fmt.Println("SENT (the host must not receive it)")
		return
	}
	fmt.Println("CONNECTED")
}

func attackUnix(path, dgramPath string) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		fmt.Println("socket BLOCKED", err)
	} else {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		fmt.Println("socket ALLOWED, connect:", err)
	}
	if _, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0); err != nil {
		fmt.Println("socketpair FAILED", err)
	} else {
		fmt.Println("socketpair OK")
	}
	// A pair's end that can still address another socket: a datagram one
	// (refused), and a seqpacket one (which the kernel keeps connected).
	for _, typ := range []struct {
		name string
		t    int
	}{{"dgram", unix.SOCK_DGRAM | unix.SOCK_CLOEXEC}, {"seqpacket", unix.SOCK_SEQPACKET}} {
		fds, err := unix.Socketpair(unix.AF_UNIX, typ.t, 0)
		if err != nil {
			fmt.Println(typ.name, "pair BLOCKED", err)
			continue
		}
		to := &unix.SockaddrUnix{Name: dgramPath}
		report(typ.name+" sendto", unix.Sendto(fds[0], []byte("from the sandbox"), 0, to))
		report(typ.name+" connect", unix.Connect(fds[0], to))
	}
}

// report prints what became of an attempt: BLOCKED with its error, or
// ALLOWED.
func report(name string, err error) {
	if err != nil {
		fmt.Println(name, "BLOCKED", err)
	} else {
		fmt.Println(name, "ALLOWED")
	}
}

// sysErr is a raw system call's error: nil when it succeeded.
func sysErr(_, _ uintptr, e unix.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

func attackSyscalls() {
	report("ptrace", unix.PtraceAttach(1))
	report("mount", unix.Mount("tmpfs", "/tmp", "tmpfs", 0, ""))
	report("unshare-user", unix.Unshare(unix.CLONE_NEWUSER))
	report("setns", sysErr(unix.Syscall(unix.SYS_SETNS, 0, 0, 0)))
	_, err := unix.KeyctlInt(unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0)
	report("keyctl", err)
	_, err = unix.AddKey("user", "hutch", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
	report("add_key", err)
	report("bpf", sysErr(unix.Syscall(unix.SYS_BPF, 0, 0, 0)))
	report("perf_event_open", sysErr(unix.Syscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0, 0)))
	report("init_module", sysErr(unix.Syscall(unix.SYS_INIT_MODULE, 0, 0, 0)))
	report("kexec_load", sysErr(unix.Syscall6(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0, 0, 0)))
	report("userfaultfd", sysErr(unix.Syscall(unix.SYS_USERFAULTFD, 0, 0, 0)))
	report("io_uring_setup", sysErr(unix.Syscall(unix.SYS_IO_URING_SETUP, 1, 0, 0)))
	report("clone-newuser", sysErr(unix.RawSyscall6(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)))
	_, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	report("socket-packet", err)
	_, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	report("socket-raw", err)
	report("chroot", unix.Chroot("/tmp"))
	report("pivot_root", unix.PivotRoot("/tmp", "/tmp"))
}

func attackAlloc(mib int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Println("REFUSED", r)
		}
	}()
	var keep [][]byte
	for i := 0; i < mib; i++ {
		b := make([]byte, 1<<20)
		for j := range b {
			b[j] = 1
		}
		keep = append(keep, b)
	}
	fmt.Println("ALLOCATED", len(keep), "MiB")
}

// attackSetID tries every way to leave a set-user-ID or set-group-ID file,
// or a file capability, in dir (writable), given setid, a set-user-ID
// file the sandbox can read ("" when the host has none). The test then
// looks at dir from the host.
func attackSetID(dir, setid string) {
	at := func(name string) string { return dir + "/" + name }
	report("mknodat-suid", unix.Mknodat(unix.AT_FDCWD, at("m1"), unix.S_IFREG|0o4755, 0))
	report("mknodat-sgid", unix.Mknodat(unix.AT_FDCWD, at("m2"), unix.S_IFREG|0o2755, 0))
	report("mknodat-notype", unix.Mknodat(unix.AT_FDCWD, at("m3"), 0o6755, 0))
	cwd := -100 // AT_FDCWD, as the kernel reads a 32-bit descriptor
	p, _ := unix.BytePtrFromString(at("m4"))
	report("mknodat-raw-highbits", sysErr(unix.Syscall6(unix.SYS_MKNODAT, uintptr(cwd), uintptr(unsafe.Pointer(p)), 1<<40|unix.S_IFREG|0o4755, 0, 0, 0)))
	if runtime.GOARCH == "amd64" { // arm64 has mknodat only
		const sysMknod = 133 // x86_64's mknod
		p, _ := unix.BytePtrFromString(at("m5"))
		report("mknod", sysErr(unix.Syscall(sysMknod, uintptr(unsafe.Pointer(p)), unix.S_IFREG|0o4755, 0)))
	}
	if err := os.WriteFile(at("plain"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		fmt.Println("FAILED to write a plain file:", err)
		return
	}
	report("chmod", unix.Chmod(at("plain"), 0o4755))
	report("fchmodat", unix.Fchmodat(unix.AT_FDCWD, at("plain"), 0o2755, 0))
	p, _ = unix.BytePtrFromString(at("plain"))
	report("fchmodat2", sysErr(unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(cwd), uintptr(unsafe.Pointer(p)), 0o6755, 0, 0, 0)))
	if fd, err := unix.Open(at("plain"), unix.O_RDONLY, 0); err == nil {
		report("fchmod", unix.Fchmod(fd, 0o4755))
		unix.Close(fd)
	}
	fd, err := unix.Open(at("t1"), unix.O_CREAT|unix.O_WRONLY, 0o4755)
	report("open-creat", err)
	if err == nil {
		unix.Close(fd)
	}
	fd, err = unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY, 0o4755)
	report("open-tmpfile", err)
	if err == nil {
		unix.Close(fd)
	}
	// A file capability (security.capability, version 2, effective,
	// permitting CAP_SETUID): a host root file that grants it would be
	// as good as set-user-ID root.
	cap := []byte{0x01, 0x00, 0x00, 0x02, 1 << unix.CAP_SETUID, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	report("setxattr-capability", unix.Setxattr(at("plain"), "security.capability", cap, 0))
	report("setxattr-trusted", unix.Setxattr(at("plain"), "trusted.hutch", []byte("x"), 0))
	// A whiteout is a character device 0/0, no device at all (and /dev
	// is the only place devices open): Linux 5.8 and later make it
	// without CAP_MKNOD. Tried for the host check, whatever it answers.
	report("renameat2-whiteout", unix.Renameat2(unix.AT_FDCWD, at("plain"), unix.AT_FDCWD, at("moved"), unix.RENAME_WHITEOUT))
	if setid != "" {
		report("link-setuid-file", unix.Link(setid, at("linked")))
		// cp -p's way: a copy whose mode is set to the source's after.
		b, err := os.ReadFile(setid)
		if err == nil {
			err = os.WriteFile(at("copied"), b, 0o755)
		}
		if err == nil {
			var st unix.Stat_t
			if err = unix.Stat(setid, &st); err == nil {
				err = unix.Chmod(at("copied"), st.Mode&0o7777)
			}
		}
		report("copy-setuid-file", err)
	}
	report("open_by_handle_at", sysErr(unix.Syscall(unix.SYS_OPEN_BY_HANDLE_AT, uintptr(cwd), 0, 0)))
}

// attackLease tries to take a read lease on path (a file the sandbox's
// root owns), with the command as the kernel reads it and with high bits
// set; a lease got is held for 3 seconds, so a host writer would wait.
func attackLease(path string) {
	f, err := os.Open(path)
	if err != nil {
		fmt.Println("FAILED to open:", err)
		return
	}
	defer f.Close()
	for _, c := range []struct {
		name string
		cmd  uintptr
	}{{"F_SETLEASE", unix.F_SETLEASE}, {"F_SETLEASE-highbits", 1<<32 | unix.F_SETLEASE}} {
		_, _, e := unix.Syscall(unix.SYS_FCNTL, f.Fd(), c.cmd, unix.F_RDLCK)
		if e != 0 {
			fmt.Println(c.name, "BLOCKED", e)
			continue
		}
		fmt.Println(c.name, "ALLOWED")
		time.Sleep(3 * time.Second)
		unix.Syscall(unix.SYS_FCNTL, f.Fd(), unix.F_SETLEASE, unix.F_UNLCK)
	}
}

// attackTTY tries to type into the terminal of its standard input (the
// test hands it one) with TIOCSTI, and TIOCLINUX's paste.
func attackTTY() {
	c := byte('x')
	_, _, e := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
	fmt.Println("TIOCSTI", verdict(e))
	_, _, e = unix.Syscall(unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
	fmt.Println("TIOCSTI-highbits", verdict(e))
	sub := byte(3) // TIOCL_PASTESEL
	_, _, e = unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCLINUX, uintptr(unsafe.Pointer(&sub)))
	fmt.Println("TIOCLINUX", verdict(e))
}

// verdict says BLOCKED with the error, or ALLOWED.
func verdict(e unix.Errno) string {
	if e != 0 {
		return "BLOCKED " + e.Error()
	}
	return "ALLOWED"
}

// attackQuotas takes as many inotify instances, fanotify groups and POSIX
// message queues as it can, tries to raise its namespace's maxima and its
// per-user rlimits, then says so in the file hold (for the test to look
// at the host meanwhile) and keeps everything 3 seconds.
func attackQuotas(hold string) {
	var inotify, fanotify, queues int
	for inotify < 100000 {
		if _, err := unix.InotifyInit1(unix.IN_CLOEXEC); err != nil {
			fmt.Println("inotify stopped:", err)
			break
		}
		inotify++
	}
	for fanotify < 100000 {
		// The unprivileged form (Linux 5.13).
		if _, err := unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_REPORT_FID, unix.O_RDONLY); err != nil {
			fmt.Println("fanotify stopped:", err)
			break
		}
		fanotify++
	}
	attr := [8]int64{0, 10, 8192} // mq_flags, mq_maxmsg, mq_msgsize
	for queues < 1000 {
		// The system call takes the name without mq_open(3)'s "/".
		name, _ := unix.BytePtrFromString(fmt.Sprintf("hutch-%d", queues))
		_, _, e := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(name)), unix.O_CREAT|unix.O_RDWR, 0o600, uintptr(unsafe.Pointer(&attr)), 0, 0)
		if e != 0 {
			fmt.Println("mq_open stopped:", e)
			break
		}
		queues++
	}
	fmt.Println("inotify", inotify, "fanotify", fanotify, "queues", queues)
	err := os.WriteFile("/proc/sys/user/max_inotify_instances", []byte("100000"), 0)
	fmt.Println("raise-sysctl", verdict(errnoOf(err)))
	for _, r := range []struct {
		name     string
		resource int
	}{{"raise-msgqueue", unix.RLIMIT_MSGQUEUE}, {"raise-sigpending", unix.RLIMIT_SIGPENDING}, {"raise-memlock", unix.RLIMIT_MEMLOCK}} {
		var l unix.Rlimit
		unix.Getrlimit(r.resource, &l)
		l.Cur, l.Max = l.Max+1, l.Max+1
		fmt.Println(r.name, verdict(errnoOf(unix.Setrlimit(r.resource, &l))))
	}
	os.WriteFile(hold, []byte("holding"), 0o644)
	time.Sleep(3 * time.Second)
}

// errnoOf is err's errno, 0 for nil, EIO for an error without one.
func errnoOf(err error) unix.Errno {
	if err == nil {
		return 0
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}

// attackMap maps n bytes of private memory at once and writes to every
// page of it, in huge pages where the kernel gives them (the faults of
// gigabytes in small pages take tens of seconds). An RLIMIT_DATA below n
// refuses the mapping itself, before any memory is used.
func attackMap(n int) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		fmt.Println("REFUSED", err)
		return
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	fmt.Println("ALLOCATED", n>>20, "MiB")
}
