package mcpserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The fast paths must produce exactly what the SDK's codec produces.
func TestCodecMatchesSDK(t *testing.T) {
	id1, _ := jsonrpc.MakeID(float64(7))
	id2, _ := jsonrpc.MakeID("abc\"\n")
	out := []jsonrpc.Message{
		&jsonrpc.Response{ID: id1, Result: json.RawMessage(`{"content":[{"type":"text","text":"a\nb"}]}`)},
		&jsonrpc.Response{ID: id2, Result: json.RawMessage(`{}`)},
		&jsonrpc.Response{ID: id1, Error: &jsonrpc.Error{Code: -32602, Message: "bad"}},
		&jsonrpc.Response{ID: id1, Result: json.RawMessage("{\n}")}, // not compact: slow path
		&jsonrpc.Request{ID: id1, Method: "ping"},
	}
	for _, m := range out {
		want, err := jsonrpc.EncodeMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendMessage(nil, m)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("appendMessage = %s, %v\nEncodeMessage = %s", got, err, want)
		}
		if bytes.IndexByte(got, '\n') >= 0 {
			t.Errorf("encoded message holds a raw newline: %q", got)
		}
	}

	in := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a"}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":null,"method":"n"}`,
		`{"jsonrpc":"2.0","id":3,"method":""}`,
		`{"jsonrpc":"2.0","id":2,"result":{"ok":true}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":1,"Method":"ping"}`, // keys match exactly, as in the SDK
		`{"JSONRPC":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":5}`,
		`[1,2]`,
		`{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`,
	}
	for _, s := range in {
		want, werr := jsonrpc.DecodeMessage([]byte(s))
		got, gerr := decodeMessage([]byte(s))
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n decodeMessage = %#v, %v\n DecodeMessage = %#v, %v", s, got, gerr, want, werr)
		}
	}
}

// FuzzDecodeMessage: the fast decoder agrees with the SDK's on any input.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":[1,{"b":null}]}}`,
		`{"jsonrpc":"2.0","id":"x","method":"ping"}`, `{"jsonrpc":"2.0","method":"n"}`,
		`{"jsonrpc":"2.0","id":2,"result":{}}`, `{"jsonrpc":"2.0","id":1,"Method":"ping"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"p"}`, `{"jsonrpc":"2.0","id":1e3,"method":"p"}`,
		`{"jsonrpc":"2.0","id":1,"method":"\u0070ing"}`, `{"jsonrpc":"2.0","id":-0,"method":"p"}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"method":"p"}`, `{"jsonrpc":"2.0","id":1,"method":"p","params":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, werr := jsonrpc.DecodeMessage(data)
		got, gerr := decodeMessage(data)
		if (werr == nil) != (gerr == nil) || (werr == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("%q:\n decodeMessage = %#v, %v\n DecodeMessage = %#v, %v", data, got, gerr, want, werr)
		}
	})
}

// FuzzDecodeLine: any line is either delivered as messages or answered,
// and every reply is one line of JSON with an error code.
func FuzzDecodeLine(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":2,"method":`, `{garbage`,
		`{"foo":1}`, `[]`, `123`, `"hello"`, `{"jsonrpc":"1.0","id":1,"method":"p"}`,
		`{"jsonrpc":"2.0","id":{},"method":"p"}`, `[1,{"jsonrpc":"2.0","id":3,"method":"p"}]`,
		`{"jsonrpc":"2.0","id":9,"error":"x"}`, `{"jsonrpc":"2.0","result":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || bytes.IndexByte(line, '\n') >= 0 {
			return
		}
		var out bytes.Buffer
		c := &lineConn{out: &out}
		msgs := c.decodeLine(line)
		replies := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
		if out.Len() == 0 {
			replies = nil
		}
		if len(msgs) == 0 && len(replies) == 0 {
			t.Fatalf("%q: neither delivered nor answered", line)
		}
		for _, r := range replies {
			var m struct {
				ID    any `json:"id"`
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(r, &m); err != nil || (m.Error.Code != jsonrpc.CodeParseError && m.Error.Code != jsonrpc.CodeInvalidRequest) || m.Error.Message == "" {
				t.Fatalf("%q: reply %q (%v)", line, r, err)
			}
		}
	})
}
