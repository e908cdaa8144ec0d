package permission

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Status is where an approval request stands.
type Status string

// The statuses. A request is pending until a human decides it; an approved
// or denied request is "open" until the matching call claims it, and then
// it is used (approved) or closed (denied): each decision covers one call.
// A decision no call claimed within the store's decision TTL is expired:
// the next identical call is a new pending request.
const (
	StatusPending  Status = "pending"
	StatusApproved Status = "approved"
	StatusDenied   Status = "denied"
	StatusUsed     Status = "used"
	StatusClosed   Status = "closed"
	StatusExpired  Status = "expired"
)

// DefaultDecisionTTL is how long a decision waits for its call: a "yes"
// given for a call made now does not cover the same call a week later.
const DefaultDecisionTTL = 24 * time.Hour

// Approval is one stored request.
type Approval struct {
	ID         string     `json:"id"`
	Capability Capability `json:"capability"`
	Detail     string     `json:"detail"`
	Tool       string     `json:"tool"`
	// Arguments are the call's canonical arguments, for the person
	// deciding; ArgumentsBytes is set when they were over
	// MaxStoredArguments, and Arguments is then a JSON string of their
	// start, their length and a SHA-256 prefix. (The approval binds to
	// all of them either way: Key.) Detail is likewise cut at
	// MaxAuditText bytes.
	Arguments      json.RawMessage `json:"arguments"`
	ArgumentsBytes int             `json:"arguments_bytes,omitempty"`
	Scope          string          `json:"scope"`
	CreatedAt      time.Time       `json:"created_at"`
	Status         Status          `json:"status"`
	DecidedAt      *time.Time      `json:"decided_at,omitempty"`
	ClaimedAt      *time.Time      `json:"claimed_at,omitempty"`
	Key            string          `json:"key"` // capability, tool and canonical arguments, hashed
	// DecidedBy names who approved or denied the request (see DecideAs).
	DecidedBy string `json:"decided_by,omitempty"`
}

// MaxOpen bounds the requests waiting in a store (pending, or decided and
// not yet used): an agent cannot grow the file without end by asking.
const MaxOpen = 1000

// MaxStoredArguments bounds the arguments a request keeps whole for the
// person deciding (see Approval.Arguments; of longer ones it keeps the
// first MaxAuditText bytes): at most MaxOpen requests wait, so a store's
// open requests hold some 64 MiB of arguments at most.
const MaxStoredArguments = 64 << 10

// ErrTooManyOpen: MaxOpen requests are waiting; a new one is refused until
// a person decides some (hutch approvals list / deny).
var ErrTooManyOpen = fmt.Errorf("%d approval requests are already waiting: decide or deny some (hutch approvals list) before asking again", MaxOpen)

// ErrNoApproval: no request has that id.
var ErrNoApproval = errors.New("no such approval request")

// ErrDecided: the request was already decided.
var ErrDecided = errors.New("approval request already decided")

// Store keeps approval requests in an SQLite database file (modernc.org/sqlite,
// pure Go, rollback journal, no memory map). Each operation opens the
// file, runs one transaction and closes it, so several processes (an MCP
// server and "hutch approvals approve") can share it, a restart loses
// nothing, and a file moved aside is never written again. It is safe for
// concurrent use; operations on one file in one process run one at a time.
//
// A damaged, replaced, emptied or missing file is an error naming the
// file, what is wrong and the fix (ErrStoreDamaged), never a crash and
// never a silent new store; a file another process keeps locked is
// ErrStoreLocked after lockWait, naming that process where /proc/locks
// does. What it does not do: detect a record rewritten into other valid
// JSON (whoever may write the file may approve requests: CheckPrivate).
type Store struct {
	path string
	ttl  time.Duration // 0: decisions never expire
	turn chan struct{} // this process's turn at the file (storeTurn)
}

// SetDecisionTTL sets how long after it is made a decision covers its
// call (DefaultDecisionTTL unless set); 0 means decisions never expire.
// Set it before the store is shared: it is not safe to call concurrently
// with Claim. Errors match ErrConfig.
func (s *Store) SetDecisionTTL(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: decision TTL %v is negative: give a duration, or 0 for decisions that never expire", ErrConfig, d)
	}
	s.ttl = d
	return nil
}

// OpenStore opens the store at path, creating it when no file is there,
// and checks it is one (a hutch approval store, whole). Errors match
// ErrConfig, and also ErrStoreDamaged or ErrStoreLocked.
func OpenStore(path string) (*Store, error) {
	return openStore(path, true)
}

// OpenExistingStore is OpenStore for a store that must already exist (the
// approving side): a mistyped path is an error, not a new empty store,
// and nothing is written to open it, so it opens on a read-only
// filesystem (List and Get read only; Decide writes).
func OpenExistingStore(path string) (*Store, error) {
	return openStore(path, false)
}

func openStore(path string, create bool) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: approval store path is empty", ErrConfig)
	}
	s := &Store{path: path, ttl: DefaultDecisionTTL, turn: storeTurn(path)}
	if create {
		if err := s.create(); err != nil {
			return nil, err
		}
	}
	// Every page read once: a damaged store is found when it is opened,
	// not by a call that needs it later.
	if err := s.view(context.Background(), func(tx *sql.Tx) error { return integrity(tx, "quick_check") }); err != nil {
		return nil, err
	}
	return s, nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// RequestKey binds a request to its capability, tool, scope, arguments
// and, for an escalation, the sandbox it names. The
// arguments are canonicalized (object keys sorted, insignificant space
// dropped) so the same call always has the same key.
func RequestKey(req Request) (string, error) {
	args, err := canonicalJSON(req.Args)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	parts := [][]byte{[]byte(req.Capability), []byte(req.Tool), []byte(req.Scope), args}
	if req.Escalation != "" {
		// Only escalations name a sandbox: every other key stays as it was.
		parts = append(parts, []byte("escalation"), []byte(req.Escalation), []byte(req.EscalationPolicy))
	}
	for _, part := range parts {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func canonicalJSON(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("null"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("arguments are not JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("arguments hold more than one JSON value")
	}
	return json.Marshal(v)
}

// Claim looks up the request's open record and consumes it: an approved
// record is marked used and StatusApproved returned; a denied one is
// closed and StatusDenied returned; a pending one returns StatusPending
// and its id; with none, a new pending request is created. All in one
// transaction, so one approval lets exactly one call through even with
// concurrent callers in several processes.
func (s *Store) Claim(ctx context.Context, req Request) (Status, string, error) {
	a, _, err := s.claim(ctx, req)
	return a.Status, a.ID, err
}

// claim is Claim returning the request as it was found (for a decided
// one, its status before the claim), and the decision that expired
// unused (with the status it was decided with, approved or denied), when
// that is why a new request was made (nil otherwise).
func (s *Store) claim(ctx context.Context, req Request) (found Approval, lapsed *Approval, err error) {
	key, err := RequestKey(req)
	if err != nil {
		return Approval{}, nil, err
	}
	args, _ := canonicalJSON(req.Args)
	// The asking side makes the store again when its file is gone (moved
	// aside after damage): an empty store approves nothing.
	if err := s.create(); err != nil {
		return Approval{}, nil, err
	}
	err = s.update(ctx, func(tx *sql.Tx) error {
		now := time.Now().UTC()
		id, err := openID(tx, key)
		if err != nil {
			return err
		}
		if id != "" {
			a, err := getApproval(tx, id)
			if err != nil {
				return err
			}
			found = a
			if a.Status != StatusApproved && a.Status != StatusDenied {
				return nil // still pending
			}
			expired := s.ttl > 0 && now.Sub(decidedAt(a)) > s.ttl
			decided := a // as it was decided, for the audit of an expiry
			switch {
			case expired:
				a.Status = StatusExpired
			case a.Status == StatusApproved:
				a.Status = StatusUsed
			default:
				a.Status = StatusClosed
			}
			if !expired {
				a.ClaimedAt = &now
			}
			if err := putApproval(tx, a); err != nil {
				return err
			}
			if _, err := tx.Exec(`DELETE FROM open_keys WHERE key = ?`, key); err != nil || !expired {
				return err
			}
			// An expired decision covers nothing: the call asks anew.
			lapsed = &decided
		}
		if n, err := pendingCount(tx); err != nil {
			return err
		} else if n >= MaxOpen {
			return ErrTooManyOpen
		}
		newID, err := newID(tx)
		if err != nil {
			return err
		}
		a := Approval{ID: newID, Capability: req.Capability, Detail: Shorten(req.Detail, MaxAuditText), Tool: req.Tool,
			Arguments: args, Scope: req.Scope, CreatedAt: now, Status: StatusPending, Key: key}
		if len(args) > MaxStoredArguments {
			a.Arguments, _ = json.Marshal(Shorten(string(args), MaxAuditText))
			a.ArgumentsBytes = len(args)
		}
		found = a
		if err := putApproval(tx, a); err != nil {
			return err
		}
		_, err = tx.Exec(`INSERT INTO open_keys (key, id) VALUES (?, ?)`, key, a.ID)
		return err
	})
	if err != nil {
		return Approval{}, nil, err
	}
	return found, lapsed, nil
}

// decidedAt is when a was decided; for a record without its decision
// time, when it was requested.
func decidedAt(a Approval) time.Time {
	if a.DecidedAt != nil {
		return *a.DecidedAt
	}
	return a.CreatedAt
}

// Decide approves or denies the pending request id, recording this
// process's user (CurrentUser) as the one who decided.
func (s *Store) Decide(ctx context.Context, id string, approve bool) (Approval, error) {
	return s.DecideAs(ctx, id, approve, "")
}

// DecideAs is Decide for a caller that knows who decided better than the
// operating system does (a web front end's signed-in person): by is
// recorded in the request and, when the call claims it, in the audit log.
// An empty by records CurrentUser.
func (s *Store) DecideAs(ctx context.Context, id string, approve bool, by string) (Approval, error) {
	if strings.TrimSpace(by) == "" {
		by = CurrentUser()
	}
	var out Approval
	err := s.update(ctx, func(tx *sql.Tx) error {
		a, err := getApproval(tx, id)
		if err != nil {
			return err
		}
		if a.Status != StatusPending {
			return fmt.Errorf("%w: %s is %s", ErrDecided, id, a.Status)
		}
		now := time.Now().UTC()
		a.DecidedAt, a.DecidedBy = &now, by
		a.Status = StatusDenied
		if approve {
			a.Status = StatusApproved
		}
		out = a
		return putApproval(tx, a)
	})
	return out, err
}

// CurrentUser names this process's user for the record of a decision:
// "alice (uid 1000)", or "uid 1000" when the name cannot be looked up.
func CurrentUser() string {
	uid := strconv.Itoa(os.Getuid())
	if u, err := user.LookupId(uid); err == nil && u.Username != "" {
		return fmt.Sprintf("%s (uid %s)", u.Username, uid)
	}
	return "uid " + uid
}

// Get returns one request. It only reads the file.
func (s *Store) Get(ctx context.Context, id string) (Approval, error) {
	var out Approval
	err := s.view(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = getApproval(tx, id)
		return err
	})
	return out, err
}

// List returns the requests with one of the given statuses (all when none
// are given), oldest first. It only reads the file.
func (s *Store) List(ctx context.Context, statuses ...Status) ([]Approval, error) {
	out := []Approval{}
	err := s.view(ctx, func(tx *sql.Tx) error {
		return eachApproval(tx, func(a Approval) error {
			if len(statuses) == 0 || slices.Contains(statuses, a.Status) {
				out = append(out, a)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b Approval) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// eachApproval calls fn with every stored request, in no set order; a
// record that does not decode is ErrRecordDamaged.
func eachApproval(tx *sql.Tx, fn func(Approval) error) error {
	rows, err := tx.Query(`SELECT id, record FROM approvals`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var v []byte
		if err := rows.Scan(&id, &v); err != nil {
			return err
		}
		a, err := decodeApproval(id, v)
		if err != nil {
			return err
		}
		if err := fn(a); err != nil {
			return err
		}
	}
	return rows.Err()
}

// openID is the id of key's open request ("" when none).
func openID(tx *sql.Tx, key string) (string, error) {
	var id string
	err := tx.QueryRow(`SELECT id FROM open_keys WHERE key = ?`, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// pendingCount counts the open requests still waiting for a person. Only
// those count towards MaxOpen: a decided one waits for its call, and the
// person who decided it has done what ErrTooManyOpen asks. Below MaxOpen
// open keys it does not look further.
func pendingCount(tx *sql.Tx) (int, error) {
	var open int
	if err := tx.QueryRow(`SELECT count(*) FROM open_keys`).Scan(&open); err != nil || open < MaxOpen {
		return open, err
	}
	rows, err := tx.Query(`SELECT o.id, a.record FROM open_keys o LEFT JOIN approvals a ON a.id = o.id`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		var v []byte
		if err := rows.Scan(&id, &v); err != nil {
			return 0, err
		}
		if a, err := decodeApproval(id, v); err != nil || a.Status == StatusPending {
			n++ // an unreadable one counts as waiting
		}
	}
	return n, rows.Err()
}

func getApproval(tx *sql.Tx, id string) (Approval, error) {
	var v []byte
	err := tx.QueryRow(`SELECT record FROM approvals WHERE id = ?`, id).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, fmt.Errorf("%w: %q", ErrNoApproval, id)
	}
	if err != nil {
		return Approval{}, err
	}
	return decodeApproval(id, v)
}

// decodeApproval decodes request id's record, which must name id.
func decodeApproval(id string, v []byte) (Approval, error) {
	var a Approval
	if err := json.Unmarshal(v, &a); err != nil {
		return Approval{}, &recordError{id: id, err: err}
	}
	if a.ID != id {
		return Approval{}, &recordError{id: id, err: fmt.Errorf("the record names request %q", a.ID)}
	}
	return a, nil
}

func putApproval(tx *sql.Tx, a Approval) error {
	v, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = tx.Exec(`INSERT INTO approvals (id, record) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET record = excluded.record`, a.ID, v)
	return err
}

// newID is a random, unused request id: 12 lowercase hex characters.
func newID(tx *sql.Tx) (string, error) {
	for {
		var r [6]byte
		_, _ = rand.Read(r[:])
		id := hex.EncodeToString(r[:])
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM approvals WHERE id = ?`, id).Scan(&n); err != nil || n == 0 {
			return id, err
		}
	}
}
