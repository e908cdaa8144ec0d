package session

import (
	"fmt"

	"github.com/hutchsandbox/hutch/internal/boundary"
	"github.com/hutchsandbox/hutch/internal/sysprog"
	"github.com/hutchsandbox/hutch/internal/wire"
	"github.com/hutchsandbox/hutch/policy"
)

// InitMain is PID 1 of the sandbox's new user, mount, PID, IPC, UTS and
// (unless the network is "all") network namespaces. It reads the "start"
// request on its socket (fd 3), builds the sandbox's filesystem view from
// the policy, then serves file operations and commands until the host
// closes the socket or kills it. When it exits the kernel kills whatever
// is left in the PID namespace.
func InitMain() int {
	// The control socket (closeInheritedOnExec, run by Main, marked it)
	// must never reach a command the init starts, nor through /proc; and
	// PID 1 of the sandbox (the starter of a one-shot run's command, too)
	// must not die of a command's signal.
	unreachable()
	conn := wire.NewConn(3)
	req, ok := recvStart(conn)
	if !ok {
		return 1
	}
	job := *req.Job
	fail := func(w *wire.WireError) int {
		_ = conn.Send(wire.Response{ID: req.ID, Err: w})
		return 1
	}
	unsupported := func(err error) *wire.WireError {
		return &wire.WireError{Kind: "unsupported", Msg: "building the sandbox: " + err.Error()}
	}
	// Looked at before the root is built, on the host's files: without
	// the supervisor, every protected path must then be there to be
	// mounted read-only (SetUpRoot fails otherwise).
	supervised := sysprog.NeedsSupervision(job.Policy)
	if err := sysprog.SetUpRoot(job.Policy, job.Quotas, job.HiddenProc, supervised); err != nil {
		return fail(unsupported(err))
	}
	if supervised {
		sup, err := startSupervisor(job.Policy)
		if err != nil {
			return fail(unsupported(err))
		}
		supervisorPeer = sup.peer
	}
	if job.Policy.Network == policy.NetworkAllow {
		// Listening before the sandbox is reported ready: no command can
		// take the port first.
		ls, err := listenProxy()
		if err != nil {
			return fail(unsupported(err))
		}
		bridge(wire.NewConn(boundary.NetFD), ls)
	}
	s, err := newServer(conn, job)
	if err != nil {
		return fail(wire.ToWire(fmt.Errorf("building the sandbox: %w", err)))
	}
	if err := conn.Send(wire.Response{ID: req.ID}); err != nil {
		return 1
	}
	s.serve()
	return 0
}
