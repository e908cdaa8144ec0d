package permission_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hutchsandbox/hutch/internal/testenv"
	"github.com/hutchsandbox/hutch/permission"
)

// auditEntry is a decision to record, its detail n bytes long.
func auditEntry(n int) permission.AuditEntry {
	return permission.AuditEntry{Time: time.Now().UTC(), Capability: permission.Write, Detail: strings.Repeat("d", n),
		Tool: "write_file", Mode: permission.Auto, Outcome: "allowed", By: "mode"}
}

// checkLines fails t unless every line of the log at path parses and
// there are want of them, the file ending in a newline.
func checkLines(t *testing.T, path string, want int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("the log ends without a newline: ...%q", b[max(0, len(b)-40):])
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(b) == 0 {
		lines = nil
	}
	for i, l := range lines {
		var e permission.AuditEntry
		if err := json.Unmarshal(l, &e); err != nil {
			t.Errorf("line %d does not parse (%v): %.80q...", i+1, err, l)
		}
	}
	if len(lines) != want {
		t.Errorf("%d lines, want %d", len(lines), want)
	}
}

// On a full disk the log ended in a torn line (`..."mode":"au`, no
// newline), and once space was freed the next line was glued to it. A
// write that does not fit is now undone and is Record's error.
func TestAuditLogRecoversFromAShortWrite(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		testenv.Missing(t, "mounting a small tmpfs needs root: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	path := filepath.Join(dir, "audit.jsonl")
	log, err := permission.OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	for range 2 { // the log's last page partly used
		if err := log.Record(auditEntry(100)); err != nil {
			t.Fatal(err)
		}
	}
	// Fill what is left, to the page.
	fill := filepath.Join(dir, "fill")
	f, err := os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = f.Write(make([]byte, 4096))
	}
	_ = f.Close()
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v", err)
	}
	if err := log.Record(auditEntry(permission.MaxAuditText)); err == nil {
		t.Fatal("Record on a full disk did not fail")
	}
	checkLines(t, path, 2)
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	if err := log.Record(auditEntry(100)); err != nil {
		t.Fatalf("Record once space is free: %v", err)
	}
	checkLines(t, path, 3)
}

// A log whose last line a crash cut short gets the next record on a line
// of its own, not glued to the fragment.
func TestAuditLogStartsAfterATornLineOnALineOfItsOwn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte(`{"capability":"write","mode":"au`), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := permission.OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	for range 2 {
		if err := log.Record(auditEntry(10)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 3 || lines[0] != `{"capability":"write","mode":"au` {
		t.Fatalf("want the fragment, then two records, a line each; got %q", b)
	}
	for _, l := range lines[1:] {
		var e permission.AuditEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Outcome != "allowed" {
			t.Errorf("a record does not parse (%v): %q", err, l)
		}
	}
}
