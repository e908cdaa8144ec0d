package mcpserver

import (
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The event store keeps within its bounds, per session and in all, by
// dropping the oldest events, and a replay from before what it dropped is
// an error, never a partial replay; indexes survive a stream emptied.
func TestEventStoreBounds(t *testing.T) {
	ctx := t.Context()
	const ev = 100
	data := []byte(strings.Repeat("x", ev))
	cost := ev + eventOverhead
	s := newEventStore(10*cost, 4*cost)
	count := func(session, stream string, after int) (int, error) {
		n := 0
		for _, err := range s.After(ctx, session, stream, after) {
			if err != nil {
				return n, err
			}
			n++
		}
		return n, nil
	}
	for range 6 {
		_ = s.Append(ctx, "a", "1", data)
	}
	if n, err := count("a", "1", 1); err != nil || n != 4 {
		t.Errorf("session a after 6 events with room for 4: %d kept, %v", n, err)
	}
	if _, err := count("a", "1", 0); !errors.Is(err, mcp.ErrEventsPurged) {
		t.Errorf("replay from before the dropped events: %v, want ErrEventsPurged", err)
	}
	for _, id := range []string{"b", "c"} {
		for range 4 {
			_ = s.Append(ctx, id, "1", data)
		}
	}
	if s.total > 10*cost {
		t.Errorf("%d bytes held, bound %d", s.total, 10*cost)
	}
	// A stream whose events all went keeps its indexes.
	_ = s.Append(ctx, "d", "long", data)
	for range 4 {
		_ = s.Append(ctx, "d", "other", data)
	}
	_ = s.Append(ctx, "d", "long", data) // index 1
	if n, err := count("d", "long", 0); err != nil || n != 1 {
		t.Errorf("after index 0 of a stream emptied and appended to again: %d, %v", n, err)
	}
	_ = s.SessionClosed(ctx, "a")
	if _, ok := s.sessions["a"]; ok {
		t.Error("a closed session's events are kept")
	}
}
