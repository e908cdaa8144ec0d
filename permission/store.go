package permission

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
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

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/hutchsandbox/hutch/sandbox"
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

var (
	bucketByID = []byte("approvals")
	bucketOpen = []byte("open") // key -> id of the one undecided or unclaimed request
)

// Store keeps approval requests in an embedded database file (bbolt). Each
// operation opens the file, runs one transaction and closes it, so several
// processes (an MCP server and "hutch approvals approve") can share it; a
// restart loses nothing. It is safe for concurrent use.
type Store struct {
	path string
	ttl  time.Duration // 0: decisions never expire
}

// SetDecisionTTL sets how long after it is made a decision covers its
// call (DefaultDecisionTTL unless set); 0 means decisions never expire.
// Set it before the store is shared: it is not safe to call concurrently
// with Claim. Errors match sandbox.ErrConfig.
func (s *Store) SetDecisionTTL(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: decision TTL %v is negative: give a duration, or 0 for decisions that never expire", sandbox.ErrConfig, d)
	}
	s.ttl = d
	return nil
}

// lockWait bounds how long an operation waits for another process's
// transaction.
const lockWait = 10 * time.Second

// OpenStore creates the database at path if needed and checks it can be
// used. Errors match sandbox.ErrConfig.
func OpenStore(path string) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: approval store path is empty", sandbox.ErrConfig)
	}
	if fi, err := os.Stat(path); err == nil {
		// Whoever may write the store may approve the agent's requests;
		// whoever may read it sees every command and content asked for.
		if err := sandbox.CheckPrivate("approval store", path, fi); err != nil {
			return nil, err
		}
	}
	s := &Store{path: path, ttl: DefaultDecisionTTL}
	err := s.update(context.Background(), func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketByID, bucketOpen} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		hint := ""
		if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrVersionMismatch) || errors.Is(err, berrors.ErrChecksum) {
			hint = " (not a hutch approval store, or a damaged one: move it aside or give another --store)"
		}
		return nil, fmt.Errorf("%w: approval store %s: %v%s", sandbox.ErrConfig, path, err, hint)
	}
	return s, nil
}

// OpenExistingStore is OpenStore for a store that must already exist (the
// approving side): a mistyped path is an error, not a new empty store.
func OpenExistingStore(path string) (*Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w: approval store %s: %v (give the --store path the server uses)", sandbox.ErrConfig, path, errors.Unwrap(err))
	}
	return OpenStore(path)
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

func (s *Store) open(ctx context.Context, readOnly bool) (*bolt.DB, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return bolt.Open(s.path, 0o600, &bolt.Options{Timeout: lockWait, ReadOnly: readOnly})
}

func (s *Store) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	db, err := s.open(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Update(fn)
}

func (s *Store) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	db, err := s.open(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(fn)
}

// RequestKey binds a request to its capability, tool, scope and arguments. The
// arguments are canonicalized (object keys sorted, insignificant space
// dropped) so the same call always has the same key.
func RequestKey(req Request) (string, error) {
	args, err := canonicalJSON(req.Args)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(req.Capability), []byte(req.Tool), []byte(req.Scope), args} {
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
	err = s.update(ctx, func(tx *bolt.Tx) error {
		byID, open := tx.Bucket(bucketByID), tx.Bucket(bucketOpen)
		if byID == nil || open == nil {
			return errors.New("store is not initialized")
		}
		now := time.Now().UTC()
		if v := open.Get([]byte(key)); v != nil {
			a, err := getApproval(byID, string(v))
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
			if err := putApproval(byID, a); err != nil {
				return err
			}
			if err := open.Delete([]byte(key)); err != nil || !expired {
				return err
			}
			// An expired decision covers nothing: the call asks anew.
			lapsed = &decided
		}
		if open.Stats().KeyN >= MaxOpen && pendingCount(byID, open) >= MaxOpen {
			return ErrTooManyOpen
		}
		a := Approval{ID: newID(byID), Capability: req.Capability, Detail: Shorten(req.Detail, MaxAuditText), Tool: req.Tool,
			Arguments: args, Scope: req.Scope, CreatedAt: now, Status: StatusPending, Key: key}
		if len(args) > MaxStoredArguments {
			a.Arguments, _ = json.Marshal(Shorten(string(args), MaxAuditText))
			a.ArgumentsBytes = len(args)
		}
		found = a
		if err := putApproval(byID, a); err != nil {
			return err
		}
		return open.Put([]byte(key), []byte(a.ID))
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
	err := s.update(ctx, func(tx *bolt.Tx) error {
		byID := tx.Bucket(bucketByID)
		if byID == nil {
			return ErrNoApproval
		}
		a, err := getApproval(byID, id)
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
		return putApproval(byID, a)
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

// Get returns one request.
func (s *Store) Get(ctx context.Context, id string) (Approval, error) {
	var out Approval
	err := s.view(ctx, func(tx *bolt.Tx) error {
		byID := tx.Bucket(bucketByID)
		if byID == nil {
			return ErrNoApproval
		}
		var err error
		out, err = getApproval(byID, id)
		return err
	})
	return out, err
}

// List returns the requests with one of the given statuses (all when none
// are given), oldest first.
func (s *Store) List(ctx context.Context, statuses ...Status) ([]Approval, error) {
	out := []Approval{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		byID := tx.Bucket(bucketByID)
		if byID == nil {
			return nil
		}
		return byID.ForEach(func(_, v []byte) error {
			var a Approval
			if err := json.Unmarshal(v, &a); err != nil {
				return err
			}
			if len(statuses) == 0 || slices.Contains(statuses, a.Status) {
				out = append(out, a)
			}
			return nil
		})
	})
	slices.SortFunc(out, func(a, b Approval) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, err
}

// pendingCount counts the open requests still waiting for a person. Only
// those count towards MaxOpen: a decided one waits for its call, and the
// person who decided it has done what ErrTooManyOpen asks.
func pendingCount(byID, open *bolt.Bucket) int {
	n := 0
	_ = open.ForEach(func(_, id []byte) error {
		if a, err := getApproval(byID, string(id)); err != nil || a.Status == StatusPending {
			n++ // an unreadable one counts as waiting
		}
		return nil
	})
	return n
}

func getApproval(b *bolt.Bucket, id string) (Approval, error) {
	v := b.Get([]byte(id))
	if v == nil {
		return Approval{}, fmt.Errorf("%w: %q", ErrNoApproval, id)
	}
	var a Approval
	if err := json.Unmarshal(v, &a); err != nil {
		return Approval{}, fmt.Errorf("approval %s is corrupt: %w", id, err)
	}
	return a, nil
}

func putApproval(b *bolt.Bucket, a Approval) error {
	v, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return b.Put([]byte(a.ID), v)
}

// newID is a random, unused request id: 12 lowercase hex characters.
func newID(b *bolt.Bucket) string {
	for {
		var r [6]byte
		_, _ = rand.Read(r[:])
		if id := hex.EncodeToString(r[:]); b.Get([]byte(id)) == nil {
			return id
		}
	}
}
