// Package isolated is hutch's kernel-isolated tier on Linux: commands and
// file operations run under a [policy.Policy] that the kernel enforces,
// in layers that each hold on their own. It implements the
// [sandbox.Sandbox] contract.
//
// # Opening
//
// [New] starts a session: a sandbox's init holds the namespaces and serves
// file operations and commands over one socket, so later operations skip
// the setup; [Sandbox.Close] kills the init and everything in it. [Run]
// builds a sandbox for one command and tears it down: no helper process,
// the sandbox's PID 1 runs only raw system calls (package
// internal/sysprog), which makes it the fastest way to run one command.
// The program using this package must call [helper.Main] at the start of
// main (and of TestMain): the init and exec helpers are this same binary.
//
// # Layers
//
//   - new user, mount, PID, IPC, UTS and (unless the network is "all")
//     network namespaces;
//   - a new root made only of the policy's paths (read-only or writable
//     binds, denied paths masked), a fresh /proc, a minimal /dev and a
//     private /tmp;
//   - a Landlock ruleset mirroring the policy (best effort by kernel ABI);
//   - a seccomp filter refusing ptrace, mounts, namespaces, keyrings, bpf,
//     perf events, modules, kexec, userfaultfd, io_uring, and unix, packet
//     and raw sockets;
//   - no_new_privs and every capability dropped;
//   - resource limits and priority, with a control group of the sandbox's
//     own when the host delegates one.
//
// [Layers] reports which of them this host has; [Supported] says whether
// it can build a sandbox at all, naming the missing feature and the fix.
// A host that lacks a required layer gets [sandbox.ErrUnsupported], never
// weaker isolation.
//
// # Commands
//
// Every command runs in a PID namespace of its own: when it ends, times
// out or is cancelled, everything it started ends too, daemons included.
// Its environment is the policy's (by default PATH, HOME and LANG) plus
// [sandbox.Command].Env: nothing of hutch's own environment reaches it.
//
// # Files
//
// File operations act inside the sandbox's view, under the same policy as
// commands: a path the policy does not show does not exist there, and one
// it does not let the sandbox write cannot be written. Relative paths
// resolve at the policy's start directory ([Sandbox.Root]).
//
// # Network
//
// A policy's network is none (loopback only), all (the host's) or an
// allow-list of hosts and ports, reached through a proxy on the host that
// resolves the names itself ([Options].Resolver) and refuses everything
// else, at most [MaxProxyConns] connections at once. An allow-list needs a
// session; [Run] opens one for it.
//
// # Limitations
//
// Linux only (5.12 or later for one-shot runs). Per-user kernel counts
// (inotify watches, message queues, pending signals, locked memory) are
// shared with the host user hutch runs as; a sandbox gets a share of
// each. The full model, with what each layer does and does not stop, is
// in docs/isolated.md and docs/security.md.
package isolated
