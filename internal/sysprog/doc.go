// Package sysprog holds the programs of raw system calls that build and
// confine a sandbox, and the one-shot run that uses them.
//
// A program is a list of system calls fixed in advance (a builder makes
// it; program_linux.go runs it through sys6, the assembly stub per
// architecture), so that it can run where no Go code may: in a child
// forked, or vforked (vfork_linux_amd64.s), from a multithreaded process.
// The programs here build the sandbox's root ([SetUpRoot]: binds, a
// private /tmp, /proc and /dev), set its quotas and rlimits, and confine
// a process (Landlock, capabilities, seccomp: [Confine]). [RunOnce] runs
// one command in a fresh sandbox with no helper process at all;
// [ForkCommand] and [ReapUntil] start and reap a command for a helper,
// and [ReserveThreads] keeps a helper's Go runtime alive under the
// sandbox's process limit.
//
// Only the inside of a sandbox and the one-shot run use this package; the
// host's tiers reach RunOnce through package helper.
package sysprog
