package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxMessage bounds one inbound JSON-RPC message on the stdio transport.
const MaxMessage = 16 << 20

// LineTransport is newline-delimited JSON-RPC over a reader and a writer,
// as the MCP stdio transport specifies. It does the same job as the SDK's
// StdioTransport with less work per message: one reused line buffer and
// one decode, where the SDK's stream decoder allocated a large buffer for
// every message (a third of the server's time in a read_file round trip).
type LineTransport struct {
	In  io.Reader
	Out io.Writer
	// Limit bounds one inbound message, in bytes; 0 means MaxMessage.
	Limit int
}

// StdioTransport is a LineTransport on the process's standard input and
// output.
//
// Where standard input and output are pipes or sockets (as when an MCP
// client starts the server), they are switched to non-blocking mode and
// served by Go's network poller: a read then parks one goroutine instead
// of holding a thread in a blocking system call that the scheduler must
// notice and work around, which on a small machine costs tens of
// microseconds per message. A terminal, or a regular file, is left as it
// is. Nothing else in the process may use os.Stdin or os.Stdout then
// (nothing should: they carry the protocol).
func StdioTransport() *LineTransport {
	return &LineTransport{In: pollable(os.Stdin), Out: pollable(os.Stdout)}
}

// pollable returns f reopened on the network poller when it is a pipe or
// a socket, else f.
func pollable(f *os.File) *os.File {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f
	}
	fd := int(f.Fd())
	if syscall.SetNonblock(fd, true) != nil {
		return f
	}
	return os.NewFile(uintptr(fd), f.Name())
}

// Connect starts reading; the connection ends at EOF, on a read error or on
// Close. A line that is no JSON-RPC message does not end it: it gets an
// error reply, as JSON-RPC 2.0 says (-32700 for a line that is not JSON,
// -32600 for JSON that is no valid message, and for a line longer than
// the limit, which is discarded unread), and reading goes on. A batch
// (a JSON array) is served only under the protocol version that has
// batches (see batchAllowed), else refused whole.
func (t *LineTransport) Connect(context.Context) (mcp.Connection, error) {
	limit := t.Limit
	if limit <= 0 {
		limit = MaxMessage
	}
	c := &lineConn{incoming: make(chan readResult), closed: make(chan struct{}), out: t.Out}
	go c.readLoop(t.In, limit)
	return c, nil
}

type readResult struct {
	msgs []jsonrpc.Message
	err  error
}

type lineConn struct {
	incoming chan readResult
	closed   chan struct{}
	once     sync.Once
	queue    []jsonrpc.Message // the rest of a batch

	wmu sync.Mutex // one message per line: the SDK's writes and error replies take turns
	out io.Writer
	buf []byte

	wire wire // the negotiated version, cancelled requests
}

func (c *lineConn) readLoop(in io.Reader, limit int) {
	r := bufio.NewReaderSize(in, 64<<10)
	var long []byte     // a line longer than the reader's buffer
	discarding := false // the line read is over the limit: it is dropped up to its newline
	for {
		chunk, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if !discarding {
				long = append(long, chunk...)
				discarding = len(long) > limit
			}
			if discarding {
				long = nil
			}
			continue
		}
		line := chunk
		if long != nil {
			line = append(long, chunk...)
			long = nil
		}
		if discarding || len(line) > limit {
			discarding = false
			c.reply(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: message longer than %d bytes, the most one may hold; it was discarded", limit))
		} else if line = bytes.TrimSpace(line); len(line) > 0 {
			if msgs := c.decodeLine(line); len(msgs) > 0 && !c.deliver(readResult{msgs: msgs}) {
				return
			}
		}
		if err != nil {
			c.deliver(readResult{err: err}) // io.EOF: the client went away
			return
		}
	}
}

// decodeLine decodes one message, or a batch (a JSON array) of them; what
// is no message gets an error reply and is left out. The messages keep
// references into their bytes, so they are copied off the reader's buffer
// first.
func (c *lineConn) decodeLine(line []byte) []jsonrpc.Message {
	line = bytes.Clone(line)
	if line[0] != '[' {
		m, err := decodeMessage(line)
		if err != nil {
			c.replyInvalid(line, err)
			return nil
		}
		return []jsonrpc.Message{m}
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil {
		c.replyInvalid(line, err)
		return nil
	}
	if len(raws) == 0 {
		c.reply(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: an empty batch")
		return nil
	}
	if v := c.wire.negotiated(); !batchAllowed(v) {
		e := batchRefusal(v)
		ids := batchCallIDs(raws)
		for _, id := range ids {
			c.reply(id, e.Code, e.Message)
		}
		if len(ids) == 0 {
			c.reply(nil, e.Code, e.Message)
		}
		return nil
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	for _, raw := range raws {
		m, err := decodeMessage(raw)
		if err != nil {
			c.replyInvalid(raw, err)
			continue
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// decodeMessage decodes a request with the standard library, matching keys
// exactly as the SDK does; responses, and anything unusual, go through the
// SDK's jsonrpc.DecodeMessage, which also words the errors. (The SDK's
// decoder sets up a large buffer per call, which dominated a small request.)
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	var f map[string]json.RawMessage
	if json.Unmarshal(data, &f) == nil {
		if m, ok := plainRequest(f); ok {
			return m, nil
		}
	}
	return jsonrpc.DecodeMessage(data)
}

func plainRequest(f map[string]json.RawMessage) (*jsonrpc.Request, bool) {
	rawMethod, ok := f["method"]
	if !ok || string(f["jsonrpc"]) != `"2.0"` {
		return nil, false
	}
	var method string
	if json.Unmarshal(rawMethod, &method) != nil {
		return nil, false
	}
	var idv any
	if raw, ok := f["id"]; ok && json.Unmarshal(raw, &idv) != nil {
		return nil, false
	}
	id, err := jsonrpc.MakeID(idv)
	if err != nil {
		return nil, false
	}
	return &jsonrpc.Request{ID: id, Method: method, Params: f["params"]}, true
}

// batchCallIDs are the ids of the requests in a batch that have one (as
// the JSON values to echo).
func batchCallIDs(raws []json.RawMessage) []any {
	var ids []any
	for _, raw := range raws {
		var m struct {
			Method *string `json:"method"`
			ID     any     `json:"id"`
		}
		if json.Unmarshal(raw, &m) != nil || m.Method == nil {
			continue
		}
		switch m.ID.(type) {
		case string, float64:
			ids = append(ids, m.ID)
		}
	}
	return ids
}

func (c *lineConn) deliver(r readResult) bool {
	select {
	case c.incoming <- r:
		return true
	case <-c.closed:
		return false
	}
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if len(c.queue) > 0 {
		m := c.queue[0]
		c.queue = c.queue[1:]
		c.wire.received(m)
		return m, nil
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case r := <-c.incoming:
		if r.err != nil {
			return nil, r.err
		}
		c.queue = r.msgs[1:]
		c.wire.received(r.msgs[0])
		return r.msgs[0], nil
	}
}

// Write sends m on its own line; a response to a request the client
// cancelled is dropped, and an error without a JSON-RPC code gets one.
func (c *lineConn) Write(_ context.Context, m jsonrpc.Message) error {
	if r, ok := m.(*jsonrpc.Response); ok {
		drop, fixed := c.wire.sending(r)
		if drop {
			return nil
		}
		if fixed != nil {
			m = &jsonrpc.Response{ID: r.ID, Error: fixed}
		}
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var err error
	if c.buf, err = appendMessage(c.buf[:0], m); err != nil {
		return err
	}
	c.buf = append(c.buf, '\n')
	_, err = c.out.Write(c.buf)
	return err
}

// replyInvalid answers data, which is no JSON-RPC message (err says why
// the decoder refused it): -32700 when it is not JSON, else -32600 with
// the request's id when it has a valid one.
func (c *lineConn) replyInvalid(data []byte, err error) {
	var v any
	if jerr := json.Unmarshal(data, &v); jerr != nil {
		c.reply(nil, jsonrpc.CodeParseError, "Parse error: the message is not JSON ("+jerr.Error()+")")
		return
	}
	obj, ok := v.(map[string]any)
	if !ok {
		c.reply(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: a message is a JSON object, not %s", jsonKind(v)))
		return
	}
	// The id is echoed only for a request: a response's id is one of the
	// server's own, and an error reply under it would look like the answer
	// to a request of the client's.
	var id any
	_, isRequest := obj["method"]
	switch obj["id"].(type) {
	case string, float64:
		if isRequest {
			id = obj["id"]
		}
	case nil:
	default:
		c.reply(nil, jsonrpc.CodeInvalidRequest, `Invalid Request: "id" must be a string, a number or null`)
		return
	}
	why := err.Error()
	switch m, ok := obj["method"]; {
	case obj["jsonrpc"] != "2.0":
		why = `"jsonrpc" must be "2.0"`
	case ok && jsonKind(m) != "a string":
		why = `"method" must be a string`
	case !ok && obj["id"] == nil:
		why = `a response needs the "id" of the request it answers`
	case obj["error"] != nil:
		why = `"error" must be an object with a numeric "code" and a string "message"`
	}
	c.reply(id, jsonrpc.CodeInvalidRequest, "Invalid Request: "+why)
}

// jsonKind names the kind of a decoded JSON value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "an object"
}

// reply writes an error response (id nil: null) on the connection's
// writer, taking its turn with the SDK's writes. A failed write is left to
// the next read or write to report.
func (c *lineConn) reply(id any, code int64, msg string) {
	data, err := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", id, &jsonrpc.Error{Code: code, Message: msg}})
	if err != nil { // cannot happen: strings and numbers only
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, _ = c.out.Write(append(data, '\n'))
}

// appendMessage encodes m. A successful response is written around its
// result as is: the SDK made the result with json.Marshal, so it is already
// compact JSON, and re-encoding it (EncodeMessage) would only scan it once
// more — for a read_file result, the largest share of the encoding time.
// Anything else, or a result holding a raw newline (which would break the
// framing), goes through EncodeMessage.
func appendMessage(buf []byte, m jsonrpc.Message) ([]byte, error) {
	if r, ok := m.(*jsonrpc.Response); ok && r.Error == nil && r.ID.IsValid() && len(r.Result) > 0 &&
		bytes.IndexByte(r.Result, '\n') < 0 {
		id, err := json.Marshal(r.ID.Raw())
		if err == nil {
			buf = append(buf, `{"jsonrpc":"2.0","id":`...)
			buf = append(buf, id...)
			buf = append(buf, `,"result":`...)
			buf = append(buf, r.Result...)
			return append(buf, '}'), nil
		}
	}
	data, err := jsonrpc.EncodeMessage(m)
	return append(buf, data...), err
}

func (c *lineConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *lineConn) SessionID() string { return "" }
