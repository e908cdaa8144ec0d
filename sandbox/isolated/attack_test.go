package isolated_test

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary runs these inside the sandbox when HUTCH_ATTACK names
// one (see TestMain). Each prints what happened and "attack NAME done".
func init() {
	name := os.Getenv("HUTCH_ATTACK")
	if name == "" {
		return
	}
	args := os.Args[len(os.Args)-countArgs():]
	switch name {
	case "dial":
		attackDial(args[0], args[1])
	case "unix":
		attackUnix(args[0])
	case "syscalls":
		attackSyscalls()
	case "alloc":
		mib, _ := strconv.Atoi(args[0])
		attackAlloc(mib)
	}
	fmt.Printf("attack %s done\n", name)
	os.Exit(0)
}

// countArgs: the attack's own arguments follow "-test.run=^$".
func countArgs() int {
	for i, a := range os.Args {
		if a == "-test.run=^$" {
			return len(os.Args) - i - 1
		}
	}
	return 0
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

func attackUnix(path string) {
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
}

func attackSyscalls() {
	try := func(name string, err error) {
		if err != nil {
			fmt.Println(name, "BLOCKED", err)
		} else {
			fmt.Println(name, "ALLOWED")
		}
	}
	errno := func(_, _ uintptr, e unix.Errno) error {
		if e != 0 {
			return e
		}
		return nil
	}
	try("ptrace", unix.PtraceAttach(1))
	try("mount", unix.Mount("tmpfs", "/tmp", "tmpfs", 0, ""))
	try("unshare-user", unix.Unshare(unix.CLONE_NEWUSER))
	try("setns", errno(unix.Syscall(unix.SYS_SETNS, 0, 0, 0)))
	_, err := unix.KeyctlInt(unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0, 0, 0)
	try("keyctl", err)
	_, err = unix.AddKey("user", "hutch", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
	try("add_key", err)
	try("bpf", errno(unix.Syscall(unix.SYS_BPF, 0, 0, 0)))
	try("perf_event_open", errno(unix.Syscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0, 0)))
	try("init_module", errno(unix.Syscall(unix.SYS_INIT_MODULE, 0, 0, 0)))
	try("kexec_load", errno(unix.Syscall6(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0, 0, 0)))
	try("userfaultfd", errno(unix.Syscall(unix.SYS_USERFAULTFD, 0, 0, 0)))
	try("io_uring_setup", errno(unix.Syscall(unix.SYS_IO_URING_SETUP, 1, 0, 0)))
	try("clone-newuser", errno(unix.RawSyscall6(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)))
	_, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	try("socket-packet", err)
	_, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	try("socket-raw", err)
	try("chroot", unix.Chroot("/tmp"))
	try("pivot_root", unix.PivotRoot("/tmp", "/tmp"))
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
