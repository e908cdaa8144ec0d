package permission

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Review 15c (fixed): MaxOpen bounded how many requests may wait, not how
// large they are: every
// pending request stores the call's whole arguments (and the detail), so a
// model in approve mode grows the store by the size of each call it makes
// (up to the transport's 16 MiB per message). At MaxOpen that is about
// 1000 x 16 MiB on disk, and "hutch approvals list" loads every record into
// memory (30 pending 10 MiB write_file calls made a 411 MiB store and a
// 633 MiB "approvals list"). Records are never deleted, so denying them
// does not give the space back. This claims 6 requests of 8 MiB each and
// wants each to cost the store well under 1 MiB.
func TestReview15cPendingStoreGrowsWithArguments(t *testing.T) {
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
	// Fixed: the store keeps the start of such arguments, their size and
	// a digest; the approval still binds to all of them.
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
