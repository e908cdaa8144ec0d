// Package prefault makes the start of the hutch binary cheaper by mapping,
// with one system call each, the memory the process is about to fault in
// page by page. Importing it for its side effect is all there is to it:
//
//	import _ "github.com/hutchsandbox/hutch/internal/prefault"
//
// # Why
//
// hutch runs in Firecracker VMs where a page fault costs ~12-30 µs. There
// madvise(MADV_POPULATE_WRITE) maps a page for ~1.1 µs, and its first
// touch then still costs ~7 µs (the hypervisor's share): prefaulting
// halves, rather than removes, the cost of each page it maps, and costs
// ~1.1 µs for each page it maps that is never used. Every process start —
// the CLI (hutch run, hutch mcp) and each of its helper roles — took
// ~540 page faults, ~310 of them in the Go heap and ~70 in the program's
// text. Measured on such a VM, the same binary with and without
// (perf stat -r 100, hutch version): 16.9 → 15.1 ms elapsed, 540 → 280-390
// page faults; an isolated MCP session's start and end (the CLI and the
// sandbox's init helper): 54.9 → 50.8 ms median. It adds 1.2-1.9 MiB to a
// process's RSS (~1.2 MiB of heap, ~0.5 MiB of shared text pages): well
// under the ~4 MiB that would make it worth skipping in the helper roles,
// which run under sandboxes' memory limits, so they keep it (the CLI
// alone gets 2 of the 4 ms above). Populating 4 or 8 MiB of heap instead
// of 2 was no faster; populating the read-only data (+2.5 MiB RSS), or
// the data and bss segments (which the runtime touches before any package
// init runs), did not pay; touching the populated pages from a background
// goroutine was no faster on a busy two-CPU VM.
//
// # What it does
//
// Its init runs before almost every other package's (it imports only the
// runtime and syscall). It reads /proc/self/maps and:
//
//   - populates for writing 2 MiB of the Go heap from the frontier on,
//     clipped to the end of the heap mapping. The Go 1.26 runtime puts the
//     heap at a random address and starts it at a random page of its first
//     4 MiB chunk, so the bounds are looked up, not guessed; the frontier
//     is where a fresh 16 KiB allocation lands (an object of that size has
//     a span of its own, above what is in use). When the heap starts late
//     in its chunk, less is populated: the runtime maps the next chunk
//     only when it needs it, and mapping it replaces any page populated
//     there in advance;
//   - populates for reading the executable's text mapping (the one holding
//     this package's code), at most 64 MiB. Those pages are the binary's
//     own, in the page cache: mapping them takes page-table entries only.
//
// It relies on MADV_POPULATE_READ and MADV_POPULATE_WRITE (Linux 5.14),
// on /proc being mounted, on the maps format of Linux, and on the runtime
// never unmapping heap it has mapped.
//
// # Failure and opting out
//
// Every failure is ignored and leaves the process as it would have been
// without this package: an older kernel (EINVAL), no /proc, a memory limit
// reached while populating (ENOMEM: a populate is not a user fault and
// does not invoke the OOM killer), an unexpected maps line. It never
// panics. HUTCH_NO_PREFAULT=1 (any value but "" and "0") in a process's
// environment turns it off for that process; the helper roles started
// with a cleared environment do not see it.
package prefault
