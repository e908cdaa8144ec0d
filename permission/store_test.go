package permission

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
)

// filledStore is a store at dir/a.db holding n requests, every third one
// approved, and the id of the first (pending).
func filledStore(t *testing.T, dir string, n int) (*Store, string) {
	t.Helper()
	s, err := OpenStore(filepath.Join(dir, "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	first := ""
	for i := range n {
		args, _ := json.Marshal(map[string]string{"command": fmt.Sprintf("echo %d %s", i, strings.Repeat("x", 500))})
		_, id, err := s.Claim(context.Background(), Request{Capability: Shell, Tool: "shell", Detail: "echo", Args: args, Scope: "local:/w"})
		if err != nil {
			t.Fatal(err)
		}
		if first == "" {
			first = id
		}
		if i%3 == 1 {
			if _, err := s.Decide(context.Background(), id, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s, first
}

// Every damage to the store's file is a one-line error naming the file
// and a fix, from every operation, never a crash (with a memory-mapped
// store, truncation was a SIGBUS and a damaged page a panic), and no
// operation leaves a descriptor on the file. Check finds every damage.
func TestDamagedStoreIsOneLineError(t *testing.T) {
	ctx := context.Background()
	damages := append([]string{}, testenv.Damages...)
	damages = append(damages, "record damaged", "another SQLite database", "a bbolt file", "deleted", "a directory")
	for _, how := range damages {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			s, first := filledStore(t, dir, 120)
			path := s.Path()
			switch how {
			case "record damaged":
				b, _ := os.ReadFile(path)
				b = bytes.ReplaceAll(b, []byte(`"status":"pending"`), []byte(`"status":"pend`+"\x1a"+`ng`))
				os.WriteFile(path, b, 0o600)
			case "another SQLite database":
				os.Remove(path)
				db, err := sql.Open("sqlite", path)
				if err == nil {
					_, err = db.Exec(`CREATE TABLE approvals (id TEXT, record BLOB)`)
					db.Close()
					os.Chmod(path, 0o600)
				}
				if err != nil {
					t.Fatal(err)
				}
			case "a bbolt file":
				b := make([]byte, 16<<10)
				copy(b[16:], []byte{0xed, 0xda, 0x0c, 0xed})
				os.WriteFile(path, b, 0o600)
			case "deleted":
				os.Remove(path)
			case "a directory":
				os.Remove(path)
				os.Mkdir(path, 0o700)
			default:
				testenv.DamageFile(t, path, how)
			}
			other, _ := json.Marshal(map[string]string{"command": "new"})
			ops := []struct {
				name    string
				run     func() error
				mustErr bool // every damage makes it fail
			}{
				{"OpenExistingStore", func() error { _, err := OpenExistingStore(path); return err }, true},
				{"List", func() error { _, err := s.List(ctx); return err }, true},
				{"Check", func() error { _, _, err := s.Check(ctx); return err }, true},
				{"Get", func() error { _, err := s.Get(ctx, first); return err }, false},
				{"Decide", func() error { _, err := s.Decide(ctx, first, true); return err }, false},
				{"OpenStore", func() error { _, err := OpenStore(path); return err }, false},
				{"Claim", func() error {
					_, _, err := s.Claim(ctx, Request{Capability: Shell, Tool: "shell", Args: other, Scope: "local:/w"})
					return err
				}, false},
			}
			if how == "deleted" { // OpenStore and Claim make a new, empty store
				ops = ops[:3]
				ops[1].mustErr, ops[2].mustErr = true, true
			}
			for _, op := range ops {
				err := op.run()
				switch {
				case err == nil && op.mustErr && how != "record damaged":
					t.Errorf("%s succeeded on a store %s", op.name, how)
				case err == nil && op.mustErr && op.name != "OpenExistingStore":
					t.Errorf("%s succeeded on a store with a damaged record", op.name)
				case err == nil:
				case strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), path):
					t.Errorf("%s: %q is not one line naming the file", op.name, err)
				case how == "a directory" || how == "deleted":
					if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), map[string]string{"deleted": "does not exist", "a directory": "is a directory"}[how]) {
						t.Errorf("%s: %v", op.name, err)
					}
				case !errors.Is(err, ErrStoreDamaged) || !errors.Is(err, ErrConfig):
					t.Errorf("%s: %v is not ErrStoreDamaged", op.name, err)
				case !strings.Contains(err.Error(), "move") && !strings.Contains(err.Error(), "restore"):
					t.Errorf("%s: %v names no fix", op.name, err)
				}
			}
			if n := testenv.DescriptorsOn(t, os.Getpid(), path); n != 0 {
				t.Errorf("%d descriptors left open on the store", n)
			}
		})
	}
}

// What a damage error says: which damage, in words a person acts on.
func TestDamagedStoreSaysWhat(t *testing.T) {
	for _, c := range []struct{ how, want string }{
		{"empty", "the file is empty (0 bytes"},
		{"truncated to half", "database disk image is malformed"},
		{"replaced by text", "it is not an SQLite database"},
		{"header zeroed", "it is not an SQLite database"},
	} {
		t.Run(c.how, func(t *testing.T) {
			s, _ := filledStore(t, t.TempDir(), 100)
			testenv.DamageFile(t, s.Path(), c.how)
			if _, err := s.List(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("List: %v, want %q", err, c.want)
			}
		})
	}
	s, _ := filledStore(t, t.TempDir(), 3)
	b, _ := os.ReadFile(s.Path())
	os.WriteFile(s.Path(), bytes.Replace(b, []byte(`"status":"approved"`), []byte(`"status":"appr`+"\x1a"+`ved"`), 1), 0o600)
	if _, err := s.List(context.Background()); err == nil || !strings.Contains(err.Error(), "'s record is damaged (invalid character '\\x1a'") {
		t.Errorf("a damaged record: %v", err)
	}
}

// A store another process keeps locked fails after lockWait saying so,
// with that process's id; the lock released, the store works again.
func TestLockedStoreNamesTheHolder(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		testenv.Missing(t, "python3 (the other process holding the store's lock)")
	}
	defer func(d time.Duration) { lockWait = d }(lockWait)
	lockWait = 300 * time.Millisecond
	s, first := filledStore(t, t.TempDir(), 3)
	holder := exec.Command(python, "-c", `import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()`, s.Path())
	stdin, _ := holder.StdinPipe()
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Wait()
	defer stdin.Close()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("the holder said %q", line)
	}
	want := fmt.Sprintf("is held by process %d (python3) for longer than 300ms: wait for it to finish, or stop it", holder.Process.Pid)
	for name, op := range map[string]func() error{
		"List":   func() error { _, err := s.List(context.Background()); return err },
		"Decide": func() error { _, err := s.Decide(context.Background(), first, false); return err },
		"Claim": func() error {
			_, _, err := s.Claim(context.Background(), Request{Capability: Shell, Args: json.RawMessage(`{}`)})
			return err
		},
	} {
		if err := op(); !errors.Is(err, ErrStoreLocked) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), s.Path()) {
			t.Errorf("%s under another's lock: %v, want %q", name, err, want)
		}
	}
	stdin.Close()
	holder.Wait()
	if _, err := s.List(context.Background()); err != nil {
		t.Errorf("after the lock was released: %v", err)
	}
}

// mountTmpfs mounts a tmpfs of the given size on a new directory, for
// the test's life; it needs root.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (to mount a tmpfs)")
	}
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	return mnt
}

// On a full disk a request that does not fit changes nothing and says
// the disk is full; what was stored before reads whole.
func TestStoreOnAFullDisk(t *testing.T) {
	s, _ := filledStore(t, mountTmpfs(t, "96k"), 5)
	var err error
	for i := 0; err == nil && i < 100; i++ {
		args, _ := json.Marshal(map[string]string{"content": fmt.Sprintf("%d%s", i, strings.Repeat("z", 32<<10))})
		_, _, err = s.Claim(context.Background(), Request{Capability: Write, Tool: "write_file", Args: args})
	}
	if err == nil || !strings.Contains(err.Error(), "the disk is full") || !strings.Contains(err.Error(), s.Path()) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("filling the disk: %v", err)
	}
	n, _, cerr := s.Check(context.Background())
	if cerr != nil || n < 5 {
		t.Errorf("after the disk filled: %d requests, %v", n, cerr)
	}
}

// The approving side's reads write nothing: List, Get and Check work on
// a read-only filesystem, where Decide says the file cannot be written.
func TestStoreReadsOnAReadOnlyFilesystem(t *testing.T) {
	mnt := mountTmpfs(t, "4m")
	s, first := filledStore(t, mnt, 5)
	if err := syscall.Mount("", mnt, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenExistingStore(s.Path())
	if err != nil {
		t.Fatalf("OpenExistingStore on a read-only filesystem: %v", err)
	}
	if l, err := ro.List(context.Background()); err != nil || len(l) != 5 {
		t.Errorf("List: %d, %v", len(l), err)
	}
	if _, err := ro.Get(context.Background(), first); err != nil {
		t.Errorf("Get: %v", err)
	}
	if n, _, err := ro.Check(context.Background()); err != nil || n != 5 {
		t.Errorf("Check: %d, %v", n, err)
	}
	if _, err := ro.Decide(context.Background(), first, true); err == nil || !strings.Contains(err.Error(), "cannot be written") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Decide on a read-only filesystem: %v", err)
	}
}

// A store is made whole or not at all: its file appears with its tables
// in it, and racing makers leave one store and no temporary files.
func TestStoreIsMadeWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			s, err := OpenStore(path)
			if err == nil {
				_, _, err = s.Claim(context.Background(), Request{Capability: Shell, Args: json.RawMessage(`{}`)})
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	s, _ := OpenExistingStore(path)
	if l, err := s.List(context.Background()); err != nil || len(l) != 1 {
		t.Errorf("after 8 racing makers: %d requests, %v", len(l), err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("the directory holds %d files, want the store alone", len(ents))
	}
}

// BenchmarkStoreClaim is one approve-mode call's store work: a new
// request claimed (pending), and a decided one claimed (used).
func BenchmarkStoreClaim(b *testing.B) {
	ctx := context.Background()
	s, err := OpenStore(filepath.Join(b.TempDir(), "a.db"))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		req := Request{Capability: Shell, Tool: "shell", Detail: "echo", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
		if _, _, err := s.Claim(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoreList is "hutch approvals list" over 200 requests.
func BenchmarkStoreList(b *testing.B) {
	ctx := context.Background()
	s, err := OpenStore(filepath.Join(b.TempDir(), "a.db"))
	if err != nil {
		b.Fatal(err)
	}
	for i := range 200 {
		req := Request{Capability: Shell, Tool: "shell", Detail: "echo", Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
		if _, _, err := s.Claim(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if l, err := s.List(ctx); err != nil || len(l) != 200 {
			b.Fatal(len(l), err)
		}
	}
}

// An expired decision leaves exactly one open key (the new request's); the
// new request carries the call's scope and arguments; and a decision made
// after the request waited longer than the TTL is not expired at once.
func TestExpiredDecisionLeavesOneOpenRequest(t *testing.T) {
	ctx := context.Background()
	s, err := OpenStore(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetDecisionTTL(150 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	req := Request{Capability: Shell, Detail: "make deploy", Tool: "shell", Args: json.RawMessage(`{"b":1, "a":2}`), Scope: "local:/w"}
	st, id, err := s.Claim(ctx, req)
	if err != nil || st != StatusPending {
		t.Fatal(st, err)
	}
	time.Sleep(300 * time.Millisecond) // pending longer than the TTL
	if _, err := s.Decide(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if st, got, err := s.Claim(ctx, req); err != nil || st != StatusApproved || got != id {
		t.Fatalf("a fresh decision on an old request: %s %s %v; want approved %s", st, got, err, id)
	}
	// Again, now letting the decision expire.
	_, id2, _ := s.Claim(ctx, req)
	if _, err := s.Decide(ctx, id2, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	st, id3, err := s.Claim(ctx, req)
	if err != nil || st != StatusPending || id3 == id2 {
		t.Fatalf("past the TTL: %s %s %v", st, id3, err)
	}
	old, _ := s.Get(ctx, id2)
	nw, _ := s.Get(ctx, id3)
	if old.Status != StatusExpired || old.ClaimedAt != nil {
		t.Errorf("old: %+v", old)
	}
	if nw.Scope != req.Scope || string(nw.Arguments) != `{"a":2,"b":1}` || nw.Tool != "shell" || nw.Detail != req.Detail {
		t.Errorf("new request: %+v", nw)
	}
	key, _ := RequestKey(req)
	_ = s.view(ctx, func(tx *sql.Tx) error {
		rows, err := tx.Query(`SELECT key, id FROM open_keys`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var k, v string
			_ = rows.Scan(&k, &v)
			n++
			if k != key || v != id3 {
				t.Errorf("open %s -> %s", k, v)
			}
		}
		if n != 1 {
			t.Errorf("%d open keys, want 1", n)
		}
		return nil
	})
}

// A pending request costs the store well under 1 MiB whatever its
// arguments (here 6 requests of 8 MiB each): it keeps their start, size and
// digest, so a model in approve mode cannot fill the disk or make
// "approvals list" load gigabytes; the approval still binds to all of
// them. Origin: review 15c.
func TestPendingRequestsKeepBoundedArguments(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, path)
	const n, size = 6, 8 << 20
	for i := range n {
		content := fmt.Sprintf("%02d", i) + strings.Repeat("x", size)
		args, _ := json.Marshal(map[string]string{"path": "f.txt", "content": content})
		st, _, err := s.Claim(ctx, Request{Capability: Write, Detail: "f.txt", Tool: "write_file", Args: args, Scope: "local:/w"})
		if err != nil || st != StatusPending {
			t.Fatalf("claim %d: %s %v", i, st, err)
		}
	}
	grown := fileSize(t, path) - before
	if per := grown / n; per > 1<<20 {
		t.Errorf("%d pending requests of %d MiB arguments grew the store by %d MiB (%d KiB each): "+
			"a model can fill the disk (up to MaxOpen=%d such requests) and make \"approvals list\" load it all",
			n, size>>20, grown>>20, per>>10, MaxOpen)
	}
	// The stored arguments are their start, size and digest; the approval
	// binds to all of them.
	call := func(content string) Request {
		args, _ := json.Marshal(map[string]string{"path": "f.txt", "content": content})
		return Request{Capability: Write, Detail: "f.txt", Tool: "write_file", Args: args, Scope: "local:/w"}
	}
	big := "00" + strings.Repeat("x", size)
	list, err := s.List(ctx, StatusPending)
	if err != nil || len(list) != n {
		t.Fatalf("list: %d, %v", len(list), err)
	}
	var first Approval
	for _, a := range list {
		if a.ArgumentsBytes > 0 && strings.Contains(string(a.Arguments), "bytes in all, sha256") && json.Valid(a.Arguments) && a.Detail == "f.txt" {
			if strings.Contains(string(a.Arguments), `\"content\":\"00`) {
				first = a
			}
			continue
		}
		t.Errorf("a stored request of %d bytes: arguments %.120s (%d bytes noted)", size, a.Arguments, a.ArgumentsBytes)
	}
	if first.ID == "" {
		t.Fatal("the first request is not listed with the start of its arguments")
	}
	if _, err := s.Decide(ctx, first.ID, true); err != nil {
		t.Fatal(err)
	}
	if st, _, err := s.Claim(ctx, call(big[:len(big)-1]+"y")); err != nil || st != StatusPending {
		t.Errorf("a call that differs only past the stored start: %s %v; want a new pending request", st, err)
	}
	if st, _, err := s.Claim(ctx, call(big)); err != nil || st != StatusApproved {
		t.Errorf("the identical call: %s %v; want approved", st, err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
