// Package boundary holds what hutch's host side and the inside of a
// sandbox agree on, besides the wire protocols (package wire): the
// argv[0] names that select a helper role ([InitName], [ExecName],
// [RunnerName], [ContainerHelperName]) and the environment the helpers
// get ([HelperEnv]); the descriptor numbers files are passed at
// ([CmdGroupFD], [CountFD], [ExecStderrFD], [NetFD]); the commands'
// control group ([CommandGroup], [CgroupFiles]); the resource limits a
// sandbox gets ([Rlimits], [CheckHardLimits], [SandboxQuotas],
// [CommandLimits]); the namespaces of an isolated sandbox ([CloneFlags]);
// and what tells one process from another ([PIDNamespace],
// [ProcessStart]).
//
// It imports neither side: the host's tiers and the helpers both import
// it.
package boundary
