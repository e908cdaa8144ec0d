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
}

// StdioTransport is a LineTransport on the process's standard input and
// output.
func StdioTransport() *LineTransport { return &LineTransport{In: os.Stdin, Out: os.Stdout} }

// Connect starts reading; the connection ends at EOF, on a read error or on
// Close.
func (t *LineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{incoming: make(chan readResult), closed: make(chan struct{}), out: t.Out}
	go c.readLoop(t.In)
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

	wmu sync.Mutex
	out io.Writer
	buf []byte
}

func (c *lineConn) readLoop(in io.Reader) {
	r := bufio.NewReaderSize(in, 64<<10)
	var long []byte // a line longer than the reader's buffer
	for {
		chunk, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, chunk...)
			if len(long) > MaxMessage {
				c.deliver(readResult{err: fmt.Errorf("message longer than %d bytes", MaxMessage)})
				return
			}
			continue
		}
		line := chunk
		if long != nil {
			line = append(long, chunk...)
			long = nil
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			msgs, derr := decodeLine(line)
			if !c.deliver(readResult{msgs: msgs, err: derr}) || derr != nil {
				return
			}
		}
		if err != nil {
			c.deliver(readResult{err: err}) // io.EOF: the client went away
			return
		}
	}
}

// decodeLine decodes one message, or a batch (a JSON array) of them. The
// message keeps references into its bytes, so they are copied off the
// reader's buffer first.
func decodeLine(line []byte) ([]jsonrpc.Message, error) {
	line = bytes.Clone(line)
	if line[0] != '[' {
		m, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			return nil, err
		}
		return []jsonrpc.Message{m}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil {
		return nil, err
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	for _, raw := range raws {
		m, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
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
		if len(r.msgs) == 0 {
			return nil, errors.New("empty batch")
		}
		c.queue = r.msgs[1:]
		return r.msgs[0], nil
	}
}

func (c *lineConn) Write(_ context.Context, m jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.buf = append(append(c.buf[:0], data...), '\n')
	_, err = c.out.Write(c.buf)
	return err
}

func (c *lineConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *lineConn) SessionID() string { return "" }
