// Package permission is hutch's gate: it decides what an agent's tools may
// do, independently of where they act (package sandbox). A tool asks its
// [Gate] before it acts, with a [Request] naming the [Capability] (read,
// glob, write, shell, fetch, search), the tool and the arguments; the
// [Decision] says whether it may.
//
// # Modes
//
// A Gate has a [Mode]:
//
//   - [ReadOnly] (the default): read and glob are allowed; every other
//     capability is denied.
//   - [Auto]: everything is allowed.
//   - [Ask]: each privileged action is put to an [Asker] (a callback); an
//     optional AskWhen predicate ([Config]) narrows which actions ask, the
//     rest being allowed without asking. No Asker means deny.
//   - [Approve]: an undecided action becomes a pending request stored
//     durably in a [Store]; a human approves or denies it later; an
//     approval covers exactly one future call with the same capability,
//     tool and arguments, once.
//
// An allow list adds capabilities in every mode. Unknown capabilities are
// denied in every mode but Auto (fail closed).
//
// # Rules
//
// [Config].Rules ([Rules], implemented by package permission/rules)
// decide a request before the mode: the strictest matching rule wins; a
// deny denies in every mode, an allow allows in every mode (never a Code
// escalation), an ask goes to a person (the Store in Approve mode, else
// the Asker, else the Store; denied with neither). A request no rule
// matches is decided by the mode. [Decision].Rule and the audit line
// name the rule. Requests carry what rules match: Paths, Recursive,
// Command, Host.
//
// # Escalations
//
// [Code] is running code in a declared sandbox. A call in its default
// sandbox is allowed in every mode. A call naming a wider sandbox
// (Request.Escalation) is decided by a person in every mode — the Asker in
// Ask, the Store in Approve; Auto and ReadOnly refuse it, and no allow list
// can hold code — and [Gate.Confirm], the last check before the run,
// requires this gate's own decision on exactly that request, once
// ([ErrNotApproved] otherwise).
//
// # Errors
//
// A denial is an ordinary Decision the agent sees; only "approval
// required" is an error ([*ApprovalRequiredError], matching
// [ErrApprovalRequired]), so a caller can suspend and resume. A setting
// that cannot be used — an unknown mode, a damaged or locked store, an
// audit log open to others — is an error matching [ErrConfig] (and
// [ErrStoreDamaged] or [ErrStoreLocked] for the store), one line naming
// the file and the fix.
//
// # Store and audit log
//
// The [Store] is one SQLite file, opened for each operation and closed
// after it, so several processes can share it and a file moved aside is
// never written again. Every decision can be appended to an [AuditLog], a
// JSON-lines file only this user can read.
package permission
