// Package tool holds the agent tools hutch offers — read_file, write_file,
// edit_file, glob, shell, run_code, fetch and web_search — each of which
// asks the permission gate first and then acts through the sandbox. [New]
// builds the set from [Options] (a sandbox, a gate, and optionally a
// [Fetcher], a search backend and [CodeOptions]).
//
// run_code runs each call in a fresh sandbox built from a declared policy,
// with a fresh run directory whose written files come back; a call may ask
// for a wider, named sandbox with a reason, and runs there only after a
// person approved that one call (see [CodeOptions] and docs/code.md).
//
// Tools never fail the agent loop: escapes, missing files, timeouts and
// denials come back as an [Output] with IsError set and a clear message. The
// one exception is a call waiting for a human in approve mode, which
// returns an error matching permission.ErrApprovalRequired so the caller
// can suspend and resume. A setting that cannot be used (a bad fetch rule,
// say) is an error matching [ErrConfig].
package tool
