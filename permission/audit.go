package permission

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/internal/private"
	"golang.org/x/sys/unix"
)

// AuditEntry is one decision, written as one JSON line.
type AuditEntry struct {
	Time       time.Time  `json:"time"`
	Capability Capability `json:"capability"`
	Detail     string     `json:"detail,omitempty"`
	Tool       string     `json:"tool,omitempty"`
	Mode       Mode       `json:"mode"`
	// Outcome is "allowed", "denied", "approval_required" or "asking" (an
	// Asker deferred; the call comes again with the answer), or, for an
	// escalated run_code call, "run" or "refused" (Gate.Confirm). A person's
	// decision on a pending request (RecordDecided) is "approved" or
	// "denied", by "person". A decision no call used within the store's
	// decision TTL is "expired" (ApprovalID and DecidedBy name it), on a
	// line of its own before the new request its call then makes.
	Outcome    string `json:"outcome"`
	By         string `json:"by"`
	ApprovalID string `json:"approval_id,omitempty"`
	// DecidedBy names the person who decided ApprovalID.
	DecidedBy string `json:"decided_by,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Sandbox names the sandbox an escalated run_code call asked for (on
	// its asking, decision, and "run" or "refused" lines).
	Sandbox string `json:"sandbox,omitempty"`
	// Rule names the rule that decided the call, or sent it to a person:
	// where it is written and its text ("rules.yaml:4: deny shell rm -rf *").
	Rule string `json:"rule,omitempty"`
}

// MaxAuditText bounds an audit line's Detail and Reason, in bytes.
const MaxAuditText = 4096

// AuditLog appends entries to a file, one JSON object per line. Each entry
// is written with a single append under an exclusive flock, so lines from
// several processes sharing the file do not interleave, and one a full
// disk cuts short is undone before another process writes. It is safe
// for concurrent use.
type AuditLog struct {
	mu sync.Mutex
	f  *os.File
}

// OpenAudit opens (creating with mode 0600) the log at path for appending
// (and reading its last byte, see Record).
func OpenAudit(path string) (*AuditLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600) // read: how the file ends
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	// A log others may write can be rewritten after the fact.
	fi, err := f.Stat()
	if err == nil {
		err = private.Check(ErrConfig, "audit log", path, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &AuditLog{f: f}, nil
}

// Record appends e, its Detail and Reason cut to MaxAuditText bytes each
// (see Shorten): no call makes a line of megabytes. The line is written
// whole or not at all: a write that fails or comes out short (a full
// disk) is undone and returned, so every line of the log parses.
func (a *AuditLog) Record(e AuditEntry) error {
	e.Detail, e.Reason = Shorten(e.Detail, MaxAuditText), Shorten(e.Reason, MaxAuditText)
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return os.ErrClosed
	}
	return appendLine(a.f, line)
}

// appendLine appends line (ending in a newline) to f whole or not at all,
// so that every line of the file parses. Under an exclusive flock, which
// every hutch writing the file takes, it reads where the file ends; a
// file that ends without a newline (a writer that crashed mid-line before
// this rule) gets one first, so the line starts fresh. A write that fails
// or comes out short (a full disk) is cut off again, back to where the
// file ended, and is the error.
func appendLine(f *os.File, line []byte) error {
	fd := int(f.Fd())
	// Best effort: a filesystem without locks still gets the repair, only
	// not against writers in other processes.
	if unix.Flock(fd, unix.LOCK_EX) == nil {
		defer unix.Flock(fd, unix.LOCK_UN)
	}
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	end := fi.Size()
	if end > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, end-1); err == nil && last[0] != '\n' {
			line = append([]byte{'\n'}, line...)
		}
	}
	_, err = f.Write(line)
	if err == nil {
		return nil
	}
	if terr := f.Truncate(end); terr != nil {
		return fmt.Errorf("audit log: %w, and the partial line could not be removed (%v): remove the last line of %s by hand", err, terr, f.Name())
	}
	return fmt.Errorf("audit log: %w (nothing written; free space and retry)", err)
}

// RecordDecided appends a person's decision on a pending request, as
// Store.Decide returned it. The call the decision covers is recorded
// again, by the gate, when it claims the decision.
func (a *AuditLog) RecordDecided(ap Approval) error {
	if ap.Status != StatusApproved && ap.Status != StatusDenied {
		return fmt.Errorf("approval %s is %s, not a decision", ap.ID, ap.Status)
	}
	t := time.Now().UTC()
	if ap.DecidedAt != nil {
		t = *ap.DecidedAt
	}
	return a.Record(AuditEntry{
		Time:       t,
		Capability: ap.Capability,
		Detail:     ap.Detail,
		Tool:       ap.Tool,
		Mode:       Approve,
		Outcome:    string(ap.Status),
		By:         "person",
		ApprovalID: ap.ID,
		DecidedBy:  ap.DecidedBy,
	})
}

// Close closes the file; later Records fail.
func (a *AuditLog) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}
