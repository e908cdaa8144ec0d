package mcpserver

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of the events the HTTP transport keeps so a client that lost a
// stream (a dropped POST or GET) can reconnect with Last-Event-ID and get
// what it missed, the result of a long call among them. Past a bound the
// oldest events go first: of the session over its share, else of the
// largest session. A client asking for events that went gets an error
// (HTTP 400 "failed to replay events") instead of a partial replay.
const (
	MaxEventBytes        = 4 << 20 // all sessions together
	MaxSessionEventBytes = 1 << 20 // one session
)

// eventOverhead is what an event costs beyond its bytes (its slice
// headers, its share of the maps), so that empty events (the priming
// event each stream starts with) are bounded too.
const eventOverhead = 64

// eventStore is an mcp.EventStore in memory, bounded in all and per
// session. (The SDK's MemoryEventStore has one bound for all sessions,
// which one busy session can fill, and keeps the stream entries of every
// call a session made.)
type eventStore struct {
	mu         sync.Mutex
	max, share int
	total      int
	sessions   map[string]*sessionEvents
	// closed, when set, is told of every session the SDK closed.
	closed func(sessionID string)
}

type sessionEvents struct {
	size    int
	streams map[string]*streamEvents
	order   []string // the stream of each event held, oldest first
	// gone holds, for streams whose events all went, the index their next
	// event will have (a long call's stream may go on after its first
	// events went); at most maxGone, the oldest forgotten first.
	gone      map[string]int
	goneOrder []string
}

// maxGone bounds the streams a session remembers the length of after their
// events went.
const maxGone = 4096

type streamEvents struct {
	first int // the index of data[0] in the stream
	data  [][]byte
}

func newEventStore(max, share int) *eventStore {
	return &eventStore{max: max, share: share, sessions: map[string]*sessionEvents{}}
}

func (s *eventStore) stream(sessionID, streamID string) (*sessionEvents, *streamEvents) {
	se := s.sessions[sessionID]
	if se == nil {
		se = &sessionEvents{streams: map[string]*streamEvents{}}
		s.sessions[sessionID] = se
	}
	st := se.streams[streamID]
	if st == nil {
		st = &streamEvents{}
		if first, ok := se.gone[streamID]; ok {
			st.first = first
			delete(se.gone, streamID)
		}
		se.streams[streamID] = st
	}
	return se, st
}

// Open implements mcp.EventStore.
func (s *eventStore) Open(_ context.Context, sessionID, streamID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stream(sessionID, streamID)
	return nil
}

// Append implements mcp.EventStore. The event appended is kept even when
// it alone is over a bound.
func (s *eventStore) Append(_ context.Context, sessionID, streamID string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, st := s.stream(sessionID, streamID)
	cost := len(data) + eventOverhead
	for se.size > 0 && se.size+cost > s.share {
		s.evict(se)
	}
	for s.total+cost > s.max {
		var big *sessionEvents
		for _, o := range s.sessions {
			if o.size > 0 && (big == nil || o.size > big.size) {
				big = o
			}
		}
		if big == nil {
			break
		}
		s.evict(big)
	}
	st.data = append(st.data, data)
	se.order = append(se.order, streamID)
	se.size += cost
	s.total += cost
	return nil
}

// evict drops se's oldest event; a stream left with none is forgotten.
func (s *eventStore) evict(se *sessionEvents) {
	id := se.order[0]
	se.order = se.order[1:]
	st := se.streams[id]
	cost := len(st.data[0]) + eventOverhead
	st.data[0] = nil
	st.data = st.data[1:]
	st.first++
	if len(st.data) == 0 && id != "" {
		delete(se.streams, id)
		if se.gone == nil {
			se.gone = map[string]int{}
		}
		for len(se.goneOrder) >= maxGone {
			delete(se.gone, se.goneOrder[0])
			se.goneOrder = se.goneOrder[1:]
		}
		se.gone[id] = st.first
		se.goneOrder = append(se.goneOrder, id)
	}
	se.size -= cost
	s.total -= cost
}

// After implements mcp.EventStore.
func (s *eventStore) After(_ context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	s.mu.Lock()
	var data [][]byte
	var err error
	se := s.sessions[sessionID]
	st := (*streamEvents)(nil)
	if se != nil {
		st = se.streams[streamID]
	}
	switch start := 0; {
	case st == nil:
		err = fmt.Errorf("no events of stream %q are kept: %w", streamID, mcp.ErrEventsPurged)
	default:
		start = index + 1 - st.first
		if start < 0 {
			err = fmt.Errorf("events after %d of stream %q are no longer kept: %w", index, streamID, mcp.ErrEventsPurged)
		} else if start < len(st.data) {
			data = slices.Clone(st.data[start:])
		}
	}
	s.mu.Unlock()
	return func(yield func([]byte, error) bool) {
		if err != nil {
			yield(nil, err)
			return
		}
		for _, d := range data {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// SessionClosed implements mcp.EventStore.
func (s *eventStore) SessionClosed(_ context.Context, sessionID string) error {
	s.mu.Lock()
	if se := s.sessions[sessionID]; se != nil {
		s.total -= se.size
		delete(s.sessions, sessionID)
	}
	s.mu.Unlock()
	if s.closed != nil {
		s.closed(sessionID)
	}
	return nil
}
