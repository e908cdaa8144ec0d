package boundary

// CommandLimits are the resource limits the container helper sets on each
// command it starts, rather than the runtime on the whole container: hutch's
// own long-lived server must not live under them (a CPU-time limit would
// kill it once a session's output had cost it that much; an open-files
// limit small enough for a command leaves it no descriptors for the
// command's pipes). 0 means none.
type CommandLimits struct {
	CPUSeconds uint64 // RLIMIT_CPU soft; SIGKILL one second later
	OpenFiles  uint64 // RLIMIT_NOFILE, soft and hard
}
