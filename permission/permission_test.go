package permission_test

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
	"unicode/utf8"

	"github.com/hutchsandbox/hutch/permission"
)

var bg = context.Background()

func gate(t *testing.T, cfg permission.Config) *permission.Gate {
	t.Helper()
	g, err := permission.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func req(c permission.Capability, detail string) permission.Request {
	return permission.Request{Capability: c, Detail: detail, Tool: "t", Args: json.RawMessage(`{"x":1}`)}
}

func TestModes(t *testing.T) {
	yes := func(context.Context, permission.Request) (bool, error) { return true, nil }
	no := func(context.Context, permission.Request) (bool, error) { return false, nil }
	broken := func(context.Context, permission.Request) (bool, error) { return false, errors.New("tty gone") }
	cases := []struct {
		name    string
		cfg     permission.Config
		cap     permission.Capability
		allowed bool
		reason  string // substring of the denial
		by      string
	}{
		{"read_only read", permission.Config{}, permission.Read, true, "", "mode"},
		{"read_only glob", permission.Config{}, permission.Glob, true, "", "mode"},
		{"read_only write", permission.Config{}, permission.Write, false, "write denied in read_only mode", "mode"},
		{"read_only shell", permission.Config{Mode: permission.ReadOnly}, permission.Shell, false, "shell denied in read_only mode", "mode"},
		{"read_only fetch", permission.Config{}, permission.Fetch, false, "fetch denied in read_only mode", "mode"},
		{"read_only search", permission.Config{}, permission.Search, false, "search denied in read_only mode", "mode"},
		{"read_only unknown", permission.Config{}, "mcp", false, `unknown capability "mcp" denied in read_only mode`, "mode"},
		{"read_only + allow write", permission.Config{Allow: []permission.Capability{permission.Write}}, permission.Write, true, "", "allow"},
		{"read_only + allow write, shell", permission.Config{Allow: []permission.Capability{permission.Write}}, permission.Shell, false, "shell denied", "mode"},
		{"auto write", permission.Config{Mode: permission.Auto}, permission.Write, true, "", "mode"},
		{"auto unknown", permission.Config{Mode: permission.Auto}, "teleport", true, "", "mode"},
		{"ask yes", permission.Config{Mode: permission.Ask, Asker: yes}, permission.Shell, true, "", "asker"},
		{"ask no", permission.Config{Mode: permission.Ask, Asker: no}, permission.Shell, false, "shell (ls) denied by user", "asker"},
		{"ask broken", permission.Config{Mode: permission.Ask, Asker: broken}, permission.Shell, false, "could not ask: tty gone", "asker"},
		{"ask nobody", permission.Config{Mode: permission.Ask}, permission.Write, false, "denied by user", "asker"},
		{"ask read needs no asker", permission.Config{Mode: permission.Ask}, permission.Read, true, "", "mode"},
		{"ask unknown not asked", permission.Config{Mode: permission.Ask, Asker: yes}, "mcp", false, "unknown capability", "mode"},
		{"ask allow list skips asking", permission.Config{Mode: permission.Ask, Asker: no, Allow: []permission.Capability{permission.Shell}}, permission.Shell, true, "", "allow"},
		{"ask_when false allows", permission.Config{Mode: permission.Ask, Asker: no, AskWhen: func(r permission.Request) bool { return r.Capability == permission.Write }}, permission.Shell, true, "", "ask_when"},
		{"ask_when true asks", permission.Config{Mode: permission.Ask, Asker: no, AskWhen: func(r permission.Request) bool { return r.Capability == permission.Shell }}, permission.Shell, false, "denied by user", "asker"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := gate(t, c.cfg).Check(bg, req(c.cap, "ls"))
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != c.allowed || !strings.Contains(d.Reason, c.reason) || d.By != c.by {
				t.Errorf("got %+v, want allowed=%v reason~%q by=%s", d, c.allowed, c.reason, c.by)
			}
			if d.Allowed && d.Reason != "" {
				t.Errorf("allowed decision with a reason: %+v", d)
			}
		})
	}
}

func TestAskerSeesRequest(t *testing.T) {
	var got permission.Request
	g := gate(t, permission.Config{Mode: permission.Ask, Asker: func(_ context.Context, r permission.Request) (bool, error) {
		got = r
		return true, nil
	}})
	want := req(permission.Write, "notes.txt")
	if _, err := g.Check(bg, want); err != nil {
		t.Fatal(err)
	}
	if got.Capability != want.Capability || got.Detail != want.Detail || got.Tool != want.Tool || string(got.Args) != string(want.Args) {
		t.Errorf("asker saw %+v, want %+v", got, want)
	}
}

func TestNeverAllows(t *testing.T) {
	yes := func(context.Context, permission.Request) (bool, error) { return true, nil }
	store := newStore(t)
	cases := []struct {
		cfg   permission.Config
		cap   permission.Capability
		never bool
	}{
		{permission.Config{}, permission.Read, false},
		{permission.Config{}, permission.Glob, false},
		{permission.Config{}, permission.Write, true},
		{permission.Config{}, permission.Shell, true},
		{permission.Config{}, "mcp", true},
		{permission.Config{Allow: []permission.Capability{permission.Shell}}, permission.Shell, false},
		{permission.Config{Mode: permission.Auto}, permission.Shell, false},
		{permission.Config{Mode: permission.Auto}, "mcp", false},
		{permission.Config{Mode: permission.Ask}, permission.Write, true},
		{permission.Config{Mode: permission.Ask, Asker: yes}, permission.Write, false},
		{permission.Config{Mode: permission.Ask, AskWhen: func(permission.Request) bool { return false }}, permission.Write, false},
		{permission.Config{Mode: permission.Ask, Asker: yes}, "mcp", true},
		{permission.Config{Mode: permission.Approve, Store: store}, permission.Write, false},
		{permission.Config{Mode: permission.Approve, Store: store}, "mcp", true},
	}
	for _, c := range cases {
		if got := gate(t, c.cfg).NeverAllows(c.cap); got != c.never {
			t.Errorf("mode %q allow %v: NeverAllows(%s) = %v, want %v", c.cfg.Mode, c.cfg.Allow, c.cap, got, c.never)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]permission.Config{
		"unknown mode":          {Mode: "yolo"},
		"approve without store": {Mode: permission.Approve},
		"unknown allow":         {Allow: []permission.Capability{"teleport"}},
	} {
		if _, err := permission.New(cfg); !errors.Is(err, permission.ErrConfig) {
			t.Errorf("%s: %v, want permission.ErrConfig", name, err)
		}
	}
	if _, err := permission.ParseMode("sometimes"); err == nil || !strings.Contains(err.Error(), "read_only, auto, ask or approve") {
		t.Errorf("ParseMode error should list the modes: %v", err)
	}
	if m, err := permission.ParseMode(""); err != nil || m != permission.ReadOnly {
		t.Errorf("empty mode should be read_only: %v %v", m, err)
	}
	caps, err := permission.ParseCapabilities(" write, SHELL,,")
	if err != nil || len(caps) != 2 || caps[0] != permission.Write || caps[1] != permission.Shell {
		t.Errorf("ParseCapabilities = %v, %v", caps, err)
	}
	if _, err := permission.ParseCapabilities("write,teleport"); !errors.Is(err, permission.ErrConfig) {
		t.Errorf("unknown capability: %v", err)
	}
}

func newStore(t *testing.T) *permission.Store {
	t.Helper()
	s, err := permission.OpenStore(filepath.Join(t.TempDir(), "approvals.db"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pendingID(t *testing.T, d permission.Decision, err error) string {
	t.Helper()
	var ar *permission.ApprovalRequiredError
	if !errors.As(err, &ar) || !errors.Is(err, permission.ErrApprovalRequired) || d.Allowed {
		t.Fatalf("want approval required, got %+v, %v", d, err)
	}
	if ar.ID == "" || !strings.Contains(err.Error(), ar.ID) {
		t.Fatalf("error %q must carry the request id", err)
	}
	return ar.ID
}

func TestApproveOneCallOnce(t *testing.T) {
	store := newStore(t)
	g := gate(t, permission.Config{Mode: permission.Approve, Store: store})
	call := permission.Request{Capability: permission.Shell, Detail: "make", Tool: "shell", Args: json.RawMessage(`{"command":"make","timeout":5}`)}

	// Undecided: pending, and the same id for the same call.
	d, err := g.Check(bg, call)
	id := pendingID(t, d, err)
	d, err = g.Check(bg, call)
	if again := pendingID(t, d, err); again != id {
		t.Fatalf("same undecided call got a new id %s (first %s)", again, id)
	}
	// Read is never gated.
	if d, err := g.Check(bg, req(permission.Read, "x")); err != nil || !d.Allowed {
		t.Fatalf("read in approve mode: %+v %v", d, err)
	}

	if _, err := store.Decide(bg, id, true); err != nil {
		t.Fatal(err)
	}
	// A different call is not covered — even the same command with other
	// arguments, or another capability with the same arguments.
	other := call
	other.Args = json.RawMessage(`{"command":"make","timeout":6}`)
	d, err = g.Check(bg, other)
	if otherID := pendingID(t, d, err); otherID == id {
		t.Fatal("an approval covered a call with different arguments")
	}
	otherCap := call
	otherCap.Capability = permission.Write
	d, err = g.Check(bg, otherCap)
	pendingID(t, d, err)

	// The identical call passes once — key order and spacing do not matter.
	same := call
	same.Args = json.RawMessage(` { "timeout" : 5, "command" : "make" } `)
	d, err = g.Check(bg, same)
	if err != nil || !d.Allowed || d.ApprovalID != id || d.By != "approval" {
		t.Fatalf("approved call: %+v %v", d, err)
	}
	// ...and only once (Nexo's defect: one approval allowed every later call).
	d, err = g.Check(bg, call)
	if next := pendingID(t, d, err); next == id {
		t.Fatal("a used approval was reused")
	}
	a, err := store.Get(bg, id)
	if err != nil || a.Status != permission.StatusUsed || a.ClaimedAt == nil {
		t.Fatalf("used approval: %+v %v", a, err)
	}
	if _, err := store.Decide(bg, id, true); !errors.Is(err, permission.ErrDecided) {
		t.Errorf("deciding a used request again: %v", err)
	}
	if _, err := store.Decide(bg, "nope", true); !errors.Is(err, permission.ErrNoApproval) {
		t.Errorf("deciding an unknown request: %v", err)
	}
}

func TestApproveDenied(t *testing.T) {
	store := newStore(t)
	g := gate(t, permission.Config{Mode: permission.Approve, Store: store})
	call := req(permission.Write, "a.txt")
	d, err := g.Check(bg, call)
	id := pendingID(t, d, err)
	if _, err := store.Decide(bg, id, false); err != nil {
		t.Fatal(err)
	}
	d, err = g.Check(bg, call)
	if err != nil || d.Allowed || d.Reason != "write (a.txt) not approved" || d.ApprovalID != id {
		t.Fatalf("denied call: %+v %v", d, err)
	}
	// The denial covered that one call; the next asks again.
	d, err = g.Check(bg, call)
	if next := pendingID(t, d, err); next == id {
		t.Fatal("a closed denial was reused")
	}
}

// A restart (a new Store and Gate on the same file) loses nothing.
func TestApproveSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	s1, err := permission.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	call := req(permission.Shell, "deploy")
	d, err := gate(t, permission.Config{Mode: permission.Approve, Store: s1}).Check(bg, call)
	id := pendingID(t, d, err)

	s2, err := permission.OpenStore(path) // "hutch approvals approve" in another process
	if err != nil {
		t.Fatal(err)
	}
	list, err := s2.List(bg, permission.StatusPending)
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].Detail != "deploy" || string(list[0].Arguments) != `{"x":1}` {
		t.Fatalf("pending after restart: %+v %v", list, err)
	}
	if _, err := s2.Decide(bg, id, true); err != nil {
		t.Fatal(err)
	}
	s3, err := permission.OpenStore(path) // the server restarted
	if err != nil {
		t.Fatal(err)
	}
	d, err = gate(t, permission.Config{Mode: permission.Approve, Store: s3}).Check(bg, call)
	if err != nil || !d.Allowed {
		t.Fatalf("approved call after restart: %+v %v", d, err)
	}
}

// Many concurrent identical calls, through separate Store handles (separate
// file locks, as separate processes would have): exactly one passes.
func TestApproveConcurrentClaims(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	s, err := permission.OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	call := req(permission.Write, "race.txt")
	d, err := gate(t, permission.Config{Mode: permission.Approve, Store: s}).Check(bg, call)
	id := pendingID(t, d, err)
	if _, err := s.Decide(bg, id, true); err != nil {
		t.Fatal(err)
	}
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			si, err := permission.OpenStore(path)
			if err != nil {
				t.Error(err)
				return
			}
			g, _ := permission.New(permission.Config{Mode: permission.Approve, Store: si})
			if d, err := g.Check(bg, call); err == nil && d.Allowed {
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := allowed.Load(); n != 1 {
		t.Fatalf("one approval let %d calls through", n)
	}
}

func TestApproveBadArgs(t *testing.T) {
	g := gate(t, permission.Config{Mode: permission.Approve, Store: newStore(t)})
	d, err := g.Check(bg, permission.Request{Capability: permission.Write, Args: json.RawMessage(`{not json`)})
	if err != nil || d.Allowed || !strings.Contains(d.Reason, "not JSON") {
		t.Fatalf("bad arguments must be denied with a reason: %+v %v", d, err)
	}
}

func TestAuditLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := permission.OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	store := newStore(t)
	ro := gate(t, permission.Config{Audit: audit})
	ap := gate(t, permission.Config{Mode: permission.Approve, Store: store, Audit: audit})
	_, _ = ro.Check(bg, req(permission.Read, "a.txt"))
	_, _ = ro.Check(bg, req(permission.Write, "a.txt"))
	_, err = ap.Check(bg, req(permission.Shell, "rm -rf /"))
	id := pendingID(t, permission.Decision{}, err)
	if _, err := store.Decide(bg, id, true); err != nil {
		t.Fatal(err)
	}
	_, _ = ap.Check(bg, req(permission.Shell, "rm -rf /"))

	entries := readAudit(t, path)
	want := []struct {
		cap             permission.Capability
		mode            permission.Mode
		outcome, by, id string
	}{
		{permission.Read, permission.ReadOnly, "allowed", "mode", ""},
		{permission.Write, permission.ReadOnly, "denied", "mode", ""},
		{permission.Shell, permission.Approve, "approval_required", "approval", id},
		{permission.Shell, permission.Approve, "allowed", "approval", id},
	}
	if len(entries) != len(want) {
		t.Fatalf("%d audit entries, want %d: %+v", len(entries), len(want), entries)
	}
	for i, w := range want {
		e := entries[i]
		if e.Capability != w.cap || e.Mode != w.mode || e.Outcome != w.outcome || e.By != w.by || e.ApprovalID != w.id || e.Time.IsZero() || e.Detail == "" {
			t.Errorf("entry %d = %+v, want %+v", i, e, w)
		}
	}
	if entries[1].Reason != "write denied in read_only mode" {
		t.Errorf("denial reason not audited: %+v", entries[1])
	}

	// An action that cannot be audited does not happen.
	_ = audit.Close()
	d, err := gate(t, permission.Config{Mode: permission.Auto, Audit: audit}).Check(bg, req(permission.Write, "x"))
	if err != nil || d.Allowed || !strings.Contains(d.Reason, "audit log failed") {
		t.Errorf("allowed with a broken audit log: %+v %v", d, err)
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := gate(t, permission.Config{Mode: permission.Auto}).Check(ctx, req(permission.Write, "x")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestAskDeferred(t *testing.T) {
	later := fmt.Errorf("waiting for the client: %w", permission.ErrAskDeferred)
	g := gate(t, permission.Config{Mode: permission.Ask, Asker: func(context.Context, permission.Request) (bool, error) { return false, later }})
	d, err := g.Check(bg, req(permission.Write, "a"))
	if !errors.Is(err, permission.ErrAskDeferred) || d.Allowed {
		t.Fatalf("a deferred ask must come back as the Asker's error, got %+v %v", d, err)
	}
}

// An agent asking again and again with new arguments fills the store only
// up to MaxOpen; then asking is refused with a reason, and deciding a
// request makes room.
func TestApproveOpenRequestsBounded(t *testing.T) {
	s, err := permission.OpenStore(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for i := range permission.MaxOpen {
		st, id, err := s.Claim(bg, permission.Request{Capability: permission.Shell, Detail: fmt.Sprint(i), Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		if err != nil || st != permission.StatusPending {
			t.Fatalf("request %d: %v %v", i, st, err)
		}
		if i == 0 {
			first = id
		}
	}
	over := permission.Request{Capability: permission.Shell, Detail: "one more", Args: json.RawMessage(`{"n":-1}`)}
	if _, _, err := s.Claim(bg, over); !errors.Is(err, permission.ErrTooManyOpen) {
		t.Fatalf("request %d: %v, want ErrTooManyOpen", permission.MaxOpen+1, err)
	}
	// A request already waiting can still be asked about.
	if st, id, err := s.Claim(bg, permission.Request{Capability: permission.Shell, Detail: "0", Args: json.RawMessage(`{"n":0}`)}); err != nil || id != first || st != permission.StatusPending {
		t.Errorf("asking about a waiting request: %v %v %v", st, id, err)
	}
	if _, err := s.Decide(bg, first, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Claim(bg, permission.Request{Capability: permission.Shell, Detail: "0", Args: json.RawMessage(`{"n":0}`)}); err != nil {
		t.Fatal(err) // uses up the denial: the slot is free again
	}
	if _, _, err := s.Claim(bg, over); err != nil {
		t.Errorf("after a decision: %v", err)
	}
}

// A file that is not a store is refused with the fix named.
func TestOpenStoreNotAStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := permission.OpenStore(path)
	if !errors.Is(err, permission.ErrConfig) || !errors.Is(err, permission.ErrStoreDamaged) || !strings.Contains(err.Error(), "give another --store") {
		t.Fatalf("OpenStore of a text file: %v", err)
	}
}

// A long detail (a 1 MiB command) is cut in the reason the agent reads
// and in the audit line, with its length and a digest; a short one is
// whole (review 15c: 15 MiB requests made 15 MiB audit lines and answers).
func TestLongDetailIsCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := permission.OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	no := func(context.Context, permission.Request) (bool, error) { return false, nil }
	g, err := permission.New(permission.Config{Mode: permission.Ask, Asker: no, Audit: audit})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 1<<19) // 1 MiB, two bytes a character
	for _, c := range []struct {
		detail string
		cut    bool
	}{{"echo short", false}, {long, true}} {
		d, err := g.Check(context.Background(), permission.Request{Capability: permission.Shell, Detail: c.detail, Tool: "shell"})
		if err != nil || d.Allowed {
			t.Fatalf("%v %v", d, err)
		}
		if got := strings.Contains(d.Reason, "bytes in all, sha256"); got != c.cut || len(d.Reason) > 1200 || !utf8.ValidString(d.Reason) {
			t.Errorf("reason of %d bytes (cut %v, want %v): %.80q...", len(d.Reason), got, c.cut, d.Reason)
		}
		if !c.cut && !strings.Contains(d.Reason, c.detail) {
			t.Errorf("a short detail is not whole in %q", d.Reason)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || len(lines[1]) > 3*permission.MaxAuditText || !strings.Contains(lines[1], fmt.Sprintf("%d bytes in all", len(long))) || !strings.Contains(lines[0], `"detail":"echo short"`) {
		t.Errorf("audit: %d lines, the second of %d bytes: %.300s", len(lines), len(lines[len(lines)-1]), b)
	}
}

// Allow-list parsing: leniency on case, spaces and empty entries never
// adds a capability that was not named, and every trick that is not a
// known name exactly (after lower-casing and trimming) is refused.
func TestParseCapabilitiesNeverWidens(t *testing.T) {
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
		if got, err := permission.ParseCapabilities(in); !errors.Is(err, permission.ErrConfig) {
			t.Errorf("ParseCapabilities(%q) = %v, %v; want permission.ErrConfig", in, got, err)
		}
	}
	for _, in := range []string{"AUTO", " auto ", "Read_Only"} {
		if _, err := permission.ParseMode(in); err != nil {
			t.Errorf("ParseMode(%q): %v", in, err)
		}
	}
	for _, in := range []string{" ", "readonly", "read-only", "ａuto", "auto\x00", "yes"} {
		if m, err := permission.ParseMode(in); !errors.Is(err, permission.ErrConfig) {
			t.Errorf("ParseMode(%q) = %q, %v; want permission.ErrConfig", in, m, err)
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
func TestAskFailsClosed(t *testing.T) {
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

// A yes that arrives after the call was cancelled (the human clicked after
// the agent's request timed out, or an Asker ignores ctx) allows nothing:
// Check looks at ctx again after asking and returns ctx.Err().
// Origin: review 7.
func TestAskAnswerAfterCancelIsNotAllowed(t *testing.T) {
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
func TestRequestKeyCanonical(t *testing.T) {
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
		"escalation":    with(func(r *permission.Request) { r.Escalation = "wide" }),
		// An escalation's approval binds to its sandbox's definition too:
		// one edited after the approval runs nothing on it (a red-team pass).
		"escalation, another policy": with(func(r *permission.Request) { r.Escalation, r.EscalationPolicy = "wide", `{"write":["/b"]}` }),
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
func TestApprovalNotReplayedElsewhere(t *testing.T) {
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
func TestConcurrentDecideAndClaimOneWins(t *testing.T) {
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
func TestBrokenStoreFailsClosed(t *testing.T) {
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
				if _, err := permission.OpenStore(path); !errors.Is(err, permission.ErrConfig) || strings.Contains(err.Error(), "\n") {
					t.Errorf("OpenStore on garbage: %v; want one-line permission.ErrConfig", err)
				}
			}
		})
	}
}

// OpenStore and OpenAudit refuse (permission.ErrConfig, naming "chmod 600 FILE") an
// existing file writable or readable by others, or owned by another user:
// a group-writable store would let any local user approve the agent's
// requests, a readable one show every command asked for, a writable log be
// rewritten. Origin: review 7.
func TestStoreAndAuditMustBePrivate(t *testing.T) {
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
			t.Errorf("%s: a file others can read and write (mode %v) was used as is; want permission.ErrConfig or mode 0600", c.name, fi.Mode().Perm())
		} else if err != nil && !errors.Is(err, permission.ErrConfig) {
			t.Errorf("%s: %v; want permission.ErrConfig", c.name, err)
		}
	}
}

// Deciding frees a slot in the MaxOpen count, as ErrTooManyOpen's "decide
// or deny some" promises: only pending requests count, so an agent that
// floods the store is stopped until a person decides, not until it repeats
// 1000 calls. Origin: review 7.
func TestDecidingFreesOpenSlots(t *testing.T) {
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
func TestAuditOneLinePerDecision(t *testing.T) {
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
func TestBadInputNeverPanicsOrAllows(t *testing.T) {
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
	if _, err := permission.New(permission.Config{Mode: permission.Approve}); !errors.Is(err, permission.ErrConfig) {
		t.Errorf("approve without a store: %v", err)
	}
	if _, err := permission.OpenExistingStore(filepath.Join(t.TempDir(), "missing.db")); !errors.Is(err, permission.ErrConfig) || !strings.Contains(err.Error(), "--store") {
		t.Errorf("missing store: %v", err)
	}
}
