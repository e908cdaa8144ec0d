package permission_test

// Review 7: adversarial tests of the permission gate. A test that fails on
// the current code demonstrates a defect and says what the right behaviour
// is; a passing one pins a behaviour checked and found correct.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hutchsandbox/hutch/permission"
	"github.com/hutchsandbox/hutch/sandbox"
)

// Allow-list parsing: leniency on case, spaces and empty entries never
// adds a capability that was not named, and every trick that is not a
// known name exactly (after lower-casing and trimming) is refused.
func TestReview7ParseCapabilitiesNeverWidens(t *testing.T) {
	ok := []struct {
		in   string
		want []permission.Capability
	}{
		{"write,,shell", []permission.Capability{permission.Write, permission.Shell}}, // empty entry skipped (lenient, not wider)
		{" Write ,\tSHELL", []permission.Capability{permission.Write, permission.Shell}},
		{"", nil},
		{",", nil},
		// Go's ToLower maps U+0130 (İ) to "i": harmless, it names write.
		{"WRİTE", []permission.Capability{permission.Write}},
	}
	for _, c := range ok {
		got, err := permission.ParseCapabilities(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseCapabilities(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{
		"*", "all", "write;shell", "write shell", "writ", "writes",
		"ſhell",       // long s: EqualFold would take it for "shell"
		"shell\x00",   // NUL
		"write\u200b", // zero-width space
		"ｗｒｉｔｅ",       // fullwidth
		"fetch,search,teleport",
	} {
		if got, err := permission.ParseCapabilities(in); !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("ParseCapabilities(%q) = %v, %v; want ErrConfig", in, got, err)
		}
	}
	for _, in := range []string{"AUTO", " auto ", "Read_Only"} {
		if _, err := permission.ParseMode(in); err != nil {
			t.Errorf("ParseMode(%q): %v", in, err)
		}
	}
	for _, in := range []string{" ", "readonly", "read-only", "ａuto", "auto\x00", "yes"} {
		if m, err := permission.ParseMode(in); !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("ParseMode(%q) = %q, %v; want ErrConfig", in, m, err)
		}
	}
	// A capability in a request is matched exactly: a differently spelled
	// one is unknown, and so denied, in every mode but auto.
	g := gate(t, permission.Config{Allow: []permission.Capability{permission.Read}})
	for _, c := range []permission.Capability{"Write", "SHELL", " write", "read ", "Read"} {
		if d, err := g.Check(bg, req(c, "x")); err != nil || d.Allowed {
			t.Errorf("capability %q in read_only: %+v %v", c, d, err)
		}
	}
}

// Ask mode: whatever goes wrong while asking, the call is denied (or
// returned as an error), never allowed.
func TestReview7AskFailsClosed(t *testing.T) {
	cases := []struct {
		name  string
		asker permission.Asker
		ctx   func() (context.Context, context.CancelFunc)
	}{
		{"nobody answers before the deadline", func(ctx context.Context, _ permission.Request) (bool, error) {
			<-ctx.Done()
			return false, ctx.Err()
		}, func() (context.Context, context.CancelFunc) { return context.WithTimeout(bg, 20*1e6) }},
		{"answerer errors but says yes", func(context.Context, permission.Request) (bool, error) {
			return true, errors.New("tty gone")
		}, nil},
		{"deferred but says yes", func(context.Context, permission.Request) (bool, error) {
			return true, fmt.Errorf("later: %w", permission.ErrAskDeferred)
		}, nil},
		{"context error from answerer", func(context.Context, permission.Request) (bool, error) {
			return true, context.Canceled
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(bg)
			if c.ctx != nil {
				ctx, cancel = c.ctx()
			}
			defer cancel()
			d, err := gate(t, permission.Config{Mode: permission.Ask, Asker: c.asker}).Check(ctx, req(permission.Shell, "rm -rf ~"))
			if d.Allowed {
				t.Fatalf("allowed: %+v %v", d, err)
			}
		})
	}
}

// DEFECT: the gate does not look at ctx again after the Asker returns. An
// Asker that answers yes after the call was cancelled (the human clicked
// after the agent's request timed out, or a sloppy Asker ignores ctx) gets
// the action allowed for a call whose context is already done. Right
// behaviour: Check re-checks ctx after asking and returns ctx.Err() (not
// allowed), as it does before deciding.
func TestReview7AskAnswerAfterCancelIsNotAllowed(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	g := gate(t, permission.Config{Mode: permission.Ask, Asker: func(context.Context, permission.Request) (bool, error) {
		cancel()         // the call is cancelled while the question is open...
		return true, nil // ...and then a yes arrives
	}})
	d, err := g.Check(ctx, req(permission.Shell, "deploy"))
	if d.Allowed || !errors.Is(err, context.Canceled) {
		t.Fatalf("a yes after cancellation: %+v %v; want not allowed and context.Canceled", d, err)
	}
}

// Request keys: the same call in any JSON spelling has one key; anything
// that changes what runs (value, unicode form, number spelling, tool,
// capability, scope) has another; field boundaries cannot be shifted.
func TestReview7RequestKeyCanonical(t *testing.T) {
	base := permission.Request{Capability: permission.Write, Tool: "write_file", Scope: "s", Args: json.RawMessage(`{"path":"café","content":"x","n":1}`)}
	with := func(f func(*permission.Request)) permission.Request { r := base; f(&r); return r }
	key := func(r permission.Request) string {
		k, err := permission.RequestKey(r)
		if err != nil {
			t.Fatalf("RequestKey(%s): %v", r.Args, err)
		}
		return k
	}
	k0 := key(base)
	same := map[string]permission.Request{
		"key order": with(func(r *permission.Request) { r.Args = json.RawMessage(`{"n":1,"content":"x","path":"café"}`) }),
		"whitespace": with(func(r *permission.Request) {
			r.Args = json.RawMessage(" {\n\t\"path\" : \"café\" , \"content\":\"x\",\"n\":1 }\n")
		}),
		"escaped unicode": with(func(r *permission.Request) { r.Args = json.RawMessage(`{"path":"caf\u00e9","content":"\u0078","n":1}`) }),
		"detail ignored":  with(func(r *permission.Request) { r.Detail = "anything" }),
	}
	for name, r := range same {
		if key(r) != k0 {
			t.Errorf("%s: a different key for the same call", name)
		}
	}
	differ := map[string]permission.Request{
		"NFD unicode": with(func(r *permission.Request) {
			r.Args = json.RawMessage("{\"path\":\"cafe\u0301\",\"content\":\"x\",\"n\":1}")
		}),
		"number 1.0":    with(func(r *permission.Request) { r.Args = json.RawMessage(`{"path":"café","content":"x","n":1.0}`) }),
		"key case":      with(func(r *permission.Request) { r.Args = json.RawMessage(`{"Path":"café","content":"x","n":1}`) }),
		"extra key":     with(func(r *permission.Request) { r.Args = json.RawMessage(`{"path":"café","content":"x","n":1,"m":2}`) }),
		"tool":          with(func(r *permission.Request) { r.Tool = "edit_file" }),
		"capability":    with(func(r *permission.Request) { r.Capability = permission.Shell }),
		"scope":         with(func(r *permission.Request) { r.Scope = "t" }),
		"shifted tool":  with(func(r *permission.Request) { r.Tool = "write_files"; r.Scope = "" }),
		"null args":     with(func(r *permission.Request) { r.Args = nil }),
		"trailing path": with(func(r *permission.Request) { r.Args = json.RawMessage(`{"path":"café/","content":"x","n":1}`) }),
	}
	seen := map[string]string{k0: "base"}
	for name, r := range differ {
		k := key(r)
		if other, dup := seen[k]; dup {
			t.Errorf("%s has the same key as %s", name, other)
		}
		seen[k] = name
	}
	for _, bad := range []string{`{"a":1} {"a":2}`, `{"a":`, `nul`, "\x00"} {
		if _, err := permission.RequestKey(with(func(r *permission.Request) { r.Args = json.RawMessage(bad) })); err == nil {
			t.Errorf("RequestKey accepted %q", bad)
		}
	}
}

// An approval is bound to its scope and tool: given in one workspace (or
// for one tool) it never lets through the same arguments elsewhere, and it
// stays open for its own call.
func TestReview7ApprovalNotReplayedElsewhere(t *testing.T) {
	store := newStore(t)
	g := gate(t, permission.Config{Mode: permission.Approve, Store: store})
	call := permission.Request{Capability: permission.Shell, Tool: "shell", Detail: "rm -rf build", Scope: "*local.Sandbox:/a", Args: json.RawMessage(`{"command":"rm -rf build"}`)}
	d, err := g.Check(bg, call)
	id := pendingID(t, d, err)
	if _, err := store.Decide(bg, id, true); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]permission.Request{
		"other scope":      {Capability: call.Capability, Tool: call.Tool, Detail: call.Detail, Scope: "*local.Sandbox:/b", Args: call.Args},
		"other tool":       {Capability: call.Capability, Tool: "shell2", Detail: call.Detail, Scope: call.Scope, Args: call.Args},
		"other capability": {Capability: permission.Write, Tool: call.Tool, Detail: call.Detail, Scope: call.Scope, Args: call.Args},
		"other args":       {Capability: call.Capability, Tool: call.Tool, Detail: call.Detail, Scope: call.Scope, Args: json.RawMessage(`{"command":"rm -rf /"}`)},
	} {
		d, err := g.Check(bg, r)
		if d.Allowed || !errors.Is(err, permission.ErrApprovalRequired) {
			t.Errorf("%s: %+v %v; want approval required", name, d, err)
		}
	}
	if d, err := g.Check(bg, call); err != nil || !d.Allowed || d.ApprovalID != id {
		t.Fatalf("the approved call itself: %+v %v", d, err)
	}
}

// Concurrent decisions on one request: exactly one wins, the other gets
// ErrDecided; concurrent claims through one shared gate: exactly one call
// passes. (Run with -race.)
func TestReview7ConcurrentDecideAndClaim(t *testing.T) {
	store := newStore(t)
	g := gate(t, permission.Config{Mode: permission.Approve, Store: store})
	call := req(permission.Shell, "deploy")
	d, err := g.Check(bg, call)
	id := pendingID(t, d, err)

	var wins, decided atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := store.Decide(bg, id, i%2 == 0)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, permission.ErrDecided):
				decided.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || decided.Load() != 7 {
		t.Fatalf("decisions: %d won, %d already decided; want 1 and 7", wins.Load(), decided.Load())
	}
	a, err := store.Get(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	var allowed, denied atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := g.Check(bg, call)
			switch {
			case err == nil && d.Allowed:
				allowed.Add(1)
			case err == nil && d.ApprovalID == id:
				denied.Add(1)
			}
		}()
	}
	wg.Wait()
	want := [2]int32{1, 0}
	if a.Status == permission.StatusDenied {
		want = [2]int32{0, 1}
	}
	if got := [2]int32{allowed.Load(), denied.Load()}; got != want {
		t.Fatalf("claims after %s: allowed/denied %v, want %v", a.Status, got, want)
	}
}

// A store that is corrupt, deleted or replaced under a running gate fails
// closed with a reason, and a corrupt file is refused at open.
func TestReview7BrokenStoreFailsClosed(t *testing.T) {
	garbage := bytes.Repeat([]byte("not a bolt database "), 1000)
	cases := []struct {
		name   string
		break_ func(t *testing.T, path string)
	}{
		{"deleted", func(t *testing.T, path string) { os.Remove(path) }},
		{"garbage", func(t *testing.T, path string) { os.WriteFile(path, garbage, 0o600) }},
		{"truncated", func(t *testing.T, path string) { os.Truncate(path, 100) }},
		{"directory", func(t *testing.T, path string) { os.Remove(path); os.Mkdir(path, 0o700) }},
		{"corrupt record", func(t *testing.T, path string) {
			// Overwrite the stored JSON of every record in place.
			b, _ := os.ReadFile(path)
			b = bytes.ReplaceAll(b, []byte(`"status":"approved"`), []byte(`"status":{{{{{{{{{{`))
			os.WriteFile(path, b, 0o600)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a.db")
			store, err := permission.OpenStore(path)
			if err != nil {
				t.Fatal(err)
			}
			g := gate(t, permission.Config{Mode: permission.Approve, Store: store})
			call := req(permission.Shell, "deploy")
			d, err := g.Check(bg, call)
			id := pendingID(t, d, err)
			if _, err := store.Decide(bg, id, true); err != nil {
				t.Fatal(err)
			}
			c.break_(t, path)
			d, err = g.Check(bg, call)
			if d.Allowed {
				t.Fatalf("allowed through a %s store: %+v %v", c.name, d, err)
			}
			if err == nil && !strings.Contains(d.Reason, "approval store failed") {
				t.Errorf("denial does not say the store failed: %+v", d)
			}
			if c.name == "garbage" {
				if _, err := permission.OpenStore(path); !errors.Is(err, sandbox.ErrConfig) || strings.Contains(err.Error(), "\n") {
					t.Errorf("OpenStore on garbage: %v; want one-line ErrConfig", err)
				}
			}
		})
	}
}

// DEFECT: a store or audit file that already exists keeps whatever mode it
// has: a group- or world-writable approval store lets any local user
// approve the agent's pending requests (and a world-readable one shows
// every command and file content asked for); a writable audit log can be
// rewritten. Right behaviour: OpenStore/OpenAudit refuse (ErrConfig,
// naming "chmod 600 FILE") a file writable or readable by others, or owned
// by another user, as HTTPToken does for its token file.
func TestReview7ExistingFileModeChecked(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		open func(path string) (func(), error)
	}{
		{"store", func(p string) (func(), error) { _, err := permission.OpenStore(p); return func() {}, err }},
		{"audit", func(p string) (func(), error) {
			a, err := permission.OpenAudit(p)
			if err != nil {
				return func() {}, err
			}
			return func() { a.Close() }, nil
		}},
	} {
		// A fresh file is private.
		fresh := filepath.Join(dir, "fresh-"+c.name)
		closeIt, err := c.open(fresh)
		if err != nil {
			t.Fatal(err)
		}
		closeIt()
		if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("new %s file mode %v, %v; want 0600", c.name, fi.Mode().Perm(), err)
		}
		// An existing shared one is refused or made private.
		shared := filepath.Join(dir, "shared-"+c.name)
		closeIt, err = c.open(shared)
		if err != nil {
			t.Fatal(err)
		}
		closeIt()
		if err := os.Chmod(shared, 0o666); err != nil {
			t.Fatal(err)
		}
		closeIt, err = c.open(shared)
		closeIt()
		fi, _ := os.Stat(shared)
		if err == nil && fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: a file others can read and write (mode %v) was used as is; want ErrConfig or mode 0600", c.name, fi.Mode().Perm())
		} else if err != nil && !errors.Is(err, sandbox.ErrConfig) {
			t.Errorf("%s: %v; want ErrConfig", c.name, err)
		}
	}
}

// DEFECT: once MaxOpen requests wait, ErrTooManyOpen tells the human to
// "decide or deny some (hutch approvals list) before asking again", but a
// decided request stays in the open index until the agent repeats that exact
// call, so deciding frees nothing: after denying every pending request the
// gate still refuses every new one (an agent that floods the store locks
// approve mode until it repeats 1000 calls). Right behaviour: a denial
// (and any decision) frees the slot it held in the MaxOpen count — count
// only pending requests, or drop denied ones from the open index and look
// denials up by key otherwise.
func TestReview7DenyingFreesOpenSlots(t *testing.T) {
	if testing.Short() {
		t.Skip("fills the store")
	}
	s := newStore(t)
	for i := range permission.MaxOpen {
		if st, _, err := s.Claim(bg, permission.Request{Capability: permission.Shell, Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil || st != permission.StatusPending {
			t.Fatalf("request %d: %v %v", i, st, err)
		}
	}
	pending, err := s.List(bg, permission.StatusPending)
	if err != nil || len(pending) != permission.MaxOpen {
		t.Fatalf("pending: %d %v", len(pending), err)
	}
	// The human does what the error says: deny them all.
	for _, a := range pending {
		if _, err := s.Decide(bg, a.ID, false); err != nil {
			t.Fatal(err)
		}
	}
	if st, _, err := s.Claim(bg, permission.Request{Capability: permission.Shell, Args: json.RawMessage(`{"n":"new"}`)}); err != nil || st != permission.StatusPending {
		t.Fatalf("after denying all %d pending requests a new one is refused: %v %v", permission.MaxOpen, st, err)
	}
}

// The audit log: one JSON line per decision whatever the request holds
// (newlines, control characters, invalid UTF-8 cannot forge a line);
// denials by every path are recorded; the arguments (file contents) are
// not copied into it.
func TestReview7AuditLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := permission.OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	forged := "x\n{\"outcome\":\"allowed\",\"capability\":\"shell\"}\r\n\x1b[2K\u2028\xff"
	no := func(context.Context, permission.Request) (bool, error) { return false, nil }
	broken := func(context.Context, permission.Request) (bool, error) {
		return false, errors.New("no tty\n{\"outcome\":\"allowed\"}")
	}
	store := newStore(t)
	gates := []*permission.Gate{
		gate(t, permission.Config{Audit: audit}),
		gate(t, permission.Config{Mode: permission.Ask, Asker: no, Audit: audit}),
		gate(t, permission.Config{Mode: permission.Ask, Asker: broken, Audit: audit}),
		gate(t, permission.Config{Mode: permission.Ask, Audit: audit}),
		gate(t, permission.Config{Mode: permission.Approve, Store: store, Audit: audit}),
	}
	secret := "SECRET-CONTENT-42"
	for _, g := range gates {
		r := permission.Request{Capability: permission.Shell, Tool: forged, Detail: forged, Args: json.RawMessage(`{"content":"` + secret + `"}`)}
		_, _ = g.Check(bg, r)
		r.Capability = permission.Capability(forged)
		_, _ = g.Check(bg, r)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(secret)) {
		t.Error("the arguments were copied into the audit log")
	}
	var outcomes []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var e permission.AuditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if e.Detail != strings.ToValidUTF8(forged, "\uFFFD") {
			t.Errorf("detail not kept intact: %q", e.Detail)
		}
		outcomes = append(outcomes, e.Outcome)
	}
	want := []string{"denied", "denied", "denied", "denied", "denied", "denied", "denied", "denied", "approval_required", "denied"}
	if !slices.Equal(outcomes, want) {
		t.Errorf("outcomes %v, want %v", outcomes, want)
	}
}

// Bad input never panics and never allows: nil and huge arguments,
// an empty request, a zero Gate config.
func TestReview7BadInput(t *testing.T) {
	huge := json.RawMessage(`{"content":"` + strings.Repeat("a", 1<<20) + `"}`)
	store := newStore(t)
	g := gate(t, permission.Config{Mode: permission.Approve, Store: store})
	for name, r := range map[string]permission.Request{
		"empty":     {},
		"nil args":  {Capability: permission.Write},
		"huge args": {Capability: permission.Write, Args: huge},
		"array":     {Capability: permission.Write, Args: json.RawMessage(`[1,2]`)},
		"deep":      {Capability: permission.Write, Args: json.RawMessage(strings.Repeat("[", 5000) + strings.Repeat("]", 5000))},
	} {
		d, err := g.Check(bg, r)
		if d.Allowed {
			t.Errorf("%s: allowed without approval: %+v %v", name, d, err)
		}
	}
	if _, err := permission.New(permission.Config{Mode: permission.Approve}); !errors.Is(err, sandbox.ErrConfig) {
		t.Errorf("approve without a store: %v", err)
	}
	if _, err := permission.OpenExistingStore(filepath.Join(t.TempDir(), "missing.db")); !errors.Is(err, sandbox.ErrConfig) || !strings.Contains(err.Error(), "--store") {
		t.Errorf("missing store: %v", err)
	}
}
