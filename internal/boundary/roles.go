package boundary

// The argv[0] values that select a helper role. They cannot be confused
// with a real invocation: no program is started with these names.
const (
	InitName   = "hutch-sandbox-init"
	ExecName   = "hutch-sandbox-exec"
	RunnerName = "hutch-sandbox-runner"
)

// ContainerHelperName is the argv[0] base name that selects a container
// helper role.
const ContainerHelperName = "hutch-helper"

// HelperEnv is the whole environment hutch gives its own processes in a
// sandbox (a session's init, runners, exec helpers). It stops the Go
// runtime's cgroup CPU-limit reader, which otherwise opens the host's
// cpu.cfs_quota_us and cpu.cfs_period_us at start (before the init
// changes root) and keeps them open for the life of the process: no
// descriptor opened on the host may live on inside. Their GOMAXPROCS is
// then the CPUs they may run on.
var HelperEnv = []string{"GODEBUG=containermaxprocs=0,updatemaxprocs=0"}
