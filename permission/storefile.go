package permission

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/hutchsandbox/hutch/internal/private"
)

// ErrStoreDamaged: the approval store's file is not a whole hutch approval
// store (truncated, emptied, overwritten, deleted, replaced by another
// file). The error names the file, what is wrong and the fix; errors
// matching it also match ErrConfig.
var ErrStoreDamaged = errors.New("approval store is damaged")

// ErrStoreLocked: another process held the approval store's lock for
// longer than an operation waits (lockWait). The error names that process
// when /proc/locks does; errors matching it also match ErrConfig.
var ErrStoreLocked = errors.New("approval store is locked")

// lockWait bounds how long an operation waits for another process's
// transaction (SQLite's busy timeout).
var lockWait = 10 * time.Second

// storeFormat marks a hutch approval store: SQLite's application_id
// ("hutc") and, in user_version, the version of the tables below.
const (
	storeAppID   = 0x68757463
	storeVersion = 1
)

// storeSchema makes a new store's tables. A record is an Approval's JSON;
// open_keys holds, per request key, the one request not yet decided or
// not yet claimed.
var storeSchema = fmt.Sprintf(`
PRAGMA application_id = %d;
PRAGMA user_version = %d;
CREATE TABLE approvals (id TEXT PRIMARY KEY NOT NULL, record BLOB NOT NULL);
CREATE TABLE open_keys (key TEXT PRIMARY KEY NOT NULL, id TEXT NOT NULL);
`, storeAppID, storeVersion)

// turns holds, per store file, the turn its operations in this process
// take one at a time: SQLite's locks (POSIX, per process) do not order a
// process's own connections, and a descriptor this package opens on the
// file for a diagnosis would drop them when it closes.
var turns sync.Map // absolute path -> chan struct{}

func storeTurn(path string) chan struct{} {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	t, _ := turns.LoadOrStore(path, make(chan struct{}, 1))
	return t.(chan struct{})
}

// dsn is the file's SQLite URI: never created by opening (mode rw or ro),
// never memory-mapped (a file truncated under a map is a SIGBUS), pages
// checked as they are read, writes taking the write lock as they begin.
func (s *Store) dsn(readOnly bool) string {
	q := url.Values{}
	q.Set("mode", "rw")
	if readOnly {
		q.Set("mode", "ro")
	} else {
		q.Set("_txlock", "immediate")
	}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", lockWait.Milliseconds()))
	q.Add("_pragma", "mmap_size(0)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "cell_size_check(1)")
	return (&url.URL{Scheme: "file", OmitHost: true, Path: s.path, RawQuery: q.Encode()}).String()
}

func (s *Store) update(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.do(ctx, false, fn)
}

func (s *Store) view(ctx context.Context, fn func(*sql.Tx) error) error {
	return s.do(ctx, true, fn)
}

// do runs fn in one transaction on a connection of its own, closed before
// it returns whatever happened: no descriptor or lock outlives an
// operation.
func (s *Store) do(ctx context.Context, readOnly bool, fn func(*sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.turn }()
	if err := s.checkFile(); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", s.dsn(readOnly))
	if err != nil {
		return s.explain(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: readOnly})
	if err != nil {
		return s.explain(err)
	}
	if err := checkFormat(tx); err != nil {
		_ = tx.Rollback()
		return s.explain(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return s.explain(err)
	}
	return s.explain(tx.Commit())
}

// checkFile refuses what is not a store's file before SQLite opens it: a
// missing file (SQLite would say "unable to open"), a directory, a file
// open to others, an empty one (SQLite would take it for a new database).
func (s *Store) checkFile() error {
	fi, err := os.Stat(s.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: approval store %s does not exist (moved or deleted?): give the --store path the server uses, or restore it from a backup (the server makes a new store when none is there)", ErrConfig, s.path)
	case err != nil:
		return fmt.Errorf("%w: approval store %s: %v", ErrConfig, s.path, errors.Unwrap(err))
	case fi.IsDir():
		return fmt.Errorf("%w: approval store %s is a directory: give a file path", ErrConfig, s.path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: approval store %s is not a regular file (%s): give a file path", ErrConfig, s.path, fi.Mode().Type())
	}
	// Whoever may write the store may approve the agent's requests;
	// whoever may read it sees every command and content asked for.
	if err := private.Check(ErrConfig, "approval store", s.path, fi); err != nil {
		return err
	}
	if fi.Size() == 0 {
		return s.damaged("the file is empty (0 bytes: truncated?)", s.fix())
	}
	return nil
}

// checkFormat refuses a database that is not a hutch approval store of
// this version.
func checkFormat(tx *sql.Tx) error {
	var app, version int64
	if err := tx.QueryRow(`PRAGMA application_id`).Scan(&app); err != nil {
		return err
	}
	if err := tx.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	switch {
	case app != storeAppID:
		return errNotAStore
	case version != storeVersion:
		return fmt.Errorf("%w: its format is version %d, and this hutch reads version %d: use the hutch that made it, or move it aside", errFormat, version, storeVersion)
	}
	return nil
}

var (
	errNotAStore = errors.New("not a hutch approval store")
	errFormat    = errors.New("unknown store format")
)

// recordError: a record of the store does not decode.
type recordError struct {
	id  string
	err error
}

func (e *recordError) Error() string {
	return fmt.Sprintf("request %s's record is damaged (%v)", e.id, e.err)
}
func (e *recordError) Unwrap() error { return e.err }

// fix is what to do about a damaged store.
func (s *Store) fix() string {
	return "restore it from a backup, or move it aside to start an empty one (hutch approvals check --store " + s.path + " says what is wrong)"
}

// notStoreFix is what to do about a file that is not a store at all.
const notStoreFix = "if it was the store, restore it from a backup; otherwise give another --store, or move this file aside to start an empty store there"

func (s *Store) damaged(what, fix string) error {
	return &storeError{kind: ErrStoreDamaged, msg: fmt.Sprintf("approval store %s is damaged: %s: %s", s.path, what, fix)}
}

// storeError is an error of the store's file: it matches kind
// (ErrStoreDamaged, ErrStoreLocked) and ErrConfig, and reads as
// msg alone.
type storeError struct {
	kind error
	msg  string
}

func (e *storeError) Error() string { return e.msg }

func (e *storeError) Is(target error) bool { return target == e.kind || target == ErrConfig }

// explain turns an SQLite failure into a one-line error naming the file,
// what is wrong and the fix; errors of this package's own (ErrNoApproval,
// ErrDecided, ErrTooManyOpen) and the context's pass unchanged.
func (s *Store) explain(err error) error {
	if err == nil || errors.Is(err, ErrNoApproval) || errors.Is(err, ErrDecided) || errors.Is(err, ErrTooManyOpen) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrConfig) {
		return err
	}
	var found *sqliteDamage
	if errors.As(err, &found) {
		return s.damaged("SQLite's check found: "+Printable(found.what), s.fix())
	}
	var rec *recordError
	if errors.As(err, &rec) {
		return s.damaged(rec.Error(), s.fix())
	}
	if errors.Is(err, errNotAStore) {
		return s.damaged(s.whatFile(), notStoreFix)
	}
	if errors.Is(err, errFormat) {
		return fmt.Errorf("%w: approval store %s: %v", ErrConfig, s.path, err)
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("approval store %s: %w", s.path, err)
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CORRUPT:
		return s.damaged("the database is damaged ("+se.Error()+")", s.fix())
	case sqlite3.SQLITE_NOTADB:
		return s.damaged(s.whatFile(), notStoreFix)
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		who := "another process"
		if pid := lockHolder(s.path); pid > 0 {
			who = fmt.Sprintf("process %d%s", pid, processName(pid))
		}
		return &storeError{kind: ErrStoreLocked, msg: fmt.Sprintf("approval store %s is locked: it is held by %s for longer than %v: wait for it to finish, or stop it", s.path, who, lockWait)}
	case sqlite3.SQLITE_READONLY:
		return fmt.Errorf("%w: approval store %s cannot be written (%v): deciding and asking need a writable file and directory", ErrConfig, s.path, se)
	case sqlite3.SQLITE_FULL:
		return fmt.Errorf("approval store %s: the disk is full (%v): nothing was changed; free space and try again", s.path, se)
	case sqlite3.SQLITE_CANTOPEN:
		return fmt.Errorf("%w: approval store %s cannot be opened (%v): check the file and its directory exist and are yours", ErrConfig, s.path, se)
	}
	return fmt.Errorf("approval store %s: %w", s.path, err)
}

// whatFile says what the file holds instead of a store, from its first
// bytes (read only under the store's turn: see turns).
func (s *Store) whatFile() string {
	head := make([]byte, 32)
	f, err := os.Open(s.path)
	if err == nil {
		n, _ := io.ReadFull(f, head)
		head = head[:n]
		f.Close()
	}
	switch {
	case bytes.HasPrefix(head, []byte("SQLite format 3\x00")):
		return "it is an SQLite database, but not a hutch approval store"
	case len(head) >= 20 && bytes.Equal(head[16:20], []byte{0xed, 0xda, 0x0c, 0xed}):
		return "it is a bbolt file, the format of hutch before 2026-12 (its requests are not read: move it aside, and the agent's calls ask again)"
	}
	return "it is not an SQLite database (overwritten or damaged?)"
}

// create makes the store when no file is at its path: built under a
// temporary name beside it and linked into place only whole, so no
// process ever sees a half-made store, and two racing creators leave
// one.
func (s *Store) create() error {
	if _, err := os.Lstat(s.path); !errors.Is(err, os.ErrNotExist) {
		return nil // checkFile says what is wrong with it, if anything
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	tmp := filepath.Join(filepath.Dir(s.path), ".hutch-store-"+hex.EncodeToString(r[:])+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("%w: approval store %s cannot be made: %v", ErrConfig, s.path, errors.Unwrap(err))
	}
	f.Close()
	defer os.Remove(tmp)
	db, err := sql.Open("sqlite", (&Store{path: tmp}).dsn(false))
	if err == nil {
		_, err = db.Exec(storeSchema)
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("%w: approval store %s cannot be made: %v", ErrConfig, s.path, err)
	}
	if err := os.Link(tmp, s.path); err != nil && !errors.Is(err, os.ErrExist) {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EOPNOTSUPP) {
			return fmt.Errorf("%w: approval store %s cannot be made: its filesystem has no hard links, which making it whole needs: put it on another filesystem", ErrConfig, s.path)
		}
		return fmt.Errorf("%w: approval store %s cannot be made: %v", ErrConfig, s.path, errors.Unwrap(err))
	}
	return nil
}

// processName is " (name)" for process pid, from /proc, or "".
func processName(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	return " (" + Printable(string(bytes.TrimSpace(b))) + ")"
}

// Check reads the whole store: SQLite's integrity check of every page,
// then every record and open key. It returns how many requests the store
// holds and how many are open, or the first problem found, as Open would
// report it (ErrStoreDamaged naming what is wrong). It only reads.
func (s *Store) Check(ctx context.Context) (requests, open int, err error) {
	err = s.view(ctx, func(tx *sql.Tx) error {
		if err := integrity(tx, "integrity_check"); err != nil {
			return err
		}
		ids := map[string]bool{}
		if err := eachApproval(tx, func(a Approval) error {
			ids[a.ID] = true
			return nil
		}); err != nil {
			return err
		}
		requests = len(ids)
		orows, err := tx.QueryContext(ctx, `SELECT key, id FROM open_keys`)
		if err != nil {
			return err
		}
		defer orows.Close()
		for orows.Next() {
			var key, id string
			if err := orows.Scan(&key, &id); err != nil {
				return err
			}
			if !ids[id] {
				return &recordError{id: id, err: errors.New("an open request with no record")}
			}
			open++
		}
		return orows.Err()
	})
	if err != nil {
		return 0, 0, err
	}
	return requests, open, nil
}

// integrity runs SQLite's integrity_check or quick_check: nil when it
// finds the file whole, a sqliteDamage naming its first finding if not.
func integrity(tx *sql.Tx, pragma string) error {
	rows, err := tx.Query(`PRAGMA ` + pragma)
	if err != nil {
		return err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(problems) == 0 {
		return nil
	}
	more := ""
	if len(problems) > 1 {
		more = fmt.Sprintf(" (and %d more problems)", len(problems)-1)
	}
	return &sqliteDamage{what: problems[0] + more}
}

// sqliteDamage: SQLite's integrity check found a problem.
type sqliteDamage struct{ what string }

func (e *sqliteDamage) Error() string { return e.what }
