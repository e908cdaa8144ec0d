// Package tool holds the agent tools hutch offers — read_file, write_file,
// edit_file, glob, shell, fetch and web_search — each of which asks the
// permission gate first and then acts through the sandbox. [New] builds the
// set from [Options] (a sandbox, a gate, and optionally a [Fetcher] and a
// search backend).
//
// Tools never fail the agent loop: escapes, missing files, timeouts and
// denials come back as an [Output] with IsError set and a clear message. The
// one exception is a call waiting for a human in approve mode, which
// returns an error matching permission.ErrApprovalRequired so the caller
// can suspend and resume. A setting that cannot be used (a bad fetch rule,
// say) is an error matching [ErrConfig].
package tool
