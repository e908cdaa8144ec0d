package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/permission"
)

// approveModeStore makes an approval store in dir and returns its path,
// the store, and ask, which has an approve-mode gate on it file a pending
// shell request and returns its id.
func approveModeStore(t *testing.T, dir string) (string, *permission.Store, func(detail string) string) {
	t.Helper()
	store, st, g := approveGate(t, dir)
	return store, st, func(detail string) string {
		_, err := g.Check(context.Background(), permission.Request{Capability: permission.Shell, Detail: detail, Tool: "shell", Args: json.RawMessage(`{"command":"` + detail + `"}`)})
		var ar *permission.ApprovalRequiredError
		if !errors.As(err, &ar) {
			t.Fatalf("want approval required: %v", err)
		}
		return ar.ID
	}
}

func TestApprovalsCLI(t *testing.T) {
	store, _, ask := approveModeStore(t, t.TempDir())
	id1, id2 := ask("make deploy"), ask("rm -rf build")

	code, out, _ := hutch(t, "", "approvals", "list", "--store", store, "--json")
	var items []map[string]any
	if err := json.Unmarshal([]byte(out), &items); err != nil || code != 0 || len(items) != 2 {
		t.Fatalf("list --json: %d %q %v", code, out, err)
	}
	for _, k := range []string{"id", "capability", "detail", "tool", "arguments", "created_at"} {
		if _, ok := items[0][k]; !ok {
			t.Errorf("list --json lacks %q: %v", k, items[0])
		}
	}
	if items[0]["id"] != id1 || items[0]["detail"] != "make deploy" || items[0]["arguments"].(map[string]any)["command"] != "make deploy" {
		t.Errorf("first item %v", items[0])
	}

	code, out, _ = hutch(t, "", "approvals", "approve", id1, "--store", store)
	if code != 0 || !strings.Contains(out, "approved "+id1) {
		t.Errorf("approve: %d %q", code, out)
	}
	code, out, _ = hutch(t, "", "approvals", "deny", id2, "--store", store)
	if code != 0 || !strings.Contains(out, "denied "+id2) {
		t.Errorf("deny: %d %q", code, out)
	}
	code, out, _ = hutch(t, "", "approvals", "list", "--store", store)
	if code != 0 || !strings.Contains(out, "no pending requests") {
		t.Errorf("list after deciding: %d %q", code, out)
	}
	code, out, _ = hutch(t, "", "approvals", "list", "--store", store, "--all")
	if code != 0 || !strings.Contains(out, id1) || !strings.Contains(out, "approved") || !strings.Contains(out, "denied") {
		t.Errorf("list --all: %q", out)
	}
	code, _, errOut := hutch(t, "", "approvals", "approve", id1, "--store", store)
	if code != 125 || !strings.Contains(errOut, "already decided") {
		t.Errorf("approving twice: %d %q", code, errOut)
	}
	code, _, errOut = hutch(t, "", "approvals", "approve", "nope", "--store", store)
	if code != 125 || !strings.Contains(errOut, "no such approval request") {
		t.Errorf("unknown id: %d %q", code, errOut)
	}
	code, _, errOut = hutch(t, "", "approvals", "list")
	if code != 125 || !strings.Contains(errOut, "store") {
		t.Errorf("missing --store: %d %q", code, errOut)
	}
	missing := filepath.Join(t.TempDir(), "typo.db")
	code, _, errOut = hutch(t, "", "approvals", "list", "--store", missing)
	if _, err := os.Stat(missing); code != 125 || !strings.Contains(errOut, "typo.db") || err == nil {
		t.Errorf("a mistyped store must be an error and not be created: %d %q %v", code, errOut, err)
	}
}

// approve and deny with --audit write the person's decision to the log;
// a log that cannot be used stops the decision before it is made.
func TestApprovalsAudit(t *testing.T) {
	dir := t.TempDir()
	store, st, ask := approveModeStore(t, dir)
	id1, id2, id3 := ask("make deploy"), ask("rm -rf build"), ask("curl x")

	shared := filepath.Join(dir, "shared.jsonl")
	if err := os.WriteFile(shared, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := hutch(t, "", "approvals", "approve", id3, "--store", store, "--audit", shared)
	if a, err := st.Get(context.Background(), id3); code != 125 || !strings.Contains(errOut, "chmod 600") || err != nil || a.Status != permission.StatusPending {
		t.Errorf("approving with a shared audit log: exit %d, %q; request %+v %v (want 125, the fix named, still pending)", code, errOut, a, err)
	}

	audit := filepath.Join(dir, "audit.jsonl")
	if code, out, errOut := hutch(t, "", "approvals", "approve", id1, "--store", store, "--audit", audit); code != 0 || !strings.Contains(out, "approved "+id1) {
		t.Fatalf("approve: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := hutch(t, "", "approvals", "deny", id2, "--store", store, "--audit", audit); code != 0 || !strings.Contains(out, "denied "+id2) {
		t.Fatalf("deny: %d %q %q", code, out, errOut)
	}
	data, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	want := []struct{ id, outcome, detail string }{{id1, "approved", "make deploy"}, {id2, "denied", "rm -rf build"}}
	if len(lines) != len(want) {
		t.Fatalf("audit log has %d lines, want %d: %q", len(lines), len(want), data)
	}
	for i, w := range want {
		var e permission.AuditEntry
		if err := json.Unmarshal([]byte(lines[i]), &e); err != nil {
			t.Fatal(err)
		}
		if e.ApprovalID != w.id || e.Outcome != w.outcome || e.By != "person" || e.Detail != w.detail ||
			e.DecidedBy != permission.CurrentUser() || e.Mode != permission.Approve {
			t.Errorf("entry %d = %+v, want %s %s by %s", i, e, w.id, w.outcome, permission.CurrentUser())
		}
	}
}

func TestMCPBadSettings(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hutch.yaml")
	if err := os.WriteFile(cfg, []byte("tier: local\nmodee: auto\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "--mode", "yolo"}, "unknown permission mode"},
		{[]string{"mcp", "--mode", "approve"}, "--store"},
		{[]string{"mcp", "--decision-ttl", "1h"}, "applies to an approval store"},
		{[]string{"mcp", "--mode", "approve", "--store", filepath.Join(dir, "a.db"), "--decision-ttl", "soon"}, "not a duration"},
		{[]string{"mcp", "--mode", "approve", "--store", filepath.Join(dir, "a.db"), "--decision-ttl", "-1h"}, "is negative"},
		{[]string{"mcp", "--allow", "teleport"}, "unknown capability"},
		{[]string{"mcp", "--config", cfg}, "modee"},
		{[]string{"mcp", "--config", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"mcp", "--tier", "local", "--root", dir, "--memory", "1G"}, "apply to --tier isolated"},
		{[]string{"mcp", "--tier", "isolated", "--memory", "lots"}, "--memory"},
		{[]string{"mcp", "--tier", "container"}, "needs an image"},
		{[]string{"mcp", "--tier", "remote"}, "needs --server URL"},
		{[]string{"mcp", "--tier", "local", "--root", dir, "--image", "x"}, "apply to --tier container"},
	} {
		code, _, errOut := hutch(t, "", c.args...)
		if code != 125 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q (want 125 and %q on one line)", c.args, code, errOut, c.want)
		}
	}
}

// noCrash fails t when out holds a Go crash (a panic, a fault) rather
// than hutch's one-line error.
func noCrash(t *testing.T, what, out string) {
	t.Helper()
	for _, s := range []string{"panic", "goroutine ", "fatal error", "SIGBUS", "SIGSEGV"} {
		if strings.Contains(out, s) {
			t.Errorf("%s crashed: %s", what, out)
			return
		}
	}
}

// In real processes: on a damaged store every approvals command and the
// start of an approve-mode server exit 125 with one line naming the file
// and what to do, never a Go crash; "approvals check" says the same of a
// whole store with exit 0.
func TestApprovalsCommandsOnDamagedStores(t *testing.T) {
	for _, how := range testenv.Damages {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			store, _, ask := approveModeStore(t, dir)
			var id string
			for i := range 60 {
				id = ask(fmt.Sprintf("echo %d %s", i, strings.Repeat("x", 300)))
			}
			if code, out := hutchChild(t, dir, "approvals", "check", "--store", store); code != 0 || !strings.Contains(out, "is whole: 60 requests, 60 waiting") {
				t.Errorf("check of a whole store: exit %d, %q", code, out)
			}
			testenv.DamageFile(t, store, how)
			for _, args := range [][]string{
				{"approvals", "list", "--store", store},
				{"approvals", "check", "--store", store},
				{"approvals", "approve", id, "--store", store},
				{"mcp", "--tier", "virtual", "--mode", "approve", "--store", store},
			} {
				code, out := hutchChild(t, dir, args...)
				noCrash(t, args[1], out)
				if code != 125 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, store+" is damaged: ") ||
					!strings.Contains(out, "move") {
					t.Errorf("%q: exit %d, %q; want 125 and one line naming the file, the damage and the fix", args[:2], code, out)
				}
			}
		})
	}
}

// A running approve-mode server whose store is damaged under it goes on
// serving what needs no store, and denies, with the reason audited, what
// does; it holds no descriptor on the store between calls, and serves
// from it again once it is restored or moved aside.
func TestMCPServesThroughADamagedStore(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "w")
	os.Mkdir(work, 0o700)
	os.WriteFile(filepath.Join(work, "f.txt"), []byte("hello"), 0o600)
	store, audit := filepath.Join(dir, "a.db"), filepath.Join(dir, "audit.jsonl")
	c := startMCP(t, "--tier", "local", "--root", work, "--mode", "approve", "--store", store, "--audit", audit)
	c.send(mcpInit)
	c.read(t)
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	id := 1
	call := func(tool, args string) string {
		t.Helper()
		id++
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
		b, _ := json.Marshal(c.read(t)["result"])
		return string(b)
	}
	shell := func() string { return call("shell", `{"command":"echo hi"}`) }
	first := shell()
	if !strings.Contains(first, "approval") {
		t.Fatalf("shell in approve mode: %s", first)
	}
	// Pad the store past the sizes the damages cut it to.
	for i := range 40 {
		call("shell", fmt.Sprintf(`{"command":"echo %d %s"}`, i, strings.Repeat("y", 400)))
	}
	whole, err := os.ReadFile(store)
	if err != nil {
		t.Fatal(err)
	}
	pid := c.cmd.Process.Pid
	for _, how := range []string{"truncated to 8 KiB", "truncated to half", "page headers overwritten", "empty", "replaced by text"} {
		testenv.DamageFile(t, store, how)
		if got := shell(); !strings.Contains(got, "approval store failed") || !strings.Contains(got, "is damaged") || !strings.Contains(got, store) {
			t.Errorf("%s: shell: %s; want a denial naming the damaged store", how, got)
		}
		if got := call("read_file", `{"path":"f.txt"}`); !strings.Contains(got, "hello") {
			t.Errorf("%s: read_file: %s", how, got)
		}
		if n := testenv.DescriptorsOn(t, pid, store); n != 0 {
			t.Errorf("%s: the server holds %d descriptors on the store", how, n)
		}
		os.WriteFile(store, whole, 0o600) // restored from a backup
		if got := shell(); got != first {
			t.Errorf("%s, restored: shell: %s; want %s", how, got, first)
		}
	}
	os.Rename(store, store+".damaged") // moved aside: the next call asks anew
	if got := shell(); !strings.Contains(got, "approval") || got == first {
		t.Errorf("store moved aside: shell: %s", got)
	}
	log, _ := os.ReadFile(audit)
	if n := strings.Count(string(log), "approval store failed"); n != 5 {
		t.Errorf("%d audit lines say the store failed, want 5", n)
	}
	noCrash(t, "hutch mcp", c.stderr.String())
	c.in.Close()
	if code := c.wait(t, 10*time.Second); code != 0 {
		t.Errorf("exit %d, stderr %q", code, c.stderr.String())
	}
}

// An unknown approvals subcommand ("hutch approvals deni ID", a typo) is
// refused with exit 125 and an unknown-command error, so a script that
// mistypes a denial does not see success.
// Origin: review 9.
func TestApprovalsUnknownSubcommandRefused(t *testing.T) {
	store := filepath.Join(t.TempDir(), "a.db")
	for _, args := range [][]string{
		{"approvals", "deni", "abc", "--store", store},
		{"approvals", "--store", store, "aprove", "abc"},
	} {
		code, _, errs := hutch(t, "", args...)
		if code != 125 || !strings.Contains(errs, "unknown command") {
			t.Errorf("%q: exit %d, stderr %q; want 125 and an unknown-command error", args, code, errs)
		}
	}
}

// The approvals commands on a broken or wrong store: a one-line error
// naming the file, never a new empty store and never a panic; text the
// agent chose is escaped in the listing.
// Origin: review 7.
func TestApprovalsCommandsOnBadStores(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte(strings.Repeat("not bolt ", 2000)), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"approvals", "list", "--store", garbage}, "garbage.db"},
		{[]string{"approvals", "approve", "abc", "--store", garbage}, "garbage.db"},
		{[]string{"approvals", "deny", "abc", "--store", dir}, dir},
		{[]string{"approvals", "approve", "--store", garbage}, "accepts 1 arg"},
	} {
		code, _, errOut := hutch(t, "", c.args...)
		if code != 125 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%q: exit %d, stderr %q (want 125 and %q on one line)", c.args, code, errOut, c.want)
		}
	}

	store, _, g := approveGate(t, dir)
	evil := "ls\r\x1b[2Kecho harmless\n"
	_, err := g.Check(context.Background(), permission.Request{Capability: permission.Shell, Tool: "shell\x1b[8m", Detail: evil, Args: json.RawMessage(`{}`)})
	var ar *permission.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatal(err)
	}
	code, out, _ := hutch(t, "", "approvals", "list", "--store", store)
	if code != 0 || strings.ContainsAny(out, "\r\x1b") || !strings.Contains(out, ar.ID) {
		t.Errorf("list shows raw control characters: %q", out)
	}
	code, out, _ = hutch(t, "", "approvals", "approve", ar.ID, "--store", store)
	if code != 0 || strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("approve shows raw control characters: %q", out)
	}
}

// "hutch approvals list" and "approve" print no control character of the
// agent-chosen Detail to the person's terminal: backspaces and ANSI
// escapes are escaped, so an agent cannot make "rm -rf ~" render as
// "echo ok" in the very table a human approves from.
func TestApprovalsListEscapesControlChars(t *testing.T) {
	store, _, g := approveGate(t, t.TempDir())
	cmdline := "rm -rf ~ #" + strings.Repeat("\b", 10) + "\x1b[2K\x1b[1Gecho ok"
	args, _ := json.Marshal(map[string]string{"command": cmdline})
	_, err := g.Check(context.Background(), permission.Request{Capability: permission.Shell, Detail: cmdline, Tool: "shell", Args: args})
	var ar *permission.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("want approval required: %v", err)
	}
	for _, argv := range [][]string{
		{"approvals", "list", "--store", store},
		{"approvals", "approve", ar.ID, "--store", store},
	} {
		code, out, _ := hutch(t, "", argv...)
		if code != 0 {
			t.Fatalf("%v: exit %d", argv, code)
		}
		for _, r := range out {
			if (r < 0x20 && r != '\n') || r == 0x7f {
				t.Fatalf("%v prints the agent's control character %q to the terminal: %q", argv[:2], r, out)
			}
		}
	}
}

// approvals list shows every argument of a request, not only the detail:
// a shell call's stdin or a write's content decides what it does, and a
// person approving from the table must see it. Long arguments are cut,
// saying their size. Found by a red-team pass: two shell calls that
// differed only by their stdin ("rm -rf ~") listed as the same row.
func TestApprovalsListShowsTheArguments(t *testing.T) {
	store, _, g := approveGate(t, t.TempDir())
	for _, args := range []string{`{"command":"sh","stdin":"rm -rf ~"}`, `{"command":"sh","stdin":"` + strings.Repeat("x", 500) + `"}`} {
		_, err := g.Check(context.Background(), permission.Request{Capability: permission.Shell, Detail: "sh", Tool: "shell", Args: json.RawMessage(args)})
		var ar *permission.ApprovalRequiredError
		if !errors.As(err, &ar) {
			t.Fatalf("want approval required: %v", err)
		}
	}
	code, out, _ := hutch(t, "", "approvals", "list", "--store", store)
	if code != 0 || !strings.Contains(out, `"stdin":"rm -rf ~"`) || !strings.Contains(out, "bytes: --json shows them") || strings.Contains(out, strings.Repeat("x", 300)) {
		t.Errorf("approvals list: %d %q", code, out)
	}
}

// approveGate makes an approval store in dir and returns its path, the
// store and an approve-mode gate on it.
func approveGate(t *testing.T, dir string) (string, *permission.Store, *permission.Gate) {
	t.Helper()
	store := filepath.Join(dir, "a.db")
	st, err := permission.OpenStore(store)
	if err != nil {
		t.Fatal(err)
	}
	g, err := permission.New(permission.Config{Mode: permission.Approve, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return store, st, g
}
