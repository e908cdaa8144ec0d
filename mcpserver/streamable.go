package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hutchsandbox/hutch/tool"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Handler serves the streamable HTTP transport; each session gets its own
// toolset. Requests through a localhost address with a foreign Host header
// (DNS rebinding) and cross-origin browser requests are refused.
//
// Sessions are bounded: one with no request for SessionIdle is closed (a
// client that comes back starts a new one), and while MaxSessions are
// open a new one is refused (503) with a line saying so.
//
// In front of the SDK's handler, every transport rule of this package
// holds over HTTP as on stdio: an unknown method is a JSON-RPC -32601
// error (an unknown notification is accepted and dropped); a batch is
// refused unless the session negotiated 2025-03-26; no error response has
// code 0; a cancelled request gets no response. Streams are resumable:
// their events carry ids and are kept (within MaxEventBytes and
// MaxSessionEventBytes) for a client reconnecting with Last-Event-ID.
func Handler(cfg Config) (http.Handler, error) {
	// The SDK asks for a server on every request (also to check the
	// protocol version), not only for a new session: a server with its own
	// toolset is made once per new session, here, and handed to the SDK
	// through the request's context; every other request gets template.
	template, err := New(cfg)
	if err != nil {
		return nil, err
	}
	open := &httpSessions{byID: map[string]*httpSession{}}
	events := newEventStore(MaxEventBytes, MaxSessionEventBytes)
	events.closed = open.closed
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if srv, ok := r.Context().Value(newServerKey{}).(*mcp.Server); ok {
			return srv
		}
		return template
	}, &mcp.StreamableHTTPOptions{
		SessionTimeout:      SessionIdle,
		EventStore:          events,
		MaxRequestBodyBytes: maxBody,
	})
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		var st *httpSession
		if id != "" {
			if st = open.get(id); st == nil {
				h.ServeHTTP(w, r) // the SDK says the session is not found
				return
			}
		}
		if r.Method != http.MethodPost {
			if st != nil {
				w = &filterWriter{ResponseWriter: w, wire: &st.wire}
			}
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			http.Error(w, "hutch: reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		msgs, raws, batch, ok := decodeBody(body)
		if !ok || len(body) > maxBody {
			h.ServeHTTP(w, r) // the SDK words what is wrong with it
			return
		}
		version := ""
		if st != nil {
			version = st.wire.negotiated()
		}
		if batch && !batchAllowed(version) {
			e := batchRefusal(version)
			var out []*jsonrpc.Response
			for _, m := range msgs {
				if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
					out = append(out, &jsonrpc.Response{ID: req.ID, Error: e})
				}
			}
			if len(out) == 0 {
				out = append(out, &jsonrpc.Response{Error: e})
			}
			writeResponses(w, http.StatusBadRequest, out, len(out) > 1)
			return
		}
		// What the SDK's checks refuse is answered here as on stdio (it
		// would answer HTTP 400 in plain text): an unknown method -32601,
		// and so on (precheck). The rest goes on.
		var unknown []*jsonrpc.Response
		var kept [][]byte
		var keptMsgs []jsonrpc.Message
		for i, m := range msgs {
			if req, ok := m.(*jsonrpc.Request); ok {
				if answer, drop := precheck(req); answer != nil || drop {
					if answer != nil {
						unknown = append(unknown, answer)
					}
					continue
				}
			}
			kept = append(kept, raws[i])
			keptMsgs = append(keptMsgs, m)
		}
		if len(kept) == 0 {
			if len(unknown) == 0 {
				w.WriteHeader(http.StatusAccepted) // notifications only: nothing to answer
				return
			}
			writeResponses(w, http.StatusOK, unknown, batch)
			return
		}
		if len(kept) < len(msgs) {
			body = append(append([]byte{'['}, bytes.Join(kept, []byte{','})...), ']')
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		if st == nil {
			var done func()
			if st, done, ok = open.start(w, cfg); !ok {
				return
			}
			defer done()
			r = r.WithContext(context.WithValue(r.Context(), newServerKey{}, st.srv))
		}
		for _, m := range keptMsgs {
			st.wire.received(m)
		}
		h.ServeHTTP(&filterWriter{ResponseWriter: w, wire: &st.wire, extra: unknown}, r)
	})
	return http.NewCrossOriginProtection().Handler(serve), nil
}

// maxBody bounds one POST body (the SDK's default).
const maxBody = mcp.DefaultMaxRequestBodyBytes

// decodeBody decodes a POST body: one message, or a batch (a JSON array)
// of them, with each message's bytes. ok is false when any of it is no
// JSON-RPC message (the SDK then answers 400 with the reason).
func decodeBody(body []byte) (msgs []jsonrpc.Message, raws []json.RawMessage, batch, ok bool) {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		if json.Unmarshal(body, &raws) != nil || len(raws) == 0 {
			return nil, nil, true, false
		}
		batch = true
	} else {
		raws = []json.RawMessage{body}
	}
	for _, raw := range raws {
		m, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return nil, nil, batch, false
		}
		msgs = append(msgs, m)
	}
	return msgs, raws, batch, true
}

// writeResponses answers a POST with JSON-RPC responses: one object, or an
// array when asArray.
func writeResponses(w http.ResponseWriter, status int, rs []*jsonrpc.Response, asArray bool) {
	var enc [][]byte
	for _, r := range rs {
		data, err := jsonrpc.EncodeMessage(r)
		if err != nil { // cannot happen: ids and errors only
			http.Error(w, "hutch: "+err.Error(), http.StatusInternalServerError)
			return
		}
		enc = append(enc, data)
	}
	out := []byte(enc[0])
	if asArray {
		out = append(append([]byte{'['}, bytes.Join(enc, []byte{','})...), ']')
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// SessionIdle and MaxSessions bound the HTTP transport's sessions, each a
// toolset with its own memory (see Handler).
const (
	SessionIdle = 30 * time.Minute
	MaxSessions = 256
)

// newServerKey holds, in a new session's request, the server made for it.
type newServerKey struct{}

// httpSessions are the HTTP sessions open, and those being started, by
// the id hutch gives each (the SDK asks the session's server for it).
// start counts one in and refuses past MaxSessions in one step, so
// initializes arriving together cannot all pass a check made before any
// of them has its session.
type httpSessions struct {
	mu   sync.Mutex
	byID map[string]*httpSession
}

type httpSession struct {
	srv      *mcp.Server
	tools    *tool.Toolset
	wire     wire
	starting bool // the request that starts it is being served
}

// closed ends the session id's toolset (its background processes) once
// the SDK has closed the session (idle, deleted, or its server stopping).
func (o *httpSessions) closed(id string) {
	o.mu.Lock()
	s := o.byID[id]
	delete(o.byID, id)
	o.mu.Unlock()
	if s != nil {
		go s.tools.Close()
	}
}

func (o *httpSessions) get(id string) *httpSession {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byID[id]
}

// start makes a new session's server, unless MaxSessions are open or
// being started (then it answers w 503); done must follow once the
// request that starts it has been served.
func (o *httpSessions) start(w http.ResponseWriter, cfg Config) (_ *httpSession, done func(), ok bool) {
	o.mu.Lock()
	for id, s := range o.byID {
		if !s.starting && !hasSession(s.srv) {
			delete(o.byID, id)
			go s.tools.Close()
		}
	}
	full := len(o.byID) >= MaxSessions
	o.mu.Unlock()
	if full {
		http.Error(w, fmt.Sprintf("hutch: %d MCP sessions are open, the most it serves at once: end one (DELETE) or wait until an idle one closes (after %v)", MaxSessions, SessionIdle), http.StatusServiceUnavailable)
		return nil, nil, false
	}
	cfg.sessionID = rand.Text()
	srv, ts, err := newServer(cfg)
	if err != nil { // cannot happen: the template was made from cfg
		http.Error(w, "hutch: "+err.Error(), http.StatusInternalServerError)
		return nil, nil, false
	}
	s := &httpSession{srv: srv, tools: ts, starting: true}
	o.mu.Lock()
	if len(o.byID) >= MaxSessions {
		o.mu.Unlock()
		http.Error(w, fmt.Sprintf("hutch: %d MCP sessions are open, the most it serves at once: end one (DELETE) or wait until an idle one closes (after %v)", MaxSessions, SessionIdle), http.StatusServiceUnavailable)
		return nil, nil, false
	}
	o.byID[cfg.sessionID] = s
	o.mu.Unlock()
	return s, func() {
		o.mu.Lock()
		s.starting = false
		o.mu.Unlock()
	}, true
}

func hasSession(srv *mcp.Server) bool {
	for range srv.Sessions() {
		return true
	}
	return false
}

// filterWriter passes the SDK's response on, vetting each server-sent
// event that carries a response: one to a cancelled request is dropped
// (its event id kept, so the client's Last-Event-ID stays right), and an
// error without a JSON-RPC code gets one. The responses in extra (to
// methods of a batch the SDK does not know) go first.
type filterWriter struct {
	http.ResponseWriter
	wire    *wire
	extra   []*jsonrpc.Response
	decided bool
	sse     bool
	buf     []byte
}

func (f *filterWriter) decide() {
	if !f.decided {
		f.decided = true
		f.sse = strings.HasPrefix(f.Header().Get("Content-Type"), "text/event-stream")
	}
}

func (f *filterWriter) WriteHeader(code int) {
	f.decide()
	f.ResponseWriter.WriteHeader(code)
}

func (f *filterWriter) Write(p []byte) (int, error) {
	f.decide()
	if !f.sse {
		return f.ResponseWriter.Write(p)
	}
	for _, r := range f.extra {
		if data, err := jsonrpc.EncodeMessage(r); err == nil {
			if _, err := fmt.Fprintf(f.ResponseWriter, "event: message\ndata: %s\n\n", data); err != nil {
				return 0, err
			}
		}
	}
	f.extra = nil
	f.buf = append(f.buf, p...)
	for {
		i := bytes.Index(f.buf, []byte("\n\n"))
		if i < 0 {
			return len(p), nil
		}
		out := f.event(f.buf[:i+2])
		f.buf = f.buf[i+2:]
		if len(out) > 0 {
			if _, err := f.ResponseWriter.Write(out); err != nil {
				return len(p), err
			}
		}
	}
}

// event vets one server-sent event (ending in a blank line).
func (f *filterWriter) event(ev []byte) []byte {
	lines := bytes.Split(bytes.TrimSuffix(ev, []byte("\n\n")), []byte("\n"))
	at := -1
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("data: ")) {
			at = i
		}
	}
	if at < 0 {
		return ev
	}
	m, err := jsonrpc.DecodeMessage(lines[at][len("data: "):])
	if err != nil {
		return ev
	}
	r, ok := m.(*jsonrpc.Response)
	if !ok {
		return ev
	}
	drop, fixed := f.wire.sending(r)
	switch {
	case drop:
		for _, l := range lines {
			if bytes.HasPrefix(l, []byte("id: ")) {
				return append(bytes.Clone(l), "\n\n"...)
			}
		}
		return nil
	case fixed != nil:
		data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: r.ID, Error: fixed})
		if err != nil {
			return ev
		}
		lines[at] = append([]byte("data: "), data...)
		return append(bytes.Join(lines, []byte("\n")), "\n\n"...)
	}
	return ev
}

// Flush sends what was written (the SDK flushes every event).
func (f *filterWriter) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

func (f *filterWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }
