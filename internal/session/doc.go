// Package session holds the helper roles of an isolated tier's session,
// each run by hutch's own binary re-executed with argv[0] set to the
// role's name (see package boundary):
//
//   - [InitMain], the session's init: it builds the sandbox's root,
//     bridges its network to the host's proxy, and serves the host's
//     requests (files through package hostfs, commands) over the wire
//     protocol;
//   - [RunnerMain], a runner that stays confined and starts the session's
//     commands one after another;
//   - [ExecMain], the exec helper that confines itself and starts one
//     command.
//
// Package helper's Main dispatches to them. [FindProgram], [ReadLimits],
// [CPUHalfUsed] and [CloseFiles] are shared with the container's helper.
package session
