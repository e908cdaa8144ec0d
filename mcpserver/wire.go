package mcpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// What every transport does the same way, whatever the SDK beneath it does:
//
//   - no error response has code 0: the SDK sends a handler's plain Go
//     error (and its own, for a request before initialize, a duplicate
//     initialize or params that do not decode) with code 0, which JSON-RPC
//     does not define. wireError gives each its code;
//   - a request the client cancelled (notifications/cancelled) gets no
//     response at all, as the MCP specification asks;
//   - batches follow the negotiated protocol version (batchAllowed).

// wireError returns err as a JSON-RPC error with a defined code: err's own
// when it carries one, else the code that fits what the SDK says
// (-32600 for a request out of turn, -32602 for params that do not
// decode), else -32603.
func wireError(err error) *jsonrpc.Error {
	var we *jsonrpc.Error
	if errors.As(err, &we) && we.Code != 0 {
		if we == err {
			return we
		}
		return &jsonrpc.Error{Code: we.Code, Message: err.Error(), Data: we.Data}
	}
	msg := err.Error()
	return &jsonrpc.Error{Code: codeFor(msg), Message: msg}
}

// codeFor is the JSON-RPC code for an error the SDK sends without one, by
// its message (tests pin each message the SDK words).
func codeFor(msg string) int64 {
	switch {
	case strings.Contains(msg, "invalid during session initialization"),
		strings.Contains(msg, `duplicate "initialize"`):
		return jsonrpc.CodeInvalidRequest
	case strings.HasPrefix(msg, "handling '") && strings.Contains(msg, "unmarshal"),
		strings.Contains(msg, `"params" must be`), strings.Contains(msg, `missing required "params"`):
		return jsonrpc.CodeInvalidParams
	}
	return jsonrpc.CodeInternalError
}

// batchVersion is the one MCP version whose messages may come in JSON-RPC
// batches: 2025-03-26 added them and 2025-06-18 removed them.
const batchVersion = "2025-03-26"

// batchAllowed reports whether a batch may be sent under the negotiated
// version ("" before initialize has been answered: the initialize request
// may not be in a batch, and nothing else may come before it).
func batchAllowed(version string) bool { return version == batchVersion }

// batchRefusal is the error a refused batch gets, once for each request in
// it that has an id (or once, under id null, when none has).
func batchRefusal(version string) *jsonrpc.Error {
	why := "before initialize"
	if version != "" {
		why = "under protocol version " + version
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(
		"Invalid Request: JSON-RPC batches are not allowed %s (only %s has them); nothing in the batch was done: send each message on its own", why, batchVersion)}
}

// knownMethods are the methods the SDK's server dispatches (ServerSession
// and Server handlers); any other is "method not found". The HTTP
// transport checks against it before the SDK, which would answer an
// unknown method with HTTP 400 and plain text.
var knownMethods = map[string]bool{
	"initialize": true, "ping": true, "tools/list": true, "tools/call": true,
	"prompts/list": true, "prompts/get": true, "resources/list": true, "resources/templates/list": true,
	"resources/read": true, "resources/subscribe": true, "resources/unsubscribe": true,
	"logging/setLevel": true, "completion/complete": true, "subscriptions/listen": true, "server/discover": true,
	"notifications/cancelled": true, "notifications/initialized": true,
	"notifications/roots/list_changed": true, "notifications/progress": true,
}

// needParams are the methods whose requests must have params (the SDK's
// rule); notifications are the methods that are notifications.
var (
	needParams = map[string]bool{
		"initialize": true, "tools/call": true, "prompts/get": true, "resources/read": true,
		"resources/subscribe": true, "resources/unsubscribe": true, "logging/setLevel": true,
		"completion/complete": true, "subscriptions/listen": true, "notifications/progress": true,
	}
	notifications = map[string]bool{
		"notifications/cancelled": true, "notifications/initialized": true,
		"notifications/roots/list_changed": true, "notifications/progress": true,
	}
)

// precheck applies the SDK's checks of a request before dispatch, with the
// answers the SDK gives on stdio: an unknown method is -32601, a request
// that is no call of its method or lacks its params -32600; drop is true
// for a notification that gets no answer (of an unknown method, or of a
// call's method without an id). The SDK's HTTP handler would answer each
// with HTTP 400 in plain text.
func precheck(req *jsonrpc.Request) (answer *jsonrpc.Response, drop bool) {
	var e *jsonrpc.Error
	switch {
	case !knownMethods[req.Method]:
		e = methodNotFound(req.Method)
	case notifications[req.Method] && req.IsCall():
		e = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("Invalid Request: %q is a notification: it has no id", req.Method)}
	case !notifications[req.Method] && !req.IsCall():
		return nil, true
	case needParams[req.Method] && len(req.Params) == 0:
		e = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(`Invalid Request: missing required "params" of %q`, req.Method)}
	default:
		return nil, false
	}
	if !req.IsCall() {
		return nil, true
	}
	return &jsonrpc.Response{ID: req.ID, Error: e}, false
}

// undeclaredMethods are answered by the SDK whatever the server declares;
// hutch declares only tools, so these are "method not found" (see
// undeclared).
var undeclaredMethods = map[string]string{
	"prompts/list": "prompts", "prompts/get": "prompts",
	"resources/list": "resources", "resources/templates/list": "resources", "resources/read": "resources",
	"resources/subscribe": "resources", "resources/unsubscribe": "resources",
	"logging/setLevel": "logging", "completion/complete": "completions",
}

func methodNotFound(method string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("Method not found: %q", method)}
}

// maxCancelled bounds the cancelled request ids a session remembers.
const maxCancelled = 256

// wire is what one session's transport knows about the messages crossing
// it: the negotiated version, the initialize request being answered, and
// the requests the client cancelled (whose responses are dropped).
type wire struct {
	mu        sync.Mutex
	version   string
	initID    jsonrpc.ID
	cancelled []jsonrpc.ID // the most recent maxCancelled, oldest first
}

func (w *wire) negotiated() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.version
}

// received notes a message from the client: an initialize request, whose
// response carries the version, or a cancellation.
func (w *wire) received(m jsonrpc.Message) {
	req, ok := m.(*jsonrpc.Request)
	if !ok {
		return
	}
	switch req.Method {
	case "initialize":
		if req.ID.IsValid() {
			w.mu.Lock()
			w.initID = req.ID
			w.mu.Unlock()
		}
	case "notifications/cancelled":
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) != nil {
			return
		}
		id, err := jsonrpc.MakeID(p.RequestID)
		if err != nil || !id.IsValid() {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.cancelled) >= maxCancelled {
			w.cancelled = append(w.cancelled[:0], w.cancelled[1:]...)
		}
		w.cancelled = append(w.cancelled, id)
	}
}

// sending vets a response on its way to the client: drop reports that it
// answers a cancelled request; otherwise err is its error with a defined
// code (nil: unchanged). A successful initialize response sets the
// version.
func (w *wire) sending(r *jsonrpc.Response) (drop bool, fixed *jsonrpc.Error) {
	w.mu.Lock()
	for _, id := range w.cancelled {
		if id == r.ID {
			w.mu.Unlock()
			return true, nil
		}
	}
	isInit := r.ID.IsValid() && r.ID == w.initID
	w.mu.Unlock()
	if isInit && r.Error == nil {
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(r.Result, &res) == nil && res.ProtocolVersion != "" {
			w.mu.Lock()
			w.version = res.ProtocolVersion
			w.initID = jsonrpc.ID{}
			w.mu.Unlock()
		}
	}
	if r.Error != nil {
		var we *jsonrpc.Error
		if !errors.As(r.Error, &we) || we.Code == 0 {
			return false, wireError(r.Error)
		}
	}
	return false, nil
}
